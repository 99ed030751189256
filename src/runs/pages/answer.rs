//! A run's final answer (Markdown from a model or agent) → safe HTML, once, on the server: the
//! no-JavaScript run page and the result fragment `ai-run.js` swaps in both use it.
//!
//! Everything the answer says is text: raw HTML is escaped, images become their alt text, and
//! only our own citation links (`[label](/sources/…/view?evidence=…#hl)`) become anchors —
//! any other link keeps its label and loses its target. Paragraphs, lists, headings (demoted
//! below the page's own), emphasis and code keep their shape. Each citation is matched with its
//! check in the run's receipt and marked verified or not (class + tooltip with the reason); a
//! citation the receipt does not mention is shown as not verified, never silently kept.

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};
use uuid::Uuid;

use crate::viewer::escape;

/// One entry of the receipt's `citations`, as far as the page needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub evidence_id: Option<Uuid>,
    pub verified: bool,
    pub reason: String,
}

/// Words for a citation's tooltip: `(verified, reason code) → text`.
pub type Tooltip<'a> = &'a dyn Fn(bool, &str) -> String;

/// The reason of a citation the receipt has no check for.
pub const NOT_CHECKED: &str = "not_checked";

/// What [`render`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub html: String,
    /// Citations shown (links and leftover markers), in order.
    pub citations: usize,
    /// Of those, shown as not verified.
    pub unverified: usize,
}

/// The evidence id of one of our citation URLs (`/sources/<id>/view?…evidence=<uuid>…`), or
/// `None` when `url` is not such a link.
fn citation_target(url: &str) -> Option<Option<Uuid>> {
    let rest = url.strip_prefix("/sources/")?;
    if url.contains("//") || url.chars().any(|c| c.is_control() || c.is_whitespace() || "\"'<>\\`".contains(c)) {
        return None;
    }
    let source = rest.split(['/', '?', '#']).next().unwrap_or_default();
    Uuid::parse_str(source).ok()?;
    let query = url.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or_default()).unwrap_or_default();
    let evidence = query.split('&').find_map(|kv| kv.strip_prefix("evidence=")).and_then(|v| Uuid::parse_str(v).ok());
    Some(evidence)
}

/// Leftover `[evidence:<id>]` / `【evidence:<id>】` markers in `text`: `(start, end, ids)`.
fn markers(text: &str) -> Vec<(usize, usize, Vec<Option<Uuid>>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let open = [("[", "]"), ("【", "】")].iter().filter_map(|(o, c)| rest.find(o).map(|i| (i, *o, *c))).min_by_key(|x| x.0);
        let Some((i, o, c)) = open else { break };
        let start = at + i;
        let inner_from = start + o.len();
        let Some(close) = text[inner_from..].find(c) else { break };
        let inner = &text[inner_from..inner_from + close];
        let end = inner_from + close + c.len();
        match inner.trim_start().strip_prefix("evidence:").or_else(|| inner.trim_start().strip_prefix("evidence：")) {
            Some(ids) if inner.len() <= 400 => {
                let ids = ids.split([',', '，']).map(|s| Uuid::parse_str(s.trim()).ok()).collect();
                out.push((start, end, ids));
                at = end;
            }
            _ => at = inner_from,
        }
    }
    out
}

/// Hands out the receipt's checks to the citations in order of appearance: the first unused
/// check naming the same evidence.
struct Checks<'a> {
    checks: &'a [Check],
    used: Vec<bool>,
}

impl<'a> Checks<'a> {
    fn new(checks: &'a [Check]) -> Self {
        Checks { checks, used: vec![false; checks.len()] }
    }

    fn take(&mut self, evidence: Option<Uuid>) -> (bool, String) {
        let found = self.checks.iter().enumerate().position(|(i, c)| !self.used[i] && c.evidence_id == evidence);
        match found {
            Some(i) => {
                self.used[i] = true;
                (self.checks[i].verified, self.checks[i].reason.clone())
            }
            None => (false, NOT_CHECKED.to_string()),
        }
    }
}

struct Out<'t> {
    events: Vec<Event<'static>>,
    citations: usize,
    unverified: usize,
    tooltip: Tooltip<'t>,
    /// The words marking an unsupported claim (none: not marked).
    mark: Option<&'t str>,
}

/// Reasons that say the cited passage does not back the sentence (a check that could not run,
/// `check_failed`, or a citation the receipt has no check for, says nothing either way).
fn unsupported(reason: &str) -> bool {
    matches!(reason, "unsupported" | "evidence_not_found" | "not_visible" | "malformed")
}

impl Out<'_> {
    fn html(&mut self, s: String) {
        self.events.push(Event::InlineHtml(CowStr::from(s)));
    }

    fn text(&mut self, s: &str) {
        if !s.is_empty() {
            self.events.push(Event::Text(CowStr::from(s.to_string())));
        }
    }

    /// The mark after an unsupported citation, if marks are on.
    fn mark_after(&mut self, verified: bool, reason: &str) {
        if let Some(m) = self.mark.filter(|_| !verified && unsupported(reason)) {
            self.html(format!(" <span class=\"ai-unsupported\" data-reason=\"{}\">{}</span>", escape(reason), escape(m)));
        }
    }

    fn cite_open(&mut self, tag: &str, href: Option<&str>, evidence: Option<Uuid>, verified: bool, reason: &str) {
        self.citations += 1;
        if !verified {
            self.unverified += 1;
        }
        let class = if verified { "ai-cite ai-cite-ok" } else { "ai-cite ai-cite-unverified" };
        let href = href.map(|h| format!(" href=\"{}\"", escape(h))).unwrap_or_default();
        let ev = evidence.map(|e| format!(" data-evidence-id=\"{e}\"")).unwrap_or_default();
        let title = escape(&(self.tooltip)(verified, reason));
        self.html(format!(
            "<{tag} class=\"{class}\"{href}{ev} data-verified=\"{verified}\" data-reason=\"{}\" title=\"{title}\">",
            escape(reason)
        ));
    }

    /// Text outside links: leftover evidence markers become marked spans.
    fn text_with_markers(&mut self, text: &str, checks: &mut Checks) {
        let mut at = 0;
        for (start, end, ids) in markers(text) {
            self.text(&text[at..start]);
            // One check per id in the bracket; the marker counts as verified only if all are.
            let results: Vec<(bool, String)> = ids.iter().map(|id| checks.take(*id)).collect();
            let verified = !results.is_empty() && results.iter().all(|r| r.0);
            let reason =
                results.iter().find(|r| !r.0).or(results.first()).map(|r| r.1.clone()).unwrap_or_else(|| "malformed".into());
            let first = ids.first().copied().flatten();
            self.cite_open("span", None, first, verified, &reason);
            self.text(&text[start..end]);
            self.html("</span>".into());
            self.mark_after(verified, &reason);
            at = end;
        }
        self.text(&text[at..]);
    }
}

/// How a link's label is being shown.
enum Link {
    /// Our citation, with its check.
    Cite(bool, String),
    /// Another `/sources/` link without evidence: an anchor, not a citation.
    Plain,
    /// Anything else: the label as text.
    Dropped,
}

fn demote(level: HeadingLevel) -> HeadingLevel {
    match level {
        HeadingLevel::H1 | HeadingLevel::H2 | HeadingLevel::H3 => HeadingLevel::H3,
        HeadingLevel::H4 => HeadingLevel::H4,
        HeadingLevel::H5 => HeadingLevel::H5,
        HeadingLevel::H6 => HeadingLevel::H6,
    }
}

/// Render `markdown` with its citations marked from `checks` (the receipt, in order).
#[cfg(test)]
pub fn render(markdown: &str, checks: &[Check], tooltip: Tooltip<'_>) -> Rendered {
    render_marked(markdown, checks, tooltip, None)
}

/// [`render`], and after each citation the receipt found unsupported (its sentence is not in
/// the cited passage, or the passage is not there) the visible `mark`, so the claim is marked
/// where it stands, not only in the list below the answer.
pub fn render_marked(markdown: &str, checks: &[Check], tooltip: Tooltip<'_>, mark: Option<&str>) -> Rendered {
    let mut checks = Checks::new(checks);
    let mut out = Out { events: Vec::new(), citations: 0, unverified: 0, tooltip, mark };
    let mut links: Vec<Link> = Vec::new();
    let mut image_depth = 0usize;
    let mut pending_text = String::new();
    let parsed: Vec<Event<'_>> = Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH).collect();
    let mut iter = parsed.into_iter().peekable();
    while let Some(ev) = iter.next() {
        // Adjacent text (the parser splits at brackets) is handled as one run, so a marker
        // like `[evidence:…]` is seen whole.
        if let Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) = &ev {
            pending_text.push_str(t);
            if matches!(iter.peek(), Some(Event::Text(_) | Event::Html(_) | Event::InlineHtml(_))) {
                continue;
            }
            let text = std::mem::take(&mut pending_text);
            if links.is_empty() && image_depth == 0 {
                out.text_with_markers(&text, &mut checks);
            } else {
                out.text(&text);
            }
            continue;
        }
        match ev {
            Event::Start(Tag::Link { dest_url, .. }) => {
                let kind = match citation_target(&dest_url) {
                    Some(Some(evidence)) if links.is_empty() => {
                        let (verified, reason) = checks.take(Some(evidence));
                        out.cite_open("a", Some(&dest_url), Some(evidence), verified, &reason);
                        Link::Cite(verified, reason)
                    }
                    Some(None) if links.is_empty() => {
                        out.html(format!("<a class=\"ai-link\" href=\"{}\">", escape(&dest_url)));
                        Link::Plain
                    }
                    _ => Link::Dropped,
                };
                links.push(kind);
            }
            Event::End(TagEnd::Link) => match links.pop() {
                Some(Link::Cite(verified, reason)) => {
                    out.html("</a>".into());
                    out.mark_after(verified, &reason);
                }
                Some(Link::Plain) => out.html("</a>".into()),
                _ => {}
            },
            Event::Start(Tag::Image { .. }) => image_depth += 1,
            Event::End(TagEnd::Image) => image_depth = image_depth.saturating_sub(1),
            Event::Start(Tag::Heading { level, .. }) => out.events.push(Event::Start(Tag::Heading {
                level: demote(level),
                id: None,
                classes: Vec::new(),
                attrs: Vec::new(),
            })),
            Event::End(TagEnd::Heading(level)) => out.events.push(Event::End(TagEnd::Heading(demote(level)))),
            // A raw HTML block is shown as a paragraph of text.
            Event::Start(Tag::HtmlBlock) => out.events.push(Event::Start(Tag::Paragraph)),
            Event::End(TagEnd::HtmlBlock) => out.events.push(Event::End(TagEnd::Paragraph)),
            Event::Code(c) => out.events.push(Event::Code(CowStr::from(c.to_string()))),
            // Models write one line per point: a single newline is a line break here.
            Event::SoftBreak => out.events.push(Event::HardBreak),
            Event::HardBreak => out.events.push(Event::HardBreak),
            Event::Rule => out.events.push(Event::Rule),
            Event::Start(t) => out.events.push(Event::Start(owned_tag(t))),
            Event::End(t) => out.events.push(Event::End(owned_end(t))),
            // Footnotes, math, task markers: not enabled; anything else as text.
            other => {
                if let Event::FootnoteReference(s) | Event::InlineMath(s) | Event::DisplayMath(s) = other {
                    out.text(&s);
                }
            }
        }
    }
    let mut html_out = String::with_capacity(markdown.len() * 2);
    html::push_html(&mut html_out, out.events.into_iter());
    Rendered { html: html_out.trim_end().to_string(), citations: out.citations, unverified: out.unverified }
}

/// The block tags the answer may use, owned; anything unusual becomes a paragraph.
fn owned_tag(t: Tag<'_>) -> Tag<'static> {
    match t {
        Tag::Paragraph => Tag::Paragraph,
        Tag::BlockQuote(k) => Tag::BlockQuote(k),
        Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Indented) => Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Indented),
        Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Fenced(_)) => {
            Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Fenced(CowStr::Borrowed("")))
        }
        Tag::List(n) => Tag::List(n),
        Tag::Item => Tag::Item,
        Tag::Emphasis => Tag::Emphasis,
        Tag::Strong => Tag::Strong,
        Tag::Strikethrough => Tag::Strikethrough,
        _ => Tag::Paragraph,
    }
}

/// The end of a tag [`owned_tag`] kept (or turned into a paragraph).
fn owned_end(t: TagEnd) -> TagEnd {
    match t {
        TagEnd::Paragraph
        | TagEnd::BlockQuote(_)
        | TagEnd::CodeBlock
        | TagEnd::List(_)
        | TagEnd::Item
        | TagEnd::Emphasis
        | TagEnd::Strong
        | TagEnd::Strikethrough => t,
        _ => TagEnd::Paragraph,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "0b6a1f3e-4c1d-4f7a-9a0e-1d2c3b4a5f60";
    const EV1: &str = "11111111-1111-4111-8111-111111111111";
    const EV2: &str = "22222222-2222-4222-8222-222222222222";

    fn words(verified: bool, reason: &str) -> String {
        format!("{}: {reason}", if verified { "ok" } else { "NOT" })
    }

    fn check(id: &str, verified: bool, reason: &str) -> Check {
        Check { evidence_id: Some(Uuid::parse_str(id).unwrap()), verified, reason: reason.into() }
    }

    fn link(label: &str, ev: &str) -> String {
        format!("[{label}](/sources/{SRC}/view?evidence={ev}#hl)")
    }

    #[test]
    fn html_and_scripts_stay_text() {
        let r = render("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)> & <b>bold</b>", &[], &words);
        assert!(!r.html.contains("<script") && !r.html.contains("<img") && !r.html.contains("<b>"), "{}", r.html);
        assert!(r.html.contains("&lt;script&gt;") && r.html.contains("&amp;"), "{}", r.html);
    }

    #[test]
    fn only_our_citation_links_become_anchors() {
        let md = format!(
            "See {} and [evil](javascript:alert(1)) and [web](https://evil.example/x) and ![alt](http://t/p.png).",
            link("notes.md · L3–5", EV1)
        );
        let r = render(&md, &[check(EV1, true, "quote_found")], &words);
        assert_eq!(r.html.matches("<a ").count(), 1, "{}", r.html);
        assert!(r.html.contains(&format!("href=\"/sources/{SRC}/view?evidence={EV1}#hl\"")), "{}", r.html);
        assert!(r.html.contains("class=\"ai-cite ai-cite-ok\"") && r.html.contains("title=\"ok: quote_found\""), "{}", r.html);
        assert!(r.html.contains("evil") && !r.html.contains("javascript") && !r.html.contains("evil.example"), "{}", r.html);
        assert!(r.html.contains("alt") && !r.html.contains("http://t"), "{}", r.html);
        assert_eq!((r.citations, r.unverified), (1, 0));
    }

    #[test]
    fn hostile_citation_urls_are_not_anchors() {
        for url in [
            "/sources/x/view?evidence=1",
            "/sources//evil.example/view",
            &format!("/sources/{SRC}/view?evidence={EV1}\"onmouseover=\"x"),
        ] {
            let r = render(&format!("[a]({url})"), &[], &words);
            assert!(!r.html.contains("<a "), "{url}: {}", r.html);
        }
    }

    #[test]
    fn unverified_and_unchecked_citations_are_marked() {
        let md = format!(
            "Robots charge at night {}. The moon is cheese {}. Extra {}.",
            link("1", EV1),
            link("2", EV2),
            link("3", EV1)
        );
        let r = render(&md, &[check(EV1, true, "key_terms"), check(EV2, false, "unsupported")], &words);
        assert_eq!((r.citations, r.unverified), (3, 2), "{}", r.html);
        assert!(r.html.contains("data-reason=\"unsupported\"") && r.html.contains("title=\"NOT: unsupported\""), "{}", r.html);
        // The receipt has one check for EV1: its second citation is not checked.
        assert!(r.html.contains("data-reason=\"not_checked\""), "{}", r.html);
    }

    #[test]
    fn leftover_markers_are_marked_spans() {
        let md = format!("中文句子 [evidence:{EV2}]，另一句【evidence: {EV1}】。No [link] here.");
        let r = render(&md, &[check(EV2, false, "evidence_not_found"), check(EV1, true, "quote_found")], &words);
        assert_eq!(r.html.matches("<span class=\"ai-cite ai-cite-unverified\"").count(), 1, "{}", r.html);
        assert_eq!(r.html.matches("<span class=\"ai-cite ai-cite-ok\"").count(), 1, "{}", r.html);
        assert!(r.html.contains(&format!("[evidence:{EV2}]</span>")), "{}", r.html);
        assert!(r.html.contains("No [link] here."), "{}", r.html);
        let bad = render("x [evidence:not-a-uuid]", &[], &words);
        assert_eq!((bad.citations, bad.unverified), (1, 1), "{}", bad.html);
    }

    #[test]
    fn paragraphs_lists_and_headings_keep_their_shape() {
        let md = format!(
            "# Handbook\n\nFirst paragraph.\n\n- one {}\n- two\n\n1. first\n2. second\n\n**bold** `code`",
            link("1", EV1)
        );
        let r = render(&md, &[check(EV1, true, "quote_found")], &words);
        assert!(r.html.contains("<h3>Handbook</h3>"), "{}", r.html);
        assert!(r.html.contains("<p>First paragraph.</p>"), "{}", r.html);
        assert!(r.html.contains("<ul>") && r.html.contains("<ol>") && r.html.matches("<li>").count() == 4, "{}", r.html);
        assert!(r.html.contains("<strong>bold</strong>") && r.html.contains("<code>code</code>"), "{}", r.html);
    }

    #[test]
    fn a_single_newline_breaks_the_line() {
        let md = format!("First point {}\nSecond point {}", link("1", EV1), link("2", EV2));
        let r = render(&md, &[check(EV1, true, "quote_found"), check(EV2, true, "quote_found")], &words);
        assert!(r.html.contains("</a><br />"), "{}", r.html);
        assert_eq!(r.html.matches("<p>").count(), 1, "{}", r.html);
    }

    #[test]
    fn markers_are_found_exactly() {
        let m = markers(&format!("a [evidence:{EV1}, {EV2}] b [x] c"));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].2.len(), 2);
        assert!(markers("[unclosed evidence:").is_empty());
        assert_eq!(
            citation_target(&format!("/sources/{SRC}/view?page=2&evidence={EV1}#hl")),
            Some(Some(Uuid::parse_str(EV1).unwrap()))
        );
        assert_eq!(citation_target(&format!("/sources/{SRC}/view")), Some(None));
        assert_eq!(citation_target("https://x/sources/"), None);
    }

    #[test]
    fn unsupported_claims_are_marked_where_they_stand() {
        let md =
            format!("Robots charge at night {}. The moon is cheese {}. Gone {}.", link("1", EV1), link("2", EV2), link("3", EV1));
        let checks = [check(EV1, true, "quote_found"), check(EV2, false, "unsupported")];
        let r = render_marked(&md, &checks, &words, Some("not <supported>"));
        // The unsupported citation and the one whose passage is gone are marked right after
        // themselves; the verified one and the unchecked one (not_checked) are not.
        assert_eq!(r.html.matches("class=\"ai-unsupported\"").count(), 1, "{}", r.html);
        assert!(
            r.html.contains("</a> <span class=\"ai-unsupported\" data-reason=\"unsupported\">not &lt;supported&gt;</span>"),
            "{}",
            r.html
        );
        let md2 = format!("Gone {}. Also [evidence:{EV2}].", link("1", EV1));
        let r2 =
            render_marked(&md2, &[check(EV1, false, "evidence_not_found"), check(EV2, false, "unsupported")], &words, Some("X"));
        assert_eq!(r2.html.matches("class=\"ai-unsupported\"").count(), 2, "{}", r2.html);
        assert!(r2.html.contains("</span> <span class=\"ai-unsupported\""), "a marker span is marked too: {}", r2.html);
        // Without marks (the default render) nothing is added.
        assert!(!render(&md, &checks, &words).html.contains("ai-unsupported"));
    }
}
