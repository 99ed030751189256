//! `word/styles.xml` (style chains, heading levels, body styles) and the document's relationships.

use std::collections::HashMap;

use quick_xml::events::Event;
use quick_xml::reader::NsReader;

use super::NS_W;
use super::xml::{attr, is_ns, on_off};

#[derive(Default, Debug)]
pub(super) struct Style {
    name: String,
    based_on: Option<String>,
    outline: Option<u8>,
    pub(super) bold: Option<bool>,
    pub(super) size: Option<u32>,
}

#[derive(Default, Debug)]
pub(super) struct Styles {
    by_id: HashMap<String, Style>,
    default_para: Option<String>,
    /// `w:docDefaults` run size in half-points.
    pub(super) default_size: Option<u32>,
}

impl Styles {
    /// First value found along the `basedOn` chain (bounded: hostile files may contain cycles).
    pub(super) fn inherit<T>(&self, id: Option<&str>, f: impl Fn(&Style) -> Option<T>) -> Option<T> {
        let mut id = id.or(self.default_para.as_deref());
        for _ in 0..16 {
            let style = self.by_id.get(id?)?;
            if let Some(v) = f(style) {
                return Some(v);
            }
            id = style.based_on.as_deref();
        }
        None
    }

    pub(super) fn heading_level(&self, id: &str) -> Option<u8> {
        let name = self.by_id.get(id).map(|s| s.name.as_str());
        [Some(id), name].into_iter().flatten().find_map(level_from_style_name).or_else(|| {
            // Outline level 9 means "body text" and stops the chain like any other value.
            self.inherit(Some(id), |s| s.outline).filter(|&v| v <= 8).map(|v| v + 1)
        })
    }

    /// The heuristic only applies to body text: Normal, or a custom style derived from it
    /// (Chinese templates often use one, e.g. "正文段"), but never TOC entries, captions etc.
    pub(super) fn is_body_style(&self, id: Option<&str>) -> bool {
        let Some(mut id) = id else { return true };
        let name = |id: &str| self.by_id.get(id).map_or(String::new(), |s| s.name.to_lowercase());
        if ["toc", "caption", "header", "footer", "index", "table of"].iter().any(|p| name(id).starts_with(p)) {
            return false;
        }
        for _ in 0..16 {
            if self.default_para.as_deref() == Some(id) || id.eq_ignore_ascii_case("normal") || name(id) == "normal" {
                return true;
            }
            match self.by_id.get(id).and_then(|s| s.based_on.as_deref()) {
                Some(parent) => id = parent,
                None => return false,
            }
        }
        false
    }
}

/// `Title` → 1, `Heading N` / `heading N` / `HeadingN` / `标题 N` → N.
pub(super) fn level_from_style_name(name: &str) -> Option<u8> {
    let key: String = name.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_lowercase();
    if key == "title" {
        return Some(1);
    }
    let n = key.strip_prefix("heading").or_else(|| key.strip_prefix("标题"))?;
    n.parse::<u8>().ok().filter(|n| (1..=9).contains(n))
}

pub(super) fn parse_styles(xml: &str) -> Result<Styles, quick_xml::Error> {
    let mut r = NsReader::from_str(xml);
    let mut out = Styles::default();
    let mut stack: Vec<String> = Vec::new();
    // Id and fields of the paragraph style being read (`None` inside other style types).
    let (mut cur, mut style): (Option<String>, Style) = (None, Style::default());
    let under =
        |stack: &[String], a: &str, b: &str| stack.len() >= 2 && stack[stack.len() - 2] == a && stack[stack.len() - 1] == b;
    loop {
        let (res, ev) = r.read_resolved_event()?;
        let w = is_ns(&res, NS_W);
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let name = if w { e.local_name().as_ref().to_owned() } else { String::new() };
                let val = || attr(&r, e, Some(NS_W), "val");
                match name.as_str() {
                    "style" if attr(&r, e, Some(NS_W), "type").as_deref() == Some("paragraph") => {
                        let id = attr(&r, e, Some(NS_W), "styleId").unwrap_or_default();
                        if attr(&r, e, Some(NS_W), "default").is_some_and(|v| on_off(Some(v))) {
                            out.default_para = Some(id.clone());
                        }
                        (cur, style) = (Some(id), Style::default());
                    }
                    "name" if stack.last().is_some_and(|s| s == "style") => style.name = val().unwrap_or_default(),
                    "basedOn" if stack.last().is_some_and(|s| s == "style") => style.based_on = val(),
                    "outlineLvl" if under(&stack, "style", "pPr") => style.outline = val().and_then(|v| v.parse().ok()),
                    "b" if under(&stack, "style", "rPr") => style.bold = Some(on_off(val())),
                    "sz" if under(&stack, "style", "rPr") => style.size = val().and_then(|v| v.parse().ok()),
                    "sz" if under(&stack, "rPrDefault", "rPr") => out.default_size = val().and_then(|v| v.parse().ok()),
                    _ => {}
                }
                let ends_style = match ev {
                    Event::Start(_) => {
                        stack.push(name);
                        false
                    }
                    _ => name == "style",
                };
                if ends_style && let Some(id) = cur.take() {
                    out.by_id.insert(id, std::mem::take(&mut style));
                }
            }
            Event::End(_) => {
                if stack.pop().as_deref() == Some("style")
                    && let Some(id) = cur.take()
                {
                    out.by_id.insert(id, std::mem::take(&mut style));
                }
            }
            Event::Eof => return Ok(out),
            _ => {}
        }
    }
}

/// External hyperlink targets by relationship id.
pub(super) fn parse_rels(xml: &str) -> Result<HashMap<String, String>, quick_xml::Error> {
    let mut r = NsReader::from_str(xml);
    let mut out = HashMap::new();
    loop {
        match r.read_event()? {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == "Relationship" => {
                let get = |k| attr(&r, &e, None, k);
                let is_link =
                    get("Type").is_some_and(|t| t.ends_with("/hyperlink")) && get("TargetMode").as_deref() == Some("External");
                if let (true, Some(id), Some(target)) = (is_link, get("Id"), get("Target")) {
                    out.insert(id, target);
                }
            }
            Event::Eof => return Ok(out),
            _ => {}
        }
    }
}
