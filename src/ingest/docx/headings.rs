//! Heading classification: outline levels, heading styles, and the heuristic for report titles.

use std::collections::BTreeMap;

use super::document::RawBlock;
use super::styles::Styles;

/// Body text size: the size carrying the most visible characters (smallest on ties).
pub(super) fn body_font_size(raw: &[RawBlock]) -> u32 {
    let mut weight: BTreeMap<u32, usize> = BTreeMap::new();
    for run in raw.iter().flat_map(|b| &b.runs) {
        *weight.entry(run.1).or_default() += run.2;
    }
    weight.into_iter().fold((20, 0), |best, (size, n)| if n > best.1 { (size, n) } else { best }).0
}

pub(super) fn heading_level(b: &RawBlock, styles: &Styles, body_size: u32, bold_is_signal: bool) -> Option<u8> {
    match b.outline {
        Some(v) if v <= 8 => return Some(v + 1),
        Some(_) => return None,
        None => {}
    }
    if let Some(level) = b.style.as_deref().and_then(|s| styles.heading_level(s)) {
        return Some(level);
    }
    if b.is_row || b.numbered || !styles.is_body_style(b.style.as_deref()) {
        return None;
    }
    let all = |f: fn(&(bool, u32, usize), u32) -> bool| !b.runs.is_empty() && b.runs.iter().all(|r| f(r, body_size));
    let emphasised = (bold_is_signal && all(|r, _| r.0)) || all(|r, body| r.1 > body);
    heuristic_level(&b.text, emphasised)
}

/// Report titles written in Normal style. Conservative: at most 40 chars on one line, no
/// sentence punctuation, at least two chars with a letter after any numbering prefix, and
/// either a Chinese numbering prefix (第X章 → 1, 一、→ 2, （一）→ 3) or emphasis (entirely bold,
/// or larger than body text). Arabic prefixes (`1.` → 2, `1.1` → 3, …) count only together with
/// emphasis, since plain numbered sentences are common in body text. Emphasis alone → 2.
fn heuristic_level(text: &str, emphasised: bool) -> Option<u8> {
    let text = text.trim();
    if text.chars().count() > 40 || text.contains('\n') {
        return None;
    }
    let (pattern, title) = match chinese_prefix(text) {
        Some((level, rest)) => (Some((level, true)), rest),
        None => match arabic_prefix(text) {
            Some((level, rest)) => (Some((level, false)), rest),
            None => (None, text),
        },
    };
    let title = title.trim();
    if title.chars().count() < 2 || !title.chars().any(char::is_alphabetic) {
        return None;
    }
    if title.chars().any(|c| "。；;：:！!？?，,".contains(c)) || title.ends_with('.') {
        return None;
    }
    match pattern {
        Some((level, true)) => Some(level),
        Some((level, false)) if emphasised => Some(level),
        None if emphasised => Some(2),
        _ => None,
    }
}

fn prefix_len(s: &str, f: impl Fn(char) -> bool) -> usize {
    s.chars().take_while(|&c| f(c)).map(char::len_utf8).sum()
}

fn chinese_prefix(s: &str) -> Option<(u8, &str)> {
    let zh = |c: char| "一二三四五六七八九十百零〇两".contains(c);
    if let Some(rest) = s.strip_prefix('第') {
        let n = prefix_len(rest, |c| zh(c) || c.is_ascii_digit());
        return rest[n..].strip_prefix('章').filter(|_| n > 0).map(|t| (1, t));
    }
    let n = prefix_len(s, zh);
    if n > 0 {
        return s[n..].strip_prefix('、').map(|t| (2, t));
    }
    let rest = s.strip_prefix('（').or_else(|| s.strip_prefix('('))?;
    let n = prefix_len(rest, zh);
    let t = rest[n..].strip_prefix('）').or_else(|| rest[n..].strip_prefix(')'))?;
    (n > 0).then_some((3, t))
}

/// `1.` / `1、` → 2, `1.1` / `1.1.` → 3, one more level per group (numbers of ≤ 3 digits).
fn arabic_prefix(s: &str) -> Option<(u8, &str)> {
    let mut groups = 0u8;
    let mut rest = s;
    loop {
        let n = prefix_len(rest, |c| c.is_ascii_digit());
        if n == 0 || n > 3 || groups >= 8 {
            break;
        }
        groups += 1;
        rest = &rest[n..];
        match rest.chars().next() {
            Some(c @ ('.' | '．')) => rest = &rest[c.len_utf8()..],
            Some('、') if groups == 1 => return Some((2, &rest['、'.len_utf8()..])),
            Some(c) if c.is_whitespace() && groups > 1 => return Some((groups + 1, rest)),
            _ => return None,
        }
    }
    (groups > 0).then_some((groups + 1, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::docx::styles::level_from_style_name;

    #[test]
    fn heuristic_levels() {
        let cases = [
            ("第一章 总则", false, Some(1)),
            ("第12章 附录", false, Some(1)),
            ("一、适用范围", false, Some(2)),
            ("（一）基本原则", false, Some(3)),
            ("(二) 工作目标", false, Some(3)),
            ("1. Install the crate", false, None),
            ("1. Install", true, Some(2)),
            ("1、总体要求", true, Some(2)),
            ("1.1 背景", true, Some(3)),
            ("2.3.1 Details", true, Some(4)),
            ("研究背景", true, Some(2)),
            ("研究背景", false, None),
            ("一、本办法适用于全国。", false, None),
            ("注：", true, None),
            ("3.5%", true, None),
            ("1.5倍增长", true, Some(2)),
            ("一、", false, None),
            ("第一节 概述", false, None),
            ("这是一个非常非常长的段落，它虽然是粗体，但显然不是标题，因为它超过了四十个字符的限制呢", true, None),
        ];
        for (text, emphasised, want) in cases {
            assert_eq!(heuristic_level(text, emphasised), want, "{text}");
        }
        assert_eq!(level_from_style_name("heading 3"), Some(3));
        assert_eq!(level_from_style_name("Heading10"), None);
    }
}
