//! The main content of an HTML page as raw blocks, in one pass over the parsed tree (the
//! walk is iterative: a page of 100,000 nested elements costs no stack).
//!
//! Which part is content: the first `<main>` (or `role="main"`), else the only `<article>`,
//! else `<body>`. Dropped wherever they are: scripts, styles, templates, forms and their
//! controls, embedded objects, `hidden` / `aria-hidden="true"` elements and
//! `role="navigation|search"`; outside `<main>`/`<article>` also the page chrome (`<nav>`,
//! `<header>`, `<footer>`, `<aside>`, `role="banner|contentinfo|complementary"`).
//!
//! Blocks: `h1`–`h6` headings; `p`, `li`, `dt`, `dd`, `figcaption`, `caption`, `pre`
//! (whitespace kept) and text directly inside a container (`div`, `section`…) are blocks of
//! their own; a table row is one block, its cells joined by " | " and, under a header row of
//! `<th>` cells, each value prefixed by its column's name ("Owner: finance"); a nested table
//! is flattened into its cell. Images contribute their `alt` text. Each block records the
//! 1-based index of its element among all elements of the document in document order
//! (XPath `(//*)[n]`, `<html>` = 1), which the viewer and API clients can count too.

use ego_tree::{NodeId, NodeRef, iter::Edge};
use scraper::{Html, Node, Selector, node::Element};

/// What kind of block an element makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawKind {
    Heading(u8),
    Paragraph,
    ListItem,
    Quote,
    Code,
    Row,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RawBlock {
    pub kind: RawKind,
    pub text: String,
    /// 1-based index of the element among all elements, in document order.
    pub element: u32,
    /// `(href, label)` of the block's links.
    pub links: Vec<(String, String)>,
}

/// Elements whose whole subtree is never content.
const DROPPED: &[&str] = &[
    "head", "script", "style", "noscript", "template", "form", "button", "select", "textarea", "input", "option", "iframe",
    "object", "embed", "svg", "math", "canvas", "audio", "video", "map", "dialog",
];
/// Page chrome, dropped outside `<main>` / `<article>`.
const CHROME: &[&str] = &["nav", "header", "footer", "aside"];
/// Elements that end the text before them and start their own.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "center",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "html",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "thead",
    "tfoot",
    "tr",
    "caption",
    "ul",
];

/// An open block element.
struct Open {
    id: NodeId,
    kind: RawKind,
    element: u32,
}

/// A table row being collected: its cells so far and where the current cell's text starts.
struct Row {
    id: NodeId,
    element: u32,
    cells: Vec<String>,
    cell_start: Option<usize>,
    all_header: bool,
    /// Nesting depth of cells of inner tables (flattened into the current cell).
    inner: u32,
}

pub struct Walk {
    pub title: Option<(String, u32)>,
    pub blocks: Vec<RawBlock>,
    pub has_h1: bool,
}

#[derive(Default)]
struct State {
    open: Vec<Open>,
    rows: Vec<Row>,
    /// Header names of the open tables (innermost last).
    headers: Vec<Option<Vec<String>>>,
    buf: String,
    pre: u32,
    quote: u32,
    links: Vec<(String, String)>,
    link_start: Vec<(NodeId, usize, String)>,
    blocks: Vec<RawBlock>,
}

pub fn walk(doc: &Html) -> Walk {
    let root = content_root(doc);
    let has_h1 = root.is_some_and(|r| r.descendants().any(|n| n.value().as_element().is_some_and(|e| e.name() == "h1")));
    let mut st = State::default();
    let mut title = None;
    let mut index = 0u32;
    let (mut inside, mut in_main, mut skip): (bool, u32, Option<NodeId>) = (false, 0, None);
    for edge in doc.tree.root().traverse() {
        match edge {
            Edge::Open(node) => {
                let Node::Element(el) = node.value() else {
                    if let (Node::Text(t), true, None) = (node.value(), inside, skip) {
                        st.text(t);
                    }
                    continue;
                };
                index += 1;
                if el.name() == "title" && title.is_none() {
                    let text: String = node.descendants().filter_map(|n| n.value().as_text().map(|t| t.to_string())).collect();
                    title = Some((text, index));
                }
                if Some(node.id()) == root.map(|r| r.id()) {
                    inside = true;
                }
                if !inside || skip.is_some() {
                    continue;
                }
                if dropped(el, in_main > 0) {
                    skip = Some(node.id());
                    continue;
                }
                if matches!(el.name(), "main" | "article") || el.attr("role") == Some("main") {
                    in_main += 1;
                }
                st.open_element(node, el, index);
            }
            Edge::Close(node) => {
                let Node::Element(el) = node.value() else { continue };
                if skip == Some(node.id()) {
                    skip = None;
                    continue;
                }
                if !inside || skip.is_some() {
                    continue;
                }
                st.close_element(node.id(), el);
                if matches!(el.name(), "main" | "article") || el.attr("role") == Some("main") {
                    in_main = in_main.saturating_sub(1);
                }
                if Some(node.id()) == root.map(|r| r.id()) {
                    inside = false;
                }
            }
        }
    }
    Walk { title: title.map(|(t, i)| (collapse(&t), i)), blocks: st.blocks, has_h1 }
}

fn content_root(doc: &Html) -> Option<NodeRef<'_, Node>> {
    let sel = |s: &str| Selector::parse(s).expect("a constant selector");
    if let Some(m) = doc.select(&sel("main, [role=main]")).next() {
        return Some(*m);
    }
    let articles: Vec<_> = doc.select(&sel("article")).take(2).collect();
    if let [one] = articles.as_slice() {
        return Some(**one);
    }
    doc.select(&sel("body")).next().map(|b| *b)
}

fn dropped(el: &Element, in_main: bool) -> bool {
    let name = el.name();
    let role = el.attr("role").unwrap_or("");
    DROPPED.contains(&name)
        || el.attr("hidden").is_some()
        || el.attr("aria-hidden") == Some("true")
        || matches!(role, "navigation" | "search")
        || (!in_main && (CHROME.contains(&name) || matches!(role, "banner" | "contentinfo" | "complementary")))
}

fn kind_of(name: &str) -> RawKind {
    match name {
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => RawKind::Heading(name.as_bytes()[1] - b'0'),
        "li" => RawKind::ListItem,
        "pre" => RawKind::Code,
        "blockquote" => RawKind::Quote,
        _ => RawKind::Paragraph,
    }
}

impl State {
    fn in_cell(&self) -> bool {
        self.rows.last().is_some_and(|r| r.cell_start.is_some())
    }

    fn text(&mut self, t: &str) {
        if self.pre > 0 {
            self.buf.push_str(t);
            return;
        }
        for (i, word) in t.split(char::is_whitespace).enumerate() {
            if i > 0 && !self.buf.ends_with([' ', '\n']) && !self.buf.is_empty() {
                self.buf.push(' ');
            }
            self.buf.push_str(word);
        }
    }

    fn open_element(&mut self, node: NodeRef<'_, Node>, el: &Element, index: u32) {
        let name = el.name();
        match name {
            "br" => return self.buf.push('\n'),
            "img" => {
                if let Some(alt) = el.attr("alt").map(str::trim).filter(|a| !a.is_empty()) {
                    self.text(&format!(" {alt} "));
                }
                return;
            }
            "a" => {
                if let Some(href) = el.attr("href").filter(|h| h.starts_with("http://") || h.starts_with("https://")) {
                    self.link_start.push((node.id(), self.buf.len(), href.to_string()));
                }
                return;
            }
            _ => {}
        }
        if self.in_cell() {
            // Inside a cell everything is inline; an inner table's cells and rows are spaced.
            if let Some(row) = self.rows.last_mut()
                && matches!(name, "td" | "th" | "tr" | "table")
            {
                row.inner += 1;
            }
            if BLOCKS.contains(&name) || matches!(name, "td" | "th") {
                self.buf.push(' ');
            }
            return;
        }
        match name {
            "table" => {
                self.flush_to_top();
                self.headers.push(None);
            }
            "tr" => {
                self.flush_to_top();
                self.rows.push(Row {
                    id: node.id(),
                    element: index,
                    cells: Vec::new(),
                    cell_start: None,
                    all_header: true,
                    inner: 0,
                });
            }
            "td" | "th" if !self.rows.is_empty() => {
                let row = self.rows.last_mut().expect("checked");
                row.all_header &= name == "th";
                self.buf.clear();
                row.cell_start = Some(0);
            }
            _ if BLOCKS.contains(&name) => {
                self.flush_to_top();
                self.pre += u32::from(name == "pre");
                self.quote += u32::from(name == "blockquote");
                self.open.push(Open { id: node.id(), kind: kind_of(name), element: index });
            }
            _ => {}
        }
    }

    fn close_element(&mut self, id: NodeId, el: &Element) {
        let name = el.name();
        if name == "a" {
            if let Some(pos) = self.link_start.iter().rposition(|(n, ..)| *n == id) {
                let (_, start, href) = self.link_start.remove(pos);
                let label = collapse(self.buf.get(start..).unwrap_or(""));
                self.links.push((href, label));
            }
            return;
        }
        if let Some(row) = self.rows.last_mut()
            && row.inner > 0
            && matches!(name, "td" | "th" | "tr" | "table")
        {
            row.inner -= 1;
            return;
        }
        match name {
            "td" | "th" if self.in_cell() => {
                let row = self.rows.last_mut().expect("in a cell");
                row.cells.push(collapse(&self.buf));
                row.cell_start = None;
                self.buf.clear();
            }
            "tr" if self.rows.last().is_some_and(|r| r.id == id) => self.close_row(),
            "table" if !self.in_cell() => {
                self.flush_to_top();
                self.headers.pop();
            }
            _ if self.in_cell() => {}
            _ if self.open.last().is_some_and(|o| o.id == id) => {
                let open = self.open.pop().expect("checked");
                self.flush(open.kind, open.element);
                self.pre = self.pre.saturating_sub(u32::from(name == "pre"));
                self.quote = self.quote.saturating_sub(u32::from(name == "blockquote"));
            }
            _ => {}
        }
    }

    fn close_row(&mut self) {
        let row = self.rows.pop().expect("an open row");
        self.buf.clear();
        if row.cells.iter().all(String::is_empty) {
            return;
        }
        let header = self.headers.last_mut();
        let text = match header {
            Some(h @ None) if row.all_header => {
                *h = Some(row.cells.clone());
                row.cells.join(" | ")
            }
            Some(Some(names)) => row
                .cells
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.is_empty())
                .map(|(i, c)| match names.get(i).filter(|n| !n.is_empty()) {
                    Some(n) => format!("{n}: {c}"),
                    None => c.clone(),
                })
                .collect::<Vec<_>>()
                .join(" | "),
            _ => row.cells.join(" | "),
        };
        let links = std::mem::take(&mut self.links);
        self.blocks.push(RawBlock { kind: RawKind::Row, text, element: row.element, links });
    }

    /// The text so far belongs to the innermost open block (a container's own text).
    fn flush_to_top(&mut self) {
        let (kind, element) = self.open.last().map(|o| (o.kind, o.element)).unwrap_or((RawKind::Paragraph, 0));
        self.flush(kind, element);
    }

    fn flush(&mut self, kind: RawKind, element: u32) {
        let text = if self.pre > 0 { trim_lines(&self.buf) } else { collapse(&self.buf) };
        self.buf.clear();
        if text.is_empty() {
            return;
        }
        let kind = if self.quote > 0 && kind == RawKind::Paragraph { RawKind::Quote } else { kind };
        let links = std::mem::take(&mut self.links);
        self.blocks.push(RawBlock { kind, text, element, links });
    }
}

/// Runs of spaces as one, each line trimmed, empty lines dropped.
fn collapse(s: &str) -> String {
    s.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n")
}

/// Preformatted text: trailing spaces, the blank lines around it and the indentation all its
/// lines share removed, the rest kept.
fn trim_lines(s: &str) -> String {
    let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
    let first = lines.iter().position(|l| !l.is_empty()).unwrap_or(lines.len());
    let last = lines.iter().rposition(|l| !l.is_empty()).map_or(first, |l| l + 1);
    let lines = &lines[first..last];
    let indent_of = |l: &str| l.chars().take_while(|c| c.is_whitespace()).count();
    let indent = lines.iter().filter(|l| !l.is_empty()).map(|l| indent_of(l)).min().unwrap_or(0);
    let dedent = |l: &str| l.char_indices().nth(indent).map_or("", |(i, _)| &l[i..]).to_string();
    lines.iter().map(|l| dedent(l)).collect::<Vec<_>>().join("\n")
}
