//! Reading the package: size-capped zip entries, namespaced XML attributes, OOXML on/off values.

use std::io::Read;

use quick_xml::XmlVersion;
use quick_xml::events::BytesStart;
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;
use zip::result::ZipError;

use crate::ingest::ParseError;

pub(super) fn malformed(msg: impl Into<String>) -> ParseError {
    ParseError::new("docx_malformed", msg)
}

/// Reads a zip entry as UTF-8, refusing entries over `cap` both by declared size and by
/// actual decompressed size (the declared size of a zip bomb may lie).
pub(super) fn read_entry<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    cap: u64,
) -> Result<Option<String>, ParseError> {
    let file = match zip.by_name(name) {
        Ok(f) => f,
        Err(ZipError::FileNotFound) => return Ok(None),
        Err(ZipError::InvalidPassword) => {
            return Err(ParseError::new("docx_encrypted", format!("{name} is encrypted")));
        }
        Err(ZipError::UnsupportedArchive(m)) if m == ZipError::PASSWORD_REQUIRED => {
            return Err(ParseError::new("docx_encrypted", format!("{name} is encrypted")));
        }
        Err(e) => return Err(malformed(format!("{name}: {e}"))),
    };
    if file.size() > cap {
        return Err(malformed(format!("{name} declares {} bytes uncompressed (limit {cap})", file.size())));
    }
    let mut buf = Vec::new();
    file.take(cap + 1).read_to_end(&mut buf).map_err(|e| malformed(format!("{name}: {e}")))?;
    if buf.len() as u64 > cap {
        return Err(malformed(format!("{name} is larger than {cap} bytes uncompressed")));
    }
    let text = String::from_utf8(buf).map_err(|_| malformed(format!("{name} is not UTF-8")))?;
    Ok(Some(text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text)))
}

pub(super) fn is_ns(res: &ResolveResult<'_>, uri: &str) -> bool {
    matches!(res, ResolveResult::Bound(ns) if ns.0 == uri)
}

/// Value of the attribute `local` in namespace `ns` (`None` = unprefixed).
pub(super) fn attr(r: &NsReader<&[u8]>, e: &BytesStart<'_>, ns: Option<&str>, local: &str) -> Option<String> {
    e.attributes().filter_map(Result::ok).find_map(|a| {
        let (res, name) = r.resolver().resolve_attribute(a.key);
        let ns_ok = match ns {
            Some(uri) => is_ns(&res, uri),
            None => matches!(res, ResolveResult::Unbound),
        };
        if !ns_ok || name.as_ref() != local {
            return None;
        }
        a.normalized_value(XmlVersion::Implicit1_0).ok().map(|v| v.into_owned())
    })
}

/// OOXML on/off values: a bare `<w:b/>` is on.
pub(super) fn on_off(val: Option<String>) -> bool {
    !matches!(val.as_deref(), Some("0" | "false" | "off" | "none"))
}
