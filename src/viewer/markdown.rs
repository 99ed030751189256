//! Markdown block text → safe HTML for the viewer. Raw HTML from documents is shown as text,
//! images become their alt text (no remote loads), links keep only safe schemes.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS | Options::ENABLE_FOOTNOTES
}

/// Relative links, fragments, http(s) and mailto; anything else (`javascript:`, `data:`) is dropped.
fn safe_url(url: &str) -> bool {
    let u = url.trim().to_ascii_lowercase();
    match u.find(':') {
        None => true,
        Some(i) => {
            let scheme = &u[..i];
            // A colon after a slash, `?` or `#` is part of a relative path.
            scheme.contains(['/', '?', '#']) || matches!(scheme, "http" | "https" | "mailto")
        }
    }
}

fn sanitise(e: Event<'_>) -> Event<'_> {
    match e {
        Event::Html(s) | Event::InlineHtml(s) => Event::Text(s),
        Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
            let dest_url = if safe_url(&dest_url) { dest_url } else { CowStr::Borrowed("#") };
            Event::Start(Tag::Link { link_type, dest_url, title, id })
        }
        Event::Start(Tag::Image { .. }) => Event::Start(Tag::Emphasis),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Emphasis),
        other => other,
    }
}

/// A whole block (paragraph, table, code, quote) as HTML.
pub fn block_html(src: &str) -> String {
    let mut out = String::with_capacity(src.len() * 2);
    html::push_html(&mut out, Parser::new_ext(src, options()).map(sanitise));
    out.truncate(out.trim_end().len());
    out
}

/// Inline content (a heading's or list item's text) as HTML without a wrapping `<p>`.
pub fn inline_html(src: &str) -> String {
    let h = block_html(src);
    let t = h.trim_end();
    match t.strip_prefix("<p>").and_then(|r| r.strip_suffix("</p>")) {
        Some(inner) if !inner.contains("<p>") => inner.to_string(),
        _ => super::escape(src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_and_scripts_are_text() {
        let h = block_html("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)>");
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(h.contains("&lt;script&gt;"), "{h}");
    }

    #[test]
    fn links_and_images_are_safe() {
        let h = block_html("[x](javascript:alert(1)) [y](https://e.org/a) [z](docs/a:b.md) ![alt](http://tracker/p.png)");
        assert!(h.contains(r##"<a href="#">x</a>"##), "{h}");
        assert!(h.contains(r#"href="https://e.org/a""#), "{h}");
        assert!(h.contains(r#"href="docs/a:b.md""#), "{h}");
        assert!(h.contains("<em>alt</em>") && !h.contains("tracker"), "{h}");
    }

    #[test]
    fn inline_strips_the_paragraph() {
        assert_eq!(inline_html("Scoped **threads**"), "Scoped <strong>threads</strong>");
        assert_eq!(inline_html("1. not a list"), "1. not a list");
        assert_eq!(inline_html("a <b>"), "a &lt;b&gt;");
    }
}
