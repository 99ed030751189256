//! Legacy binary Office files (`.doc`, `.ppt`, `.msg`), registered under the kind of their
//! modern format (docx, slides, email). With LibreOffice installed (`Config::soffice`) a `.doc`
//! or `.ppt` is converted to `.docx`/`.pptx` before the parse (through the child-process
//! supervisor: its own profile, a timeout, the parse memory limit) and read by the normal
//! provider — the locators are those of the converted file, and the source's provider says it
//! was converted. Otherwise (and always for `.msg`, which LibreOffice cannot read) the parse
//! fails with `unsupported_legacy_format`, naming what to install or save the file as.
//! (`.xls` is read by the spreadsheet reader itself.)

use std::path::Path;

use super::render::{WorkDir, convert as soffice_convert};
use crate::config::Config;
use crate::ingest::{ParseError, ParsedArtifact, artifact};

/// The refusal of a legacy file by its extension (`None`: not a legacy file).
pub fn refused(file_name: &str) -> Option<ParseError> {
    let msg = match extension(file_name)?.as_str() {
        "doc" => {
            "a Word 97-2003 document (.doc): install LibreOffice on the server (Debian: libreoffice-writer-nogui) to convert it, or save it as .docx"
        }
        "ppt" => {
            "a PowerPoint 97-2003 deck (.ppt): install LibreOffice on the server (Debian: libreoffice-impress-nogui) to convert it, or save it as .pptx"
        }
        "msg" => "an Outlook message (.msg): LibreOffice cannot convert it; save it as .eml from Outlook to index it",
        _ => return None,
    };
    Some(ParseError::new("unsupported_legacy_format", msg))
}

fn extension(file_name: &str) -> Option<String> {
    Some(Path::new(file_name).extension()?.to_str()?.to_ascii_lowercase())
}

/// A legacy file converted to its modern format, ready for the parser child.
pub struct Converted {
    pub file: std::fs::File,
    pub name: String,
    from: String,
    source_hash: String,
    _work: WorkDir,
}

impl Converted {
    /// The artifact of the converted file, as the original's: its hash, and its provider
    /// saying it was converted.
    pub fn mark(&self, mut art: ParsedArtifact) -> ParsedArtifact {
        art.source_hash = self.source_hash.clone();
        art.source_map.source_hash = self.source_hash.clone();
        art.provider_version = format!("{} (converted from .{} by LibreOffice)", art.provider_version, self.from);
        art.source_map.model_version = art.provider_version.clone();
        art
    }
}

/// `.doc`/`.ppt` converted by LibreOffice when it is installed; `None`: not such a file, or no
/// LibreOffice (the provider then refuses it).
pub async fn convert(config: &Config, name: &str, original: &Path) -> Option<Result<Converted, ParseError>> {
    let ext = extension(name)?;
    let to = match ext.as_str() {
        "doc" => "docx",
        "ppt" => "pptx",
        _ => return None,
    };
    let soffice = config.soffice.as_deref()?;
    Some(run(config, soffice, &ext, to, name, original).await)
}

async fn run(config: &Config, soffice: &Path, ext: &str, to: &str, name: &str, original: &Path) -> Result<Converted, ParseError> {
    let failed =
        |m: String| ParseError::new("unsupported_legacy_format", format!("LibreOffice could not convert this .{ext} file: {m}"));
    let bytes = tokio::fs::read(original).await.map_err(|e| ParseError::new("file_unreadable", e.to_string()))?;
    let work = WorkDir::new(&std::env::temp_dir()).await.map_err(failed)?;
    let input = work.path().join(format!("original.{ext}"));
    tokio::fs::write(&input, &bytes).await.map_err(|e| failed(e.to_string()))?;
    let out = soffice_convert(config, soffice, &work, &input, to).await.map_err(failed)?;
    let file = std::fs::File::open(&out).map_err(|e| failed(e.to_string()))?;
    let stem = Path::new(name).file_stem().and_then(|s| s.to_str()).unwrap_or("converted");
    Ok(Converted {
        file,
        name: format!("{stem}.{to}"),
        from: ext.to_string(),
        source_hash: artifact::source_hash(&bytes),
        _work: work,
    })
}
