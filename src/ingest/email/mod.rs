//! E-mail provider (`.eml`, and `.mbox` as a sequence of messages): a message → its header block, its body and its attachments, every
//! block located in the message.
//!
//! Rules a viewer or client can reproduce:
//! - Parsed by `mail-parser` (RFC 5322 / MIME, every charset `encoding_rs` knows: GB2312, GBK,
//!   GB18030, Big5…, quoted-printable and base64, RFC 2047 encoded words).
//! - Blocks, in order: the subject as the top heading (when there is one); the header block
//!   (`From`, `To`, `Cc`, `Date` as RFC 3339, `Subject`, one per line); the body — the first
//!   `text/plain` part split into paragraphs at blank lines, quoted replies (`>` lines and the
//!   line introducing them) as `quote` blocks, or, without a plain part, the first HTML part
//!   read by the web-page provider; then every attachment: a heading naming it (so the message
//!   lists its attachments) followed by the blocks its own provider gives (PDF, DOCX, images
//!   (OCR), Markdown, text, HTML, a nested message…), their ids prefixed `a{n}_` (n = the
//!   attachment's 1-based position), their headings one level under the attachment's, their
//!   own locator fields kept (a PDF attachment's blocks keep `page` and `bbox`).
//! - An attachment of an unsupported kind, too large, or that its provider refuses is listed
//!   with the reason; the message itself still indexes. Inline parts (`Content-Disposition:
//!   inline`, e.g. a signature logo) are not attachments.
//! - An mbox file: its messages in order, each as above under its own subject, block ids
//!   prefixed `m{n}_` (n = 1-based position in the file); a message in it that cannot be read
//!   is listed as `#n (code)`.
//! - Refused: an encrypted message (S/MIME or PGP: `encrypted`), messages nested deeper than
//!   [`MAX_DEPTH`] (`email_too_deep`), bytes that are not a message — none of `From`, `To`, `Date`, `Subject`,
//!   `Message-ID` — (`email_malformed`).

mod body;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use mail_parser::{Address, Message, MessageParser, MimeHeaders, PartType};

use super::artifact::{self, Block, BlockType, ParsedArtifact, SOURCE_MAP_SCHEMA, SectionTree, SourceMap, TextBuilder};
use super::{ParseError, ParseInput, ParseProvider, html};
use crate::evidence::SourceKind;
use crate::evidence::attachment::AttachmentPlace;

const VERSION: &str = "mnote-email/1";
/// Messages inside messages inside messages: deeper is refused.
pub const MAX_DEPTH: usize = 3;
/// An attachment larger than this (decoded) is listed, not read.
const MAX_ATTACHMENT: usize = 64 << 20;
/// Messages read from one mbox file; more is refused (`file_too_large`).
const MAX_MBOX_MESSAGES: usize = 50_000;
/// Attachments read per message (the rest are listed).
const MAX_ATTACHMENTS: usize = 100;

/// The provider that reads an attachment of a kind (`providers::for_kind`): handed in, so
/// e-mail does not import the provider list that includes it.
pub type AttachmentReader = fn(&str) -> Result<Box<dyn ParseProvider>, ParseError>;

pub struct EmailProvider {
    pub attachments: AttachmentReader,
}

impl ParseProvider for EmailProvider {
    fn provider_id(&self) -> &'static str {
        "email"
    }
    fn provider_version(&self) -> String {
        VERSION.to_string()
    }
    fn can_parse(&self, kind: &str) -> bool {
        kind == "email"
    }
    fn parse(&self, input: &ParseInput<'_>) -> Result<ParsedArtifact, ParseError> {
        if let Some(e) = super::slides::legacy::refused(input.file_name) {
            return Err(e);
        }
        let mut out = Out::new(self.attachments);
        if input.file_name.to_ascii_lowercase().ends_with(".mbox") {
            out.mailbox(input.bytes)?;
        } else {
            out.message(&parse_message(input.bytes)?, "", 1, 0)?;
        }
        Ok(out.finish(input.bytes))
    }
}

fn parse_message(bytes: &[u8]) -> Result<Message<'_>, ParseError> {
    let message = MessageParser::default()
        .parse(bytes)
        .filter(|m| {
            m.from().is_some() || m.to().is_some() || m.date().is_some() || m.subject().is_some() || m.message_id().is_some()
        })
        .ok_or_else(|| ParseError::new("email_malformed", "not an e-mail message (no From, To, Date, Subject or Message-ID)"))?;
    let encrypted = message.content_type().is_some_and(|ct| {
        let sub = ct.subtype().unwrap_or("").to_ascii_lowercase();
        (ct.ctype().eq_ignore_ascii_case("multipart") && sub == "encrypted")
            || (ct.ctype().eq_ignore_ascii_case("application") && (sub == "pkcs7-mime" || sub == "x-pkcs7-mime"))
    });
    if encrypted {
        return Err(ParseError::new("encrypted", "the message is encrypted (S/MIME or PGP)"));
    }
    Ok(message)
}

/// The message's blocks as they are appended.
struct Out {
    tb: TextBuilder,
    blocks: Vec<Block>,
    tree: SectionTree,
    attachments: AttachmentReader,
    /// The attachments being read, outermost first: every block pushed meanwhile is theirs.
    within: Vec<AttachmentPlace>,
}

impl Out {
    fn new(attachments: AttachmentReader) -> Self {
        Out { tb: TextBuilder::default(), blocks: Vec::new(), tree: SectionTree::default(), attachments, within: Vec::new() }
    }

    fn push(&mut self, id: String, block_type: BlockType, text: String, from: Option<&Block>) {
        let section_id = self.tree.add_block(&id);
        let mut b = from.cloned().unwrap_or_else(|| plain_block(&text));
        b.id = id;
        b.block_type = block_type;
        b.char_range = self.tb.push_block(&text);
        b.section_id = section_id;
        b.text_fingerprint = artifact::fingerprint(&text);
        b.text = text;
        b.attachment = self.within.last().cloned();
        self.blocks.push(b);
    }

    fn heading(&mut self, id: String, text: String, level: u8) {
        self.tree.open(text.split_whitespace().collect::<Vec<_>>().join(" "), level, |_| {});
        self.push(id, BlockType::Heading, text, None);
    }

    /// An mbox file: every message in turn, each under its own subject, ids prefixed `m{n}_`.
    /// A message that cannot be read is listed with its code; the others still index.
    fn mailbox(&mut self, bytes: &[u8]) -> Result<(), ParseError> {
        let messages = mail_parser::mailbox::mbox::MessageIterator::new(std::io::Cursor::new(bytes));
        let mut n = 0;
        for m in messages {
            let m = m.map_err(|e| ParseError::new("email_malformed", format!("mbox: {e}")))?;
            n += 1;
            if n > MAX_MBOX_MESSAGES {
                return Err(ParseError::new("file_too_large", format!("more than {MAX_MBOX_MESSAGES} messages in one mbox")));
            }
            let prefix = format!("m{n}_");
            match parse_message(m.contents()) {
                Ok(message) => self.message(&message, &prefix, 1, 0)?,
                Err(e) => self.heading(format!("{prefix}h"), format!("#{n} ({})", e.code), 1),
            }
        }
        if n == 0 {
            return Err(ParseError::new("email_malformed", "no message in the mbox (no \"From \" line)"));
        }
        Ok(())
    }

    /// A message (the file itself at depth 0, or a nested one) under `prefix`, its subject a
    /// heading at `level`.
    fn message(&mut self, m: &Message<'_>, prefix: &str, level: u8, depth: usize) -> Result<(), ParseError> {
        if depth > MAX_DEPTH {
            return Err(ParseError::new("email_too_deep", format!("messages nested more than {MAX_DEPTH} deep")));
        }
        let mut n = 0;
        let mut id = || {
            n += 1;
            format!("{prefix}b{n}")
        };
        if let Some(subject) = m.subject().map(str::trim).filter(|s| !s.is_empty()) {
            self.heading(id(), subject.to_string(), level);
        }
        self.push(id(), BlockType::Paragraph, header_text(m), None);
        if let Some(plain) = m.text_part(0).filter(|p| !p.is_text_html()).and_then(|p| p.text_contents()) {
            for p in body::paragraphs(plain) {
                self.push(id(), p.block_type, p.text, None);
            }
        } else if let Some(page) = m.html_part(0).and_then(|p| p.text_contents()) {
            for rb in html::parse_str_blocks(page) {
                let (block_type, level_of) = html::block_type(rb.kind);
                if let Some(l) = level_of {
                    self.heading(id(), rb.text, (level + l).min(u8::MAX - 1));
                } else {
                    self.push(id(), block_type, rb.text, None);
                }
            }
        }
        for (i, part) in m.attachments().enumerate() {
            let inline = part.content_disposition().is_some_and(|d| d.ctype().eq_ignore_ascii_case("inline"));
            if inline && !part.is_message() {
                continue;
            }
            let prefix = format!("{prefix}a{}_", i + 1);
            self.attachment(part, &prefix, i, level + 1, depth)?;
        }
        Ok(())
    }

    /// An attachment at `i`: its blocks located in it ([`AttachmentPlace`]).
    fn attachment(
        &mut self,
        part: &mail_parser::MessagePart<'_>,
        prefix: &str,
        i: usize,
        level: u8,
        depth: usize,
    ) -> Result<(), ParseError> {
        let name = part.attachment_name().map(str::to_string).unwrap_or_else(|| format!("attachment-{}", i + 1));
        let kind = match &part.body {
            PartType::Message(_) => Some(SourceKind::Email),
            _ => std::path::Path::new(&name).extension().and_then(|e| e.to_str()).and_then(SourceKind::of_extension),
        };
        let mut path: Vec<String> = self.within.iter().map(|a| a.name.clone()).collect();
        path.push(name.clone());
        self.within.push(AttachmentPlace { name: name.clone(), kind, position: i as u32 + 1, path });
        let read = self.read_attachment(part, name, kind, prefix, i, level, depth);
        self.within.pop();
        read
    }

    #[allow(clippy::too_many_arguments)]
    fn read_attachment(
        &mut self,
        part: &mail_parser::MessagePart<'_>,
        name: String,
        kind: Option<SourceKind>,
        prefix: &str,
        i: usize,
        level: u8,
        depth: usize,
    ) -> Result<(), ParseError> {
        if let PartType::Message(nested) = &part.body {
            self.tree.open(name.clone(), level, |_| {});
            self.push(format!("{prefix}h"), BlockType::Heading, name, None);
            return self.message(nested, prefix, level + 1, depth + 1);
        }
        let bytes = part.contents();
        let inner = match kind {
            _ if i >= MAX_ATTACHMENTS => Err("too_many_attachments".to_string()),
            _ if bytes.len() > MAX_ATTACHMENT => Err("file_too_large".to_string()),
            Some(SourceKind::Email) => match parse_message(bytes) {
                Ok(nested) => {
                    self.heading(format!("{prefix}h"), name, level);
                    return self.message(&nested, prefix, level + 1, depth + 1);
                }
                Err(e) => Err(e.code.to_string()),
            },
            Some(k) => (self.attachments)(k.as_str())
                .and_then(|p| p.parse(&ParseInput { bytes, file_name: &name, kind: k.as_str() }))
                .map_err(|e| e.code.to_string()),
            None => Err("unsupported_kind".to_string()),
        };
        match inner {
            Ok(art) => {
                self.heading(format!("{prefix}h"), name, level);
                self.artifact(&art, prefix, level);
            }
            // Listed with why it was not read (the reason is a stable code).
            Err(code) => self.heading(format!("{prefix}h"), format!("{name} ({code})"), level),
        }
        Ok(())
    }

    /// An attachment's own blocks, its headings nested under the attachment's.
    fn artifact(&mut self, art: &ParsedArtifact, prefix: &str, level: u8) {
        let levels: HashMap<&str, u8> =
            art.source_map.sections.iter().filter_map(|s| Some((s.block_ids.first()?.as_str(), s.level))).collect();
        for b in art.all_blocks() {
            let id = format!("{prefix}{}", b.id);
            match levels.get(b.id.as_str()) {
                Some(l) if b.block_type == BlockType::Heading => {
                    self.tree.open(b.text.split_whitespace().collect::<Vec<_>>().join(" "), level.saturating_add(*l), |_| {});
                    self.push(id, b.block_type, b.text.clone(), Some(b));
                }
                _ => self.push(id, b.block_type, b.text.clone(), Some(b)),
            }
        }
    }

    fn finish(self, bytes: &[u8]) -> ParsedArtifact {
        let source_hash = artifact::source_hash(bytes);
        ParsedArtifact {
            source_hash: source_hash.clone(),
            provider: "email".into(),
            provider_version: VERSION.into(),
            text: self.tb.finish(),
            source_map: SourceMap {
                schema: SOURCE_MAP_SCHEMA.into(),
                provider: "email".into(),
                model_version: VERSION.into(),
                source_hash,
                resource_kind: "email".into(),
                page_count: None,
                pages: Vec::new(),
                blocks: self.blocks,
                sections: self.tree.sections,
                references: Vec::new(),
                truncated: None,
            },
        }
    }
}

/// The attachment a block-id prefix names (`a2`, `a2_a1`: the 1-based positions through
/// forwarded messages, as the provider numbers them): its file name and decoded bytes.
/// `None` when the message has no such attachment.
pub fn attachment_of(bytes: &[u8], prefix: &str) -> Result<Option<(String, Vec<u8>)>, ParseError> {
    let positions: Option<Vec<usize>> =
        prefix.split('_').map(|seg| seg.strip_prefix('a')?.parse::<usize>().ok().filter(|n| *n >= 1)).collect();
    let Some(positions) = positions.filter(|p| !p.is_empty() && p.len() <= MAX_DEPTH + 1) else { return Ok(None) };
    let top = parse_message(bytes)?;
    let mut nested: Option<Message<'_>> = None;
    for (depth, n) in positions.iter().enumerate() {
        let m = nested.as_ref().unwrap_or(&top);
        let Some(part) = m.attachments().nth(n - 1) else { return Ok(None) };
        let name = part.attachment_name().map(str::to_string).unwrap_or_else(|| format!("attachment-{n}"));
        let inner = match &part.body {
            PartType::Message(msg) => msg.raw_message().to_vec(),
            _ => part.contents().to_vec(),
        };
        if depth + 1 == positions.len() {
            return Ok(Some((name, inner)));
        }
        // Deeper: the attachment must itself be a message.
        let Some(next) = MessageParser::default().parse(&inner).map(Message::into_owned) else { return Ok(None) };
        nested = Some(next);
    }
    Ok(None)
}

fn plain_block(text: &str) -> Block {
    Block::flowing(text)
}

/// `From:`, `To:`, `Cc:`, `Date:`, `Subject:` lines (those the message has).
fn header_text(m: &Message<'_>) -> String {
    let mut lines = Vec::new();
    for (label, addr) in [("From", m.from()), ("To", m.to()), ("Cc", m.cc())] {
        if let Some(a) = addr.map(addresses).filter(|a| !a.is_empty()) {
            lines.push(format!("{label}: {a}"));
        }
    }
    if let Some(d) = m.date() {
        lines.push(format!("Date: {}", d.to_rfc3339()));
    }
    if let Some(s) = m.subject().map(str::trim).filter(|s| !s.is_empty()) {
        lines.push(format!("Subject: {s}"));
    }
    if lines.is_empty() { "(no header)".to_string() } else { lines.join("\n") }
}

fn addresses(a: &Address<'_>) -> String {
    a.iter()
        .map(|x| match (x.name.as_deref(), x.address.as_deref()) {
            (Some(n), Some(e)) => format!("{n} <{e}>"),
            (Some(n), None) => n.to_string(),
            (None, Some(e)) => e.to_string(),
            (None, None) => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}
