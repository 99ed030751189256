//! Legacy binary Office files (`.doc`, `.ppt`, `.msg`): registered under the kind of their
//! modern format (docx, slides, email) and refused with `unsupported_legacy_format`, whose
//! message names what would read them. Converting `.doc`/`.ppt` with LibreOffice is not done
//! yet (`.xls` is read by the spreadsheet reader itself).

use crate::ingest::ParseError;

/// The refusal of a legacy file by its extension (`None`: not a legacy file).
pub fn refused(file_name: &str) -> Option<ParseError> {
    let ext = std::path::Path::new(file_name).extension()?.to_str()?.to_ascii_lowercase();
    let msg = match ext.as_str() {
        "doc" => "a Word 97-2003 document (.doc): save it as .docx (LibreOffice or Word) to index it",
        "ppt" => "a PowerPoint 97-2003 deck (.ppt): save it as .pptx (LibreOffice or PowerPoint) to index it",
        "msg" => "an Outlook message (.msg): LibreOffice cannot convert it; save it as .eml from Outlook to index it",
        _ => return None,
    };
    Some(ParseError::new("unsupported_legacy_format", msg))
}
