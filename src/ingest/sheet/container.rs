//! The zip container of an OOXML or ODF file, checked before any reader inflates it: the
//! central directory's declared sizes against a total cap and a per-entry compression-ratio
//! cap, then every entry inflated into nothing with a hard stop one byte past its declared
//! size (an entry that lies about its size is caught here, not inside the XML reader).

use std::io::{Cursor, Read};

use crate::ingest::ParseError;

/// Password-protected OOXML files (and legacy Office 97-2003 files) are OLE compound files.
pub const OLE_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Sum of the entries' uncompressed sizes.
    pub max_unpacked: u64,
    /// Uncompressed ÷ compressed size of one entry, checked for entries above `ratio_from`.
    pub max_ratio: u64,
    pub ratio_from: u64,
    pub max_entries: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps { max_unpacked: 1 << 30, max_ratio: 200, ratio_from: 1 << 20, max_entries: 10_000 }
    }
}

fn entry_name<R: Read>(f: &zip::read::ZipFile<'_, R>) -> String {
    f.name().map(|n| n.into_owned()).unwrap_or_else(|_| "(an entry with an unreadable name)".into())
}

fn too_large(msg: String) -> ParseError {
    ParseError::new("container_too_large", msg)
}

/// Whether a zip is an OpenDocument file (its `mimetype` entry says so).
pub fn is_ods(bytes: &[u8]) -> bool {
    let Ok(mut zip) = zip::ZipArchive::new(Cursor::new(bytes)) else { return false };
    let Ok(mut f) = zip.by_name("mimetype") else { return false };
    let mut s = String::new();
    f.by_ref().take(100).read_to_string(&mut s).is_ok() && s.starts_with("application/vnd.oasis.opendocument")
}

/// Refuse a container that would inflate past the caps (`container_too_large`,
/// `container_ratio_exceeded`) or is no zip at all (`malformed_spreadsheet`).
pub fn check_zip(bytes: &[u8], caps: &Caps) -> Result<(), ParseError> {
    let mut zip =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| malformed(format!("not a readable zip container: {e}")))?;
    if zip.len() > caps.max_entries {
        return Err(too_large(format!("{} entries in the container (at most {})", zip.len(), caps.max_entries)));
    }
    let mut total: u64 = 0;
    for i in 0..zip.len() {
        let f = zip.by_index_raw(i).map_err(|e| malformed(format!("zip entry {i}: {e}")))?;
        let (size, packed) = (f.size(), f.compressed_size().max(1));
        total = total.saturating_add(size);
        if total > caps.max_unpacked {
            return Err(too_large(format!("the container unpacks to more than {} bytes", caps.max_unpacked)));
        }
        if size > caps.ratio_from && size / packed > caps.max_ratio {
            return Err(ParseError::new(
                "container_ratio_exceeded",
                format!("{} inflates {}× (at most {}×): a zip bomb", entry_name(&f), size / packed, caps.max_ratio),
            ));
        }
    }
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).map_err(|e| malformed(format!("zip entry {i}: {e}")))?;
        let declared = f.size();
        let name = entry_name(&f);
        let n = std::io::copy(&mut f.by_ref().take(declared.saturating_add(1)), &mut std::io::sink())
            .map_err(|e| malformed(format!("{name}: {e}")))?;
        if n > declared {
            return Err(too_large(format!("{name} inflates past its declared {declared} bytes")));
        }
    }
    Ok(())
}

/// A workbook (or CSV) that cannot be read: `malformed_spreadsheet`.
pub fn malformed(msg: impl Into<String>) -> ParseError {
    ParseError::new("malformed_spreadsheet", msg)
}
