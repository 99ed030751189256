//! Ingestion: parse providers turn a file into a [`ParsedArtifact`]; the indexer (not the
//! providers) turns artifacts into evidence rows.

pub mod artifact;
pub mod bench;
pub mod bench_common;
pub mod bench_sheet;
pub mod bench_slides;
pub mod bench_web;
pub mod corpus;
pub mod docx;
pub mod email;
pub mod fragment;
pub mod html;
pub mod image;
pub mod index;
pub mod jobs;
pub mod markdown;
pub mod mineru;
pub mod ocr;
pub mod parse_env;
pub mod pdf;
pub mod pipeline;
pub mod progress;
pub mod providers;
pub mod sheet;
pub mod slides;
#[cfg(test)]
pub(crate) mod testdata;
pub mod watch;
pub mod worker;

pub use artifact::ParsedArtifact;

/// A parse failure with a stable code (`pdf_malformed`, `docx_malformed`, ...; SPEC §4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ParseError {
    pub code: &'static str,
    pub message: String,
}

impl ParseError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ParseError { code, message: message.into() }
    }
}

/// What a provider gets: the original bytes and what registration knows about them.
pub struct ParseInput<'a> {
    pub bytes: &'a [u8],
    /// File name (for messages and extension checks), e.g. `report.pdf`.
    pub file_name: &'a str,
    /// `markdown|pdf|docx|image|text|spreadsheet|csv|html|email|slides`
    pub kind: &'a str,
}

pub trait ParseProvider: Send + Sync {
    fn provider_id(&self) -> &'static str;
    /// Provider + engine version, recorded in the artifact (`modelVersion`).
    fn provider_version(&self) -> String;
    fn can_parse(&self, kind: &str) -> bool;
    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError>;
}
