//! Citations in answer text, as models and agents write them and as we link them:
//! - markers `[evidence:<uuid>]` (also `[evidence: <uuid>]`, `【evidence:<uuid>】`, a full-width
//!   colon, and several ids in one bracket: `[evidence:<a>, <b>]`), which
//!   [`super::tools::ToolBox::link_citations`] turns into links;
//! - links `[label](…?evidence=<uuid>…)`, our `citationMarkdown`.
//!
//! Pure text functions (no database), shared by the tool box, the builtin runtime and
//! [`super::verify`]: [`scan`] finds both forms, [`attach_sentences`] gives each citation the
//! sentence it vouches for.

use std::ops::Range;

use uuid::Uuid;

/// A citation found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found<'a> {
    /// `[label](url)` whose URL names `evidence=<id>` (`None`: the value is not a UUID).
    Link { span: Range<usize>, label: &'a str, url: &'a str, id: Option<Uuid> },
    /// `[evidence:<id>, …]`: one entry per comma-separated part (`None`: not a UUID), and
    /// the parts as written.
    Marker { span: Range<usize>, ids: Vec<Option<Uuid>>, parts: Vec<&'a str> },
}

impl Found<'_> {
    pub fn span(&self) -> Range<usize> {
        match self {
            Found::Link { span, .. } | Found::Marker { span, .. } => span.clone(),
        }
    }
}

/// Longest label or marker body looked at (a bracket that does not close soon is prose).
const MAX_BRACKET: usize = 600;
const MAX_URL: usize = 2000;

fn is_escaped(text: &str, at: usize) -> bool {
    text[..at].chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Every citation of `text`, in order. Escaped brackets (`\[`) start nothing.
pub fn scan(text: &str) -> Vec<Found<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let c = rest.chars().next().expect("in bounds");
        if (c == '[' || c == '【') && !is_escaped(text, i) {
            if c == '['
                && let Some(f) = link_at(text, i)
            {
                i = f.span().end;
                out.push(f);
                continue;
            }
            if let Some(f) = marker_at(text, i) {
                i = f.span().end;
                out.push(f);
                continue;
            }
        }
        i += c.len_utf8();
    }
    out
}

/// `[label](url)` at `start` with `evidence=` in the URL.
fn link_at(text: &str, start: usize) -> Option<Found<'_>> {
    let mut depth = 0usize;
    let mut label_end = None;
    for (off, c) in text[start..].char_indices() {
        if off > MAX_BRACKET || c == '\n' && text[start + off..].starts_with("\n\n") {
            return None;
        }
        match c {
            '[' if !is_escaped(text, start + off) => depth += 1,
            ']' if !is_escaped(text, start + off) => {
                depth -= 1;
                if depth == 0 {
                    label_end = Some(start + off);
                    break;
                }
            }
            _ => {}
        }
    }
    let label_end = label_end?;
    let after = &text[label_end + 1..];
    if !after.starts_with('(') {
        return None;
    }
    let url_start = label_end + 2;
    let close = text[url_start..].find(')')?;
    if close > MAX_URL {
        return None;
    }
    let url = &text[url_start..url_start + close];
    if url.chars().any(char::is_whitespace) {
        return None;
    }
    let value = evidence_param(url)?;
    Some(Found::Link {
        span: start..url_start + close + 1,
        label: &text[start + 1..label_end],
        url,
        id: Uuid::parse_str(value).ok(),
    })
}

/// The `evidence=` value of a URL's query, if it has one.
pub fn evidence_param(url: &str) -> Option<&str> {
    let query = url.split_once('?')?.1;
    let query = query.split('#').next().unwrap_or_default();
    query.split('&').find_map(|p| p.strip_prefix("evidence="))
}

/// `[evidence:…]` / `【evidence:…】` at `start`.
fn marker_at(text: &str, start: usize) -> Option<Found<'_>> {
    let open = text[start..].chars().next()?;
    let body_start = start + open.len_utf8();
    let rest = text[body_start..].trim_start();
    let lead = text[body_start..].len() - rest.len();
    let word = rest.get(..8)?;
    if !word.eq_ignore_ascii_case("evidence") {
        return None;
    }
    let rest2 = rest[8..].trim_start();
    let colon = rest2.chars().next()?;
    if colon != ':' && colon != '：' {
        return None;
    }
    let ids_start = body_start + lead + 8 + (rest[8..].len() - rest2.len()) + colon.len_utf8();
    let close_at = text[ids_start..].find([']', '】'])?;
    let body = &text[ids_start..ids_start + close_at];
    if body.len() > MAX_BRACKET || body.contains('\n') || body.contains('[') || body.contains('【') {
        return None;
    }
    let close = text[ids_start + close_at..].chars().next()?;
    let parts: Vec<&str> = body
        .split([',', '，', ';', '；', '、'])
        .map(|p| {
            let p = p.trim();
            p.strip_prefix("evidence:").or_else(|| p.strip_prefix("evidence：")).unwrap_or(p).trim()
        })
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return None;
    }
    let ids = parts.iter().map(|p| Uuid::parse_str(p).ok()).collect();
    Some(Found::Marker { span: start..ids_start + close_at + close.len_utf8(), ids, parts })
}

/// The label and URL of a `[label](url)` link (e.g. a `citationMarkdown`).
pub fn split_link(markdown: &str) -> Option<(&str, &str)> {
    let inner = markdown.strip_prefix('[')?.strip_suffix(')')?;
    let (label, url) = inner.rsplit_once("](")?;
    Some((label, url))
}

/// `citationMarkdown` with its label prefixed by the citation's number: `[3 · notes.md · L3–5](…)`.
pub fn numbered(citation_markdown: &str, n: usize) -> String {
    match split_link(citation_markdown) {
        Some((label, url)) => format!("[{n} · {label}]({url})"),
        None => format!("{citation_markdown} [{n}]"),
    }
}

fn is_sentence_end(text: &str, i: usize, c: char) -> bool {
    match c {
        '。' | '！' | '？' | '；' | '\n' => true,
        '.' | '!' | '?' | ';' => {
            // "3.5", "notes.md" and "e.g.x" do not end a sentence; ". " and a final "." do.
            text[i + c.len_utf8()..].chars().next().is_none_or(|n| n.is_whitespace() || "\"'”’)".contains(n))
        }
        _ => false,
    }
}

/// A sentence as read: Markdown list/heading/quote markers, emphasis and escapes removed,
/// whitespace collapsed.
pub fn clean_sentence(s: &str) -> String {
    let mut t = s.trim();
    loop {
        let before = t;
        for p in ["- ", "* ", "+ ", "> ", "#"] {
            if let Some(r) = t.strip_prefix(p) {
                t = r.trim_start();
            }
        }
        let digits = t.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && t[digits..].starts_with(". ") {
            t = t[digits + 2..].trim_start();
        }
        if t == before {
            break;
        }
    }
    let mut out = String::with_capacity(t.len());
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '*' | '`' => {}
            c if c.is_whitespace() => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

/// Whether `s` has any letters or digits.
pub fn has_content(s: &str) -> bool {
    s.chars().any(char::is_alphanumeric)
}

/// `text` cut after every sentence end (`.`/`!`/`?`/`;` before a space or the end, CJK
/// `。！？；`, line breaks); each piece keeps its terminator.
pub fn split_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if is_sentence_end(text, i, c) {
            let end = i + c.len_utf8();
            out.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// The last sentence of `segment` that has any letters or digits in it, cleaned.
pub fn last_sentence(segment: &str) -> Option<String> {
    split_sentences(segment).into_iter().rev().map(clean_sentence).find(|s| has_content(s))
}

/// The sentence each citation (by span, in order) is attached to: the text since the previous
/// sentence end or citation; a citation right after a sentence end ("… data. [1]") takes that
/// sentence, and one right after another citation ("… [1] [2]") shares its sentence.
pub fn attach_sentences(text: &str, spans: &[Range<usize>]) -> Vec<String> {
    let mut out = Vec::with_capacity(spans.len());
    let mut prev_end = 0;
    let mut prev = String::new();
    for span in spans {
        let start = span.start.clamp(prev_end, text.len());
        let sentence = last_sentence(&text[prev_end..start]).unwrap_or_else(|| prev.clone());
        out.push(sentence.clone());
        prev = sentence;
        prev_end = span.end.clamp(start, text.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0d3c1b5e-7a8f-4c2d-9e6b-1f2a3b4c5d6e";
    const B: &str = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a";

    fn ids(f: &Found<'_>) -> Vec<Option<Uuid>> {
        match f {
            Found::Marker { ids, .. } => ids.clone(),
            Found::Link { id, .. } => vec![*id],
        }
    }

    #[test]
    fn markers_in_every_tolerated_spelling() {
        let a = Uuid::parse_str(A).unwrap();
        let b = Uuid::parse_str(B).unwrap();
        let text = format!(
            "One [evidence:{A}]. Two [evidence: {B}]. 三【evidence:{A}】。 Four [Evidence：{A}, {B}]. Five [evidence:{A}，evidence:{B}]"
        );
        let found = scan(&text);
        assert_eq!(found.len(), 5, "{found:?}");
        assert_eq!(ids(&found[0]), [Some(a)]);
        assert_eq!(ids(&found[1]), [Some(b)]);
        assert_eq!(ids(&found[2]), [Some(a)]);
        assert_eq!(ids(&found[3]), [Some(a), Some(b)]);
        assert_eq!(ids(&found[4]), [Some(a), Some(b)]);
        assert_eq!(&text[found[2].span()], format!("【evidence:{A}】"));
    }

    #[test]
    fn malformed_markers_are_found_but_prose_and_escapes_are_not() {
        let found = scan("see [evidence:not-a-uuid] and [evidence] and \\[evidence:x] and [other](http://x)");
        assert_eq!(found.len(), 1);
        assert_eq!(ids(&found[0]), [None]);
        assert!(matches!(&found[0], Found::Marker { parts, .. } if parts == &["not-a-uuid"]));
    }

    #[test]
    fn citation_links_with_escaped_labels_and_absolute_urls() {
        let text = format!(
            "Scoped threads borrow. [1 · x\\[1\\].md · L3–5](/sources/{B}/view?evidence={A}&line=3#hl) \
             [a.pdf · p.2](https://mnote.example/sources/{B}/view?page=2&evidence={A}#hl) [plain](/sources/{B}/view)"
        );
        let found = scan(&text);
        assert_eq!(found.len(), 2, "{found:?}");
        match &found[0] {
            Found::Link { label, id, .. } => {
                assert_eq!(*label, "1 · x\\[1\\].md · L3–5");
                assert_eq!(id.unwrap().to_string(), A);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ids(&found[1]), [Some(Uuid::parse_str(A).unwrap())]);
        assert!(matches!(scan("[x](/sources/a/view?evidence=zz#hl)")[0], Found::Link { id: None, .. }));
    }

    #[test]
    fn numbered_labels_keep_the_url() {
        assert_eq!(
            numbered("[notes.md · L3–5](/sources/s/view?evidence=e#hl)", 2),
            "[2 · notes.md · L3–5](/sources/s/view?evidence=e#hl)"
        );
        assert_eq!(split_link("[a\\]b](/u)"), Some(("a\\]b", "/u")));
    }

    /// Spans of `markers` in `text` (each the first occurrence after the previous one).
    fn spans_of(text: &str, markers: &[&str]) -> Vec<Range<usize>> {
        let mut from = 0;
        markers
            .iter()
            .map(|m| {
                let s = from + text[from..].find(m).unwrap();
                from = s + m.len();
                s..from
            })
            .collect()
    }

    #[test]
    fn sentences_attach_to_the_citation_after_them_in_english() {
        let text = "### notes.md\n\n- Scoped threads borrow data. [1] [2]\n- Channels send messages [3]. Then more text [4]";
        let s = attach_sentences(text, &spans_of(text, &["[1]", "[2]", "[3]", "[4]"]));
        assert_eq!(s, ["Scoped threads borrow data.", "Scoped threads borrow data.", "Channels send messages", "Then more text"]);
    }

    #[test]
    fn sentences_attach_in_chinese_and_decimals_do_not_split() {
        let text = "前一句。在 Rust 中，使用线程作用域可以借用栈上的数据。[1] 版本 1.5 的说明在 notes.md 里 [2]";
        let s = attach_sentences(text, &spans_of(text, &["[1]", "[2]"]));
        assert_eq!(s, ["在 Rust 中，使用线程作用域可以借用栈上的数据。", "版本 1.5 的说明在 notes.md 里"]);
        assert_eq!(attach_sentences("[1] first", &spans_of("[1] first", &["[1]"])), [""]);
    }

    #[test]
    fn sentences_split_after_their_ends() {
        assert_eq!(split_sentences("A b. C 3.5 d; e\n线程。数据！x"), ["A b.", " C 3.5 d;", " e\n", "线程。", "数据！", "x"]);
        assert!(split_sentences("").is_empty());
    }

    #[test]
    fn cleaning_strips_markdown_markers_and_escapes() {
        assert_eq!(clean_sentence("  - **Bold** \\[x\\]   text  "), "Bold [x] text");
        assert_eq!(clean_sentence("12. ## Heading"), "Heading");
    }
}
