//! Which provider parses which kind.

use super::{
    ParseError, ParseProvider,
    docx::DocxProvider,
    email::EmailProvider,
    html::HtmlProvider,
    image::ImageProvider,
    markdown::MarkdownProvider,
    pdf::PdfProvider,
    sheet::{CsvProvider, SpreadsheetProvider},
    slides::SlidesProvider,
};

pub fn for_kind(kind: &str) -> Result<Box<dyn ParseProvider>, ParseError> {
    let all: Vec<Box<dyn ParseProvider>> = vec![
        Box::new(MarkdownProvider),
        Box::new(DocxProvider),
        Box::new(PdfProvider),
        Box::new(ImageProvider),
        Box::new(SpreadsheetProvider),
        Box::new(CsvProvider),
        Box::new(HtmlProvider),
        Box::new(EmailProvider { attachments: for_kind }),
        Box::new(SlidesProvider),
    ];
    all.into_iter()
        .find(|p| p.can_parse(kind))
        .ok_or_else(|| ParseError::new("unsupported_kind", format!("no parser for {kind} files")))
}
