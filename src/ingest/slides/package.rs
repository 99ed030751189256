//! The PPTX package: size-capped parts, relationships, the deck's slide order and size.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use zip::result::ZipError;

use crate::ingest::ParseError;

/// A slide, layout, master or notes part larger than this (uncompressed) is refused.
pub const MAX_PART_XML: u64 = 16 << 20;
/// A picture larger than this is not read by OCR.
pub const MAX_MEDIA: u64 = 32 << 20;

pub fn malformed(msg: impl Into<String>) -> ParseError {
    ParseError::new("slides_malformed", msg)
}

pub type Zip<'a> = zip::ZipArchive<Cursor<&'a [u8]>>;

/// The raw bytes of an entry, refused past `cap` by declared and by actual size.
pub fn read_bytes(zip: &mut Zip<'_>, name: &str, cap: u64) -> Result<Option<Vec<u8>>, ParseError> {
    let file = match zip.by_name(name) {
        Ok(f) => f,
        Err(ZipError::FileNotFound) => return Ok(None),
        Err(ZipError::InvalidPassword) => return Err(ParseError::new("encrypted", format!("{name} is encrypted"))),
        Err(e) => return Err(malformed(format!("{name}: {e}"))),
    };
    if file.size() > cap {
        return Err(ParseError::new("container_too_large", format!("{name} unpacks to {} bytes (at most {cap})", file.size())));
    }
    let mut buf = Vec::new();
    file.take(cap + 1).read_to_end(&mut buf).map_err(|e| malformed(format!("{name}: {e}")))?;
    if buf.len() as u64 > cap {
        return Err(ParseError::new("container_too_large", format!("{name} is larger than {cap} bytes uncompressed")));
    }
    Ok(Some(buf))
}

/// An XML part as text (UTF-8, BOM dropped).
pub fn read_xml(zip: &mut Zip<'_>, name: &str) -> Result<Option<String>, ParseError> {
    let Some(buf) = read_bytes(zip, name, MAX_PART_XML)? else { return Ok(None) };
    let text = String::from_utf8(buf).map_err(|_| malformed(format!("{name} is not UTF-8")))?;
    Ok(Some(text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text)))
}

/// The next XML event; a DTD is refused (its entities are never expanded), an XML error is
/// `slides_malformed`.
pub fn next<'a>(r: &mut Reader<&'a [u8]>, part: &str) -> Result<Event<'a>, ParseError> {
    match r.read_event() {
        Ok(Event::DocType(_)) => {
            Err(ParseError::new("xml_dtd_refused", format!("{part} declares a DTD (entities are never expanded)")))
        }
        Ok(e) => Ok(e),
        Err(e) => Err(malformed(format!("{part}: {e}"))),
    }
}

/// The value of an attribute by its local name (any prefix).
pub fn attr(e: &BytesStart<'_>, local: &str) -> Option<String> {
    e.attributes().filter_map(Result::ok).find_map(|a| {
        (a.key.local_name().as_ref() == local)
            .then(|| a.normalized_value(XmlVersion::Implicit1_0).ok().map(|v| v.into_owned()))
            .flatten()
    })
}

/// A relationship id attribute (`r:id`, `r:embed`): prefixed, so `id="256"` beside `r:id` is
/// not taken for it.
pub fn rel_attr(e: &BytesStart<'_>, local: &str) -> Option<String> {
    e.attributes().filter_map(Result::ok).find_map(|a| {
        let prefixed = a.key.prefix().is_some();
        (prefixed && a.key.local_name().as_ref() == local)
            .then(|| a.normalized_value(XmlVersion::Implicit1_0).ok().map(|v| v.into_owned()))
            .flatten()
    })
}

pub fn local(e: &BytesStart<'_>) -> Vec<u8> {
    e.local_name().as_ref().as_bytes().to_vec()
}

/// A relationship: its type's last segment (`slide`, `notesSlide`, `image`, …) and its
/// target resolved against the part's folder.
#[derive(Clone, Debug)]
pub struct Rel {
    pub kind: String,
    pub target: String,
}

/// The relationships of `part` (`ppt/slides/slide1.xml` → `ppt/slides/_rels/slide1.xml.rels`).
pub fn rels_of(zip: &mut Zip<'_>, part: &str) -> Result<HashMap<String, Rel>, ParseError> {
    let (dir, file) = part.rsplit_once('/').unwrap_or(("", part));
    let name = if dir.is_empty() { format!("_rels/{file}.rels") } else { format!("{dir}/_rels/{file}.rels") };
    let Some(xml) = read_xml(zip, &name)? else { return Ok(HashMap::new()) };
    let mut r = Reader::from_str(&xml);
    let mut out = HashMap::new();
    loop {
        match next(&mut r, &name)? {
            Event::Start(e) | Event::Empty(e) if local(&e) == b"Relationship" => {
                if attr(&e, "TargetMode").as_deref() == Some("External") {
                    continue;
                }
                if let (Some(id), Some(ty), Some(target)) = (attr(&e, "Id"), attr(&e, "Type"), attr(&e, "Target")) {
                    let kind = ty.rsplit('/').next().unwrap_or("").to_string();
                    out.insert(id, Rel { kind, target: resolve(dir, &target) });
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

/// `ppt/slides` + `../media/image1.png` → `ppt/media/image1.png`; `/ppt/x.xml` → `ppt/x.xml`.
pub fn resolve(dir: &str, target: &str) -> String {
    let mut parts: Vec<&str> =
        if target.starts_with('/') { Vec::new() } else { dir.split('/').filter(|s| !s.is_empty()).collect() };
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}

/// The deck: its slides' parts in order and the slide size in EMU.
pub struct Deck {
    pub slides: Vec<String>,
    pub size: [i64; 2],
}

/// `ppt/presentation.xml`: `p:sldIdLst` in order, each `r:id` through the part's rels.
pub fn deck(zip: &mut Zip<'_>, max_slides: usize) -> Result<Deck, ParseError> {
    let part = "ppt/presentation.xml";
    let xml = read_xml(zip, part)?.ok_or_else(|| malformed("ppt/presentation.xml is missing: not a PowerPoint deck"))?;
    let rels = rels_of(zip, part)?;
    let mut r = Reader::from_str(&xml);
    let (mut slides, mut size) = (Vec::new(), [9_144_000, 6_858_000]);
    loop {
        match next(&mut r, part)? {
            Event::Start(e) | Event::Empty(e) => match local(&e).as_slice() {
                b"sldId" => {
                    let rel = rel_attr(&e, "id").and_then(|id| rels.get(&id)).filter(|r| r.kind == "slide");
                    if let Some(rel) = rel {
                        if slides.len() >= max_slides {
                            return Err(ParseError::new(
                                "slides_too_large",
                                format!("more than {max_slides} slides in the deck"),
                            ));
                        }
                        slides.push(rel.target.clone());
                    }
                }
                b"sldSz" => {
                    let n = |k| attr(&e, k).and_then(|v| v.parse::<i64>().ok()).filter(|v| *v > 0);
                    if let (Some(cx), Some(cy)) = (n("cx"), n("cy")) {
                        size = [cx, cy];
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(Deck { slides, size })
}
