//! Image parse provider (PNG, JPEG, WebP, TIFF, BMP): local Tesseract OCR (SPEC §4).
//!
//! One page (page 1, width/height = image pixels, `ocr: true`). A block is one Tesseract
//! *paragraph*, not one line: a line is a fragment of a sentence, too small to be useful
//! evidence on its own and split mid-phrase, while a paragraph is the unit the text PDF
//! provider also uses, so search and citations behave the same for scans and text. The
//! paragraph bbox (union of its lines) still pins the text down on the image.

use std::io::Cursor;

use ::image::{DynamicImage, ImageReader, imageops::FilterType};

use super::artifact::{self, Block, Page, ParsedArtifact, TextBuilder};
use super::ocr::{self, OcrPage};
use super::{ParseError, ParseInput, ParseProvider};

const PROVIDER_ID: &str = "tesseract";
const PROVIDER_VERSION: &str = "mnote-image/1";

/// Longest side Tesseract gets; bigger images (camera photos) are scaled down for OCR and the
/// boxes scaled back. 5000 px keeps a full A4 scan at 400+ DPI and bounds memory and time.
const MAX_OCR_SIDE: u32 = 5000;

pub struct ImageProvider;

impl ParseProvider for ImageProvider {
    fn provider_id(&self) -> &'static str {
        PROVIDER_ID
    }

    fn provider_version(&self) -> String {
        let engine = ocr::tesseract_version().unwrap_or_else(|_| "tesseract (unavailable)".into());
        format!("{PROVIDER_VERSION} {engine} {}", ocr::DEFAULT_LANGS)
    }

    fn can_parse(&self, kind: &str) -> bool {
        kind == "image"
    }

    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        let img = decode(input)?;
        let (width, height) = (img.width(), img.height());
        let page = ocr_scaled(&img)?;
        drop(img);

        let mut text = TextBuilder::default();
        let mut blocks = Vec::new();
        for para in page.paragraphs() {
            let char_range = text.push_block(&para.text);
            blocks.push(Block {
                id: format!("p1_b{}", blocks.len() + 1),
                text_fingerprint: artifact::fingerprint(&para.text),
                char_range,
                page: Some(1),
                bbox: Some(clamp_box(para.bbox, width as f64, height as f64)),
                quality: ocr::quality_for(para.confidence),
                confidence: Some(round1(para.confidence)),
                ..Block::flowing(para.text)
            });
        }
        let page = Page { page: 1, width: width as f64, height: height as f64, rotation: 0, ocr: true, blocks };
        Ok(ParsedArtifact::paged(
            PROVIDER_ID,
            self.provider_version(),
            artifact::source_hash(input.bytes),
            "image",
            text.finish(),
            vec![page],
            Vec::new(),
        ))
    }
}

/// Decode the whole image; a format the header does not reveal, a corrupt or truncated file
/// is `image_unreadable`.
fn decode(input: &ParseInput<'_>) -> Result<DynamicImage, ParseError> {
    let unreadable = |e: &dyn std::fmt::Display| {
        ParseError::new("image_unreadable", format!("{} is not a readable image: {e}", input.file_name))
    };
    let reader = ImageReader::new(Cursor::new(input.bytes)).with_guessed_format().map_err(|e| unreadable(&e))?;
    if reader.format().is_none() {
        return Err(unreadable(&"unknown image format"));
    }
    // The JPEG decoder fills a cut-off scan with grey instead of failing: the rest of the
    // image would silently be missing from the evidence.
    if reader.format() == Some(::image::ImageFormat::Jpeg) && !jpeg_has_end(input.bytes) {
        return Err(unreadable(&"truncated JPEG (no end-of-image marker after the image data)"));
    }
    let img = reader.decode().map_err(|e| unreadable(&e))?;
    if img.width() == 0 || img.height() == 0 {
        return Err(unreadable(&"empty image"));
    }
    Ok(img)
}

/// Whether an end-of-image marker (`FF D9`) follows the last start-of-scan (`FF DA`). Inside
/// entropy-coded data every `FF` is stuffed (`FF 00`) or a restart marker, so neither pair
/// appears there by chance.
fn jpeg_has_end(bytes: &[u8]) -> bool {
    let last_scan = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]).unwrap_or(0);
    bytes[last_scan..].windows(2).any(|w| w == [0xFF, 0xD9])
}

/// OCR at most [`MAX_OCR_SIDE`] pixels on the longest side; boxes come back in the original
/// image's pixels.
fn ocr_scaled(img: &DynamicImage) -> Result<OcrPage, ParseError> {
    let longest = img.width().max(img.height());
    if longest <= MAX_OCR_SIDE {
        return ocr::ocr_image(img, None);
    }
    let factor = MAX_OCR_SIDE as f64 / longest as f64;
    let w = ((img.width() as f64 * factor).round() as u32).max(1);
    let h = ((img.height() as f64 * factor).round() as u32).max(1);
    let scaled = match grey_pixels(img) {
        // The same pixels as the generic resize below, a single channel at a time.
        Some(grey) => DynamicImage::ImageLuma8(resize_grey_triangle(&grey, w, h)),
        None => img.resize_exact(w, h, FilterType::Triangle),
    };
    let mut page = ocr::ocr_image(&scaled, None)?;
    let back = 1.0 / factor;
    for line in &mut page.lines {
        line.bbox = line.bbox.map(|v| v * back);
        for word in &mut line.words {
            word.bbox = word.bbox.map(|v| v * back);
        }
    }
    Ok(page)
}

/// The image as 8-bit grey when that loses nothing: grey already, or RGB with every pixel
/// grey (scans saved as colour, pages rendered by `pdftoppm -gray`). Colour and alpha stay
/// with the generic path.
fn grey_pixels(img: &DynamicImage) -> Option<std::borrow::Cow<'_, ::image::GrayImage>> {
    match img {
        DynamicImage::ImageLuma8(g) => Some(std::borrow::Cow::Borrowed(g)),
        DynamicImage::ImageRgb8(rgb) if rgb.pixels().all(|p| p[0] == p[1] && p[1] == p[2]) => {
            Some(std::borrow::Cow::Owned(img.to_luma8()))
        }
        _ => None,
    }
}

/// `imageops::resize(grey, w, h, FilterType::Triangle)` for one grey channel, computing the
/// very same values: the same weights, the same `f32` sums in the same order, the same
/// rounding. The generic resize works on four `f32` channels per pixel through per-pixel
/// accessors, with a four-channel intermediate image (720 MB for a 9000 px square page);
/// this took 4.5 of the 5.5 s that page cost. `resized_grey_matches_the_generic_resize`
/// checks the equality.
fn resize_grey_triangle(src: &::image::GrayImage, new_w: u32, new_h: u32) -> ::image::GrayImage {
    let (w, h) = (src.width() as usize, src.height() as usize);
    let (nw, nh) = (new_w as usize, new_h as usize);
    if w == 0 || h == 0 || (nw, nh) == (w, h) {
        return ::image::imageops::resize(src, new_w, new_h, FilterType::Triangle);
    }
    let pixels = src.as_raw();
    // Vertical pass: `nh` rows of `w` sums.
    let mut mid = vec![0f32; w * nh];
    for (out_y, row) in mid.chunks_exact_mut(w).enumerate() {
        let (first, weights) = triangle_weights(out_y, h, nh);
        for (i, weight) in weights.iter().enumerate() {
            let src_row = &pixels[(first + i) * w..(first + i + 1) * w];
            for (t, &v) in row.iter_mut().zip(src_row) {
                *t += v as f32 * weight;
            }
        }
    }
    // Horizontal pass, rounded to the nearest value in 0..=255.
    let mut out = vec![0u8; nw * nh];
    for out_x in 0..nw {
        let (first, weights) = triangle_weights(out_x, w, nw);
        for y in 0..nh {
            let row = &mid[y * w + first..y * w + first + weights.len()];
            let mut t = 0f32;
            for (&v, weight) in row.iter().zip(&weights) {
                t += v * weight;
            }
            let t = t.clamp(0.0, 255.0);
            out[y * nw + out_x] = t.round() as u8;
        }
    }
    ::image::GrayImage::from_raw(new_w, new_h, out).expect("buffer sized for the image")
}

/// First source index and normalised triangle-filter weights for output index `out` when
/// `len` samples become `new_len` (`image`'s `vertical_sample` / `horizontal_sample`).
fn triangle_weights(out: usize, len: usize, new_len: usize) -> (usize, Vec<f32>) {
    let ratio = len as f32 / new_len as f32;
    let sratio = if ratio < 1.0 { 1.0 } else { ratio };
    let support = sratio; // the triangle kernel's support is 1
    let input = (out as f32 + 0.5) * ratio;
    let clamp = |v: i64, lo: i64, hi: i64| {
        if v < lo {
            lo
        } else if v > hi {
            hi
        } else {
            v
        }
    };
    let left = clamp((input - support).floor() as i64, 0, len as i64 - 1);
    let right = clamp((input + support).ceil() as i64, left + 1, len as i64);
    let input = input - 0.5;
    let mut weights = Vec::with_capacity((right - left) as usize);
    let mut sum = 0f32;
    for i in left..right {
        let x = (i as f32 - input) / sratio;
        let weight = if x.abs() < 1.0 { 1.0 - x.abs() } else { 0.0 };
        weights.push(weight);
        sum += weight;
    }
    for weight in &mut weights {
        *weight /= sum;
    }
    (left as usize, weights)
}

fn clamp_box(b: [f64; 4], width: f64, height: f64) -> [f64; 4] {
    [b[0].clamp(0.0, width), b[1].clamp(0.0, height), b[2].clamp(0.0, width), b[3].clamp(0.0, height)]
}

/// Confidences are stored with one decimal: enough for thresholds, stable in JSON.
fn round1(v: f32) -> f32 {
    (v * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Instant;

    use super::*;
    use crate::ingest::artifact::Quality;

    fn testdata(name: &str) -> Vec<u8> {
        crate::ingest::testdata::read(&format!("images/{name}"))
    }

    fn parse_bytes(bytes: &[u8], name: &str) -> Result<ParsedArtifact, ParseError> {
        ImageProvider.parse(&ParseInput { bytes, file_name: name, kind: "image" })
    }

    fn parse(name: &str) -> ParsedArtifact {
        let started = Instant::now();
        let a = parse_bytes(&testdata(name), name).unwrap();
        eprintln!("{name}: parsed in {:?}", started.elapsed());
        a.validate().unwrap();
        a
    }

    #[test]
    fn english_image_gives_paragraph_blocks_with_pixel_boxes() {
        // A 300 dpi scan of a brochure page (OCRmyPDF's linn.png).
        let a = parse("ocr_linn.png");
        let page = &a.source_map.pages[0];
        assert_eq!((page.page, page.width, page.height, page.ocr), (1, 2550.0, 3300.0, true));
        assert_eq!(a.source_map.page_count, Some(1));
        assert_eq!(a.source_map.resource_kind, "image");
        assert!(a.source_map.sections.is_empty());
        let b = &page.blocks;
        assert!(b.len() >= 2, "{b:#?}");
        assert_eq!(b[0].id, "p1_b1");
        assert!(b[0].text.contains("The LinnSequencer"), "{:?}", b[0].text);
        assert!(a.text.contains("composition and performance tool for the professional musician"), "{}", a.text);
        // The centred title and sub-title sit at roughly x 582–1968, y 131–303; the paragraphs
        // below them.
        let [x0, y0, x1, y1] = b[0].bbox.unwrap();
        assert!(x0 > 500.0 && y0 < 150.0 && x1 < 2000.0 && y1 < 330.0, "{:?}", b[0].bbox);
        assert!(b[1].bbox.unwrap()[1] > 200.0);
        for block in b {
            assert_eq!(block.page, Some(1));
            assert_eq!(block.quality, Quality::Exact);
            assert!(block.confidence.unwrap() > 80.0);
        }
        assert!(a.provider_version.contains("tesseract "), "{}", a.provider_version);
    }

    #[test]
    fn chinese_text_has_no_spaces_between_characters() {
        // The generated Chinese image (tests/fixtures/generate.py): no registry package found
        // ships a real photo of Chinese text (see tests/testdata/SOURCES.tsv).
        let dir = PathBuf::from(std::env::var_os("MNOTE_FIXTURES_DIR").expect("MNOTE_FIXTURES_DIR (run through ./dev test)"));
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
        let img = &expected["image"];
        let bytes = std::fs::read(dir.join("scope_zh.png")).unwrap();
        let a = parse_bytes(&bytes, "scope_zh.png").unwrap();
        a.validate().unwrap();
        let want = img["text"].as_str().unwrap();
        assert!(a.text.contains(want), "{want} in {}", a.text);
        let [w, h] = [img["imageSize"][0].as_f64().unwrap(), img["imageSize"][1].as_f64().unwrap()];
        let page = &a.source_map.pages[0];
        assert_eq!((page.width, page.height), (w, h));
        for b in &page.blocks {
            let [x0, y0, x1, y1] = b.bbox.unwrap();
            assert!(0.0 <= x0 && x0 < x1 && x1 <= w && 0.0 <= y0 && y0 < y1 && y1 <= h);
        }
    }

    #[test]
    fn sparse_labels_are_read_with_sparse_segmentation() {
        // The top band of a real map (OCRmyPDF's baiona.png): psm 3 finds nothing there; the
        // sparse retry reads the place names ("Bokale", and "Tarnose" as "Tamose").
        let map = ::image::load_from_memory(&testdata("ocr_baiona.png")).unwrap();
        let mut band = Vec::new();
        map.crop_imm(0, 0, 640, 140).write_to(&mut Cursor::new(&mut band), ::image::ImageFormat::Png).unwrap();
        let a = parse_bytes(&band, "band.png").unwrap();
        a.validate().unwrap();
        assert!(a.text.contains("Bokale"), "{}", a.text);
        // One line from "Bokale" (x 186) to "Tarnose" (x 429), y 15–46 of the 640×140 band.
        let line = a.all_blocks().find(|b| b.text.contains("Bokale")).unwrap();
        let [x0, y0, x1, y1] = line.bbox.unwrap();
        assert!((170.0..200.0).contains(&x0) && x1 < 450.0 && y0 > 5.0 && y1 < 60.0, "{:?}", line.bbox);
    }

    #[test]
    fn same_bytes_give_the_same_artifact() {
        assert_eq!(parse("ocr_crom.png"), parse("ocr_crom.png"));
    }

    #[test]
    fn webp_and_transparent_png_are_read() {
        // Re-encode the English line: as lossless WebP, and as a PNG whose text is opaque on
        // a fully transparent background (must not turn into black-on-black).
        let src = ::image::load_from_memory(&testdata("ocr_crom.png")).unwrap();
        let mut webp = Vec::new();
        src.write_to(&mut Cursor::new(&mut webp), ::image::ImageFormat::WebP).unwrap();
        let a = parse_bytes(&webp, "x.webp").unwrap();
        assert!(a.text.contains("cromulent"), "{}", a.text);

        let grey = src.to_luma8();
        let rgba = ::image::RgbaImage::from_fn(grey.width(), grey.height(), |x, y| {
            let v = grey.get_pixel(x, y)[0];
            ::image::Rgba([0, 0, 0, 255 - v]) // dark text = opaque black, paper = transparent
        });
        let mut png = Vec::new();
        DynamicImage::ImageRgba8(rgba).write_to(&mut Cursor::new(&mut png), ::image::ImageFormat::Png).unwrap();
        let a = parse_bytes(&png, "x.png").unwrap();
        assert!(a.text.contains("cromulent"), "{}", a.text);
    }

    #[test]
    fn resized_grey_matches_the_generic_resize() {
        // Pseudo-random grey noise with some structure; sizes that shrink by odd ratios.
        let noise = |w: u32, h: u32| {
            ::image::GrayImage::from_fn(w, h, |x, y| {
                let v = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)).wrapping_add(x * y) >> 7;
                ::image::Luma([(v % 256) as u8])
            })
        };
        let sizes = [(900, 700, 500, 389), (513, 1027, 257, 514), (61, 40, 17, 40), (300, 300, 299, 1), (7, 5, 3, 2)];
        for (w, h, nw, nh) in sizes {
            let src = noise(w, h);
            let generic = ::image::imageops::resize(&src, nw, nh, FilterType::Triangle);
            assert!(resize_grey_triangle(&src, nw, nh) == generic, "{w}x{h} -> {nw}x{nh}");
            // An RGB image whose pixels are all grey: resize, then to grey, as before.
            let rgb = DynamicImage::ImageRgb8(::image::RgbImage::from_fn(w, h, |x, y| {
                let v = src.get_pixel(x, y)[0];
                ::image::Rgb([v, v, v])
            }));
            let grey = grey_pixels(&rgb).expect("all pixels are grey");
            assert!(resize_grey_triangle(&grey, nw, nh) == rgb.resize_exact(nw, nh, FilterType::Triangle).to_luma8());
        }
        let colour = DynamicImage::ImageRgb8(::image::RgbImage::from_pixel(4, 4, ::image::Rgb([10, 20, 30])));
        assert!(grey_pixels(&colour).is_none());
        assert!(grey_pixels(&DynamicImage::ImageLumaA8(::image::GrayAlphaImage::new(2, 2))).is_none());
    }

    #[test]
    fn corrupt_images_are_unreadable() {
        let err = parse_bytes(b"definitely not an image", "x.png").unwrap_err();
        assert_eq!(err.code, "image_unreadable");
        let mut truncated = testdata("ocr_baiona_color.jpg");
        let mut png = Vec::new();
        ::image::load_from_memory(&truncated).unwrap().write_to(&mut Cursor::new(&mut png), ::image::ImageFormat::Png).unwrap();
        png.truncate(png.len() / 2);
        assert_eq!(parse_bytes(&png, "x.png").unwrap_err().code, "image_unreadable");
        // Cut inside the scan: the decoder would return a half-grey image.
        let half = truncated[..truncated.len() / 2].to_vec();
        assert_eq!(parse_bytes(&half, "x.jpg").unwrap_err().code, "image_unreadable");
        truncated.truncate(10);
        assert_eq!(parse_bytes(&truncated, "x.jpg").unwrap_err().code, "image_unreadable");
    }
}
