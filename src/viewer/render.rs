//! Page images for the viewer: a PDF page (or an image the browser cannot show, e.g. TIFF)
//! rendered to PNG by a supervised child process (`mnote render-page`, timeout + `RLIMIT_AS`),
//! at most [`MAX_CONCURRENT`] at a time, never through the ingest job queue. Results are cached
//! on disk by (source sha256, page, scale) under `$MNOTE_DATA_DIR/cache/pages`.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
    time::Duration,
};

use tokio::sync::Semaphore;

use crate::platform::supervise::{SuperviseError, Supervised};

/// Render children running at once (page views beyond that wait for a slot, not for ingestion).
pub const MAX_CONCURRENT: usize = 2;
/// One page render may take this long.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Address-space limit of a render child.
pub const MEMORY_BYTES: u64 = 2 << 30;
/// Longest side of a rendered page in pixels.
pub const MAX_SIDE_PX: f64 = 6000.0;
/// Scales (pixels per PDF point) are clamped to this range and rounded to quarters.
pub const MIN_SCALE: f64 = 0.5;
pub const MAX_SCALE: f64 = 4.0;
pub const DEFAULT_SCALE: f64 = 2.0;

fn slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| Semaphore::new(MAX_CONCURRENT))
}

/// `scale` clamped and rounded to a quarter, so the cache holds few variants.
pub fn normalise_scale(scale: Option<f64>) -> f64 {
    let s = scale.filter(|s| s.is_finite()).unwrap_or(DEFAULT_SCALE).clamp(MIN_SCALE, MAX_SCALE);
    (s * 4.0).round() / 4.0
}

/// Pixel size of a page of `w`×`h` points at `scale`, the longest side capped.
pub fn pixel_size(w: f64, h: f64, scale: f64) -> (u32, u32) {
    let (w, h) = (w.max(1.0), h.max(1.0));
    let s = scale.min(MAX_SIDE_PX / w.max(h));
    (((w * s).round() as u32).max(1), ((h * s).round() as u32).max(1))
}

/// Where the PNG of (`sha256`, `page`, `scale`) is cached.
pub fn cache_path(data_dir: &Path, sha256: &str, page: u32, scale: f64) -> PathBuf {
    let hex: String = sha256.trim_start_matches("sha256:").chars().filter(|c| c.is_ascii_hexdigit()).collect();
    let shard = hex.get(..2).unwrap_or("00").to_string();
    data_dir.join("cache").join("pages").join(shard).join(&hex).join(format!("p{page}-s{}.png", (scale * 100.0).round() as u32))
}

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("render_timeout: rendering took longer than {0:?}")]
    Timeout(Duration),
    #[error("render_failed: {0}")]
    Failed(String),
}

/// Render `page` of `src` (a PDF, or any image for `kind == "image"`) into `out` as PNG of
/// `width`×`height` pixels (images keep their own size), in a supervised child. The file
/// appears atomically (written next to `out`, then renamed). `src` is the open original
/// (see [`crate::grants::paths::open_beneath`]): the child gets the descriptor, never a path.
pub async fn render_supervised(
    exe: &Path,
    kind: &str,
    src: std::fs::File,
    page: u32,
    size: (u32, u32),
    out: &Path,
) -> Result<(), RenderError> {
    let _slot = slots().acquire().await.map_err(|e| RenderError::Failed(e.to_string()))?;
    if out.is_file() {
        return Ok(()); // rendered by a request that held the slot before us
    }
    let dir = out.parent().ok_or_else(|| RenderError::Failed("cache path has no parent".into()))?;
    tokio::fs::create_dir_all(dir).await.map_err(|e| RenderError::Failed(format!("cache directory: {e}")))?;
    let tmp = dir.join(format!(".tmp-{}.png", uuid::Uuid::new_v4().simple()));
    let mut cmd = tokio::process::Command::new(exe);
    let src_path = crate::grants::paths::pass_to_child(&mut cmd, &src);
    cmd.arg("render-page")
        .arg("--kind")
        .arg(kind)
        .arg("--page")
        .arg(page.to_string())
        .arg("--width")
        .arg(size.0.to_string())
        .arg("--height")
        .arg(size.1.to_string())
        .arg(src_path)
        .arg(&tmp)
        .env("RUST_LOG", "error");
    let run = Supervised::new(cmd).memory_limit(MEMORY_BYTES).timeout(TIMEOUT).discard_stdout().run().await;
    drop(src);
    let result = match run {
        Err(SuperviseError::Timeout(t)) => Err(RenderError::Timeout(t)),
        Err(SuperviseError::Spawn(e)) => Err(RenderError::Failed(format!("starting the renderer: {e}"))),
        Err(SuperviseError::Io(e)) => Err(RenderError::Failed(e.to_string())),
        Ok(child) if child.status.success() => tokio::fs::rename(&tmp, out).await.map_err(|e| RenderError::Failed(e.to_string())),
        Ok(child) => Err(RenderError::Failed(format!("the renderer failed ({}): {}", child.status, child.stderr_tail(300)))),
    };
    if result.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    result
}

// ---- the child ----------------------------------------------------------------------------

/// Entry point of `mnote render-page`: exit 0 with the PNG written, 3 with a message on stderr.
pub fn render_page_main(kind: &str, page: u32, width: u32, height: u32, src: &Path, out: &Path) -> i32 {
    let result = match kind {
        "pdf" => render_pdf(src, page, width, height),
        "image" => image::ImageReader::open(src)
            .and_then(|r| r.with_guessed_format())
            .map_err(|e| e.to_string())
            .and_then(|r| r.decode().map_err(|e| e.to_string())),
        other => Err(format!("cannot render kind {other}")),
    };
    let written = result.and_then(|img| {
        let rgb = image::DynamicImage::ImageRgb8(img.to_rgb8());
        let f = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
        let mut w = std::io::BufWriter::new(f);
        rgb.write_to(&mut w, image::ImageFormat::Png).map_err(|e| e.to_string())
    });
    match written {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("render-page: {e}");
            3
        }
    }
}

/// Fallback locations of `libpdfium.so` under the project root (as for the PDF provider).
const LOCAL_LIBS: [&str; 2] = [".local/pdfium/libpdfium.so", ".local/pdfium-5.15.2/libpdfium.so"];

fn render_pdf(src: &Path, page: u32, width: u32, height: u32) -> Result<image::DynamicImage, String> {
    use pdfium_render::prelude::*;
    let lib = match crate::config::pdfium_lib() {
        Some(v) => v,
        None => LOCAL_LIBS
            .iter()
            .map(|p| Path::new(env!("CARGO_MANIFEST_DIR")).join(p))
            .find(|p| p.is_file())
            .ok_or_else(|| "libpdfium.so not found: set MNOTE_PDFIUM_LIB".to_string())?,
    };
    let bindings = Pdfium::bind_to_library(&lib).map_err(|e| format!("cannot load {}: {e:?}", lib.display()))?;
    let pdfium = Pdfium::new(bindings);
    let doc = pdfium.load_pdf_from_file(src, None).map_err(|e| format!("not a readable PDF: {e:?}"))?;
    let index = page.checked_sub(1).ok_or("pages start at 1")?;
    let index = i32::try_from(index).map_err(|_| "page out of range".to_string())?;
    let p = doc.pages().get(index).map_err(|e| format!("page {page}: {e:?}"))?;
    let config = PdfRenderConfig::new()
        .set_target_size(width.max(1) as i32, height.max(1) as i32)
        .render_form_data(true)
        .render_annotations(true);
    p.render_with_config(&config).and_then(|b| b.as_image()).map_err(|e| format!("rendering page {page}: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_clamped_and_quantised() {
        assert_eq!(normalise_scale(None), 2.0);
        assert_eq!(normalise_scale(Some(1.3)), 1.25);
        assert_eq!(normalise_scale(Some(100.0)), 4.0);
        assert_eq!(normalise_scale(Some(f64::NAN)), 2.0);
        assert_eq!(normalise_scale(Some(0.0)), 0.5);
    }

    #[test]
    fn pixel_sizes_keep_the_aspect_and_cap_the_side() {
        assert_eq!(pixel_size(612.0, 792.0, 2.0), (1224, 1584));
        let (w, h) = pixel_size(10000.0, 5000.0, 4.0);
        assert_eq!((w, h), (6000, 3000));
    }

    #[test]
    fn cache_paths_are_sharded_by_hash() {
        let p = cache_path(Path::new("/d"), "sha256:abcdef", 3, 1.5);
        assert_eq!(p, Path::new("/d/cache/pages/ab/abcdef/p3-s150.png"));
        let p = cache_path(Path::new("/d"), "sha256:../../x", 1, 1.0);
        assert!(!p.to_string_lossy().contains(".."));
    }
}
