//! Reference → evidence: align a LightRAG chunk's text to the evidence blocks of the source it
//! names, to cite the block(s) it came from with our locator.
//!
//! Both sides are compared as a stream of lowercase letters and digits only, so Markdown
//! markup, whitespace and line breaks (LightRAG re-chunks and keeps raw Markdown; our blocks
//! hold rendered text) do not matter. The whole chunk found in the stream is `exact`; else
//! anchors (short windows spread over the chunk) locate it `fuzzy`, robust to a changed word
//! or a table LightRAG extracted differently. A chunk that is only an image placeholder, or no
//! chunk at all, is enriched from the block that best matches the query terms.

/// One evidence block of the source, in document order.
#[derive(Debug, Clone)]
pub struct BlockText<'a> {
    pub text: &'a str,
    pub is_ocr: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchQuality {
    /// The chunk's text is a contiguous run of the source's blocks.
    Exact,
    /// Located by parts of the chunk (re-chunked, reformatted or partly different text).
    Fuzzy,
    /// Only the file is known (no usable chunk text): the block was picked by query terms.
    FileOnly,
    /// Chunk text that matches nothing in the source.
    Unmatched,
}

/// Where a chunk lies in a source's blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct Alignment {
    pub quality: MatchQuality,
    /// The first block the chunk covers (index into the blocks given).
    pub first: usize,
    /// How many blocks it covers (≥ 1).
    pub blocks: usize,
}

/// The characters compared: letters and digits, lowercased (CJK stays as is).
fn significant(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase)
}

/// The blocks as one normalised stream, with the block each char came from.
pub struct Stream {
    chars: Vec<char>,
    owner: Vec<u32>,
}

impl Stream {
    pub fn new(blocks: &[BlockText<'_>]) -> Self {
        let mut chars = Vec::new();
        let mut owner = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            for c in significant(b.text) {
                chars.push(c);
                owner.push(i as u32);
            }
        }
        Stream { chars, owner }
    }

    fn find(&self, needle: &[char], from: usize) -> Option<usize> {
        if needle.is_empty() || needle.len() > self.chars.len() {
            return None;
        }
        (from..=self.chars.len() - needle.len())
            .find(|&i| self.chars[i] == needle[0] && self.chars[i..i + needle.len()] == *needle)
    }

    fn span(&self, start: usize, len: usize) -> (usize, usize) {
        let first = self.owner[start] as usize;
        let last = self.owner[(start + len).min(self.owner.len()) - 1] as usize;
        (first, last - first + 1)
    }

    /// Align `chunk` to the blocks; `None` when the chunk has no significant text.
    pub fn align(&self, chunk: &str) -> Option<Alignment> {
        let needle: Vec<char> = significant(chunk).collect();
        if needle.is_empty() {
            return None;
        }
        if let Some(at) = self.find(&needle, 0) {
            let (first, blocks) = self.span(at, needle.len());
            return Some(Alignment { quality: MatchQuality::Exact, first, blocks });
        }
        // Anchors: up to 12 windows spread over the chunk; where each is found, the chunk
        // would start at (found − offset). The most common start wins.
        const W: usize = 16;
        let w = W.min(needle.len());
        let count = (needle.len() / w).clamp(1, 12);
        let step = if count > 1 { (needle.len() - w) / (count - 1) } else { 0 };
        let mut votes: Vec<(isize, usize, usize)> = Vec::new(); // (start, hits, last found end)
        let mut found = 0usize;
        for k in 0..count {
            let off = k * step;
            let Some(at) = self.find(&needle[off..off + w], 0) else { continue };
            found += 1;
            let start = at as isize - off as isize;
            match votes.iter_mut().find(|v| (v.0 - start).abs() <= 64) {
                Some(v) => {
                    v.1 += 1;
                    v.2 = v.2.max(at + w);
                }
                None => votes.push((start, 1, at + w)),
            }
        }
        // At least two anchors agreeing (or the only one of a short chunk).
        let best = votes.iter().max_by_key(|v| v.1).filter(|v| v.1 >= 2 || (count == 1 && found == 1));
        match best {
            Some(&(start, _, end)) => {
                let start = start.max(0) as usize;
                let (first, _) = self.span(start.min(self.chars.len() - 1), 1);
                let (_, blocks) = self.span(start.min(self.chars.len() - 1), end.saturating_sub(start).max(1));
                Some(Alignment { quality: MatchQuality::Fuzzy, first, blocks })
            }
            None => Some(Alignment { quality: MatchQuality::Unmatched, first: 0, blocks: 0 }),
        }
    }
}

/// A chunk of raw Markdown as our rendered blocks read it: without list numbers and bullets,
/// quote and heading markers, link and image targets, and HTML tags (LightRAG chunks the raw
/// file; our Markdown blocks hold the rendered text).
pub fn markdown_as_rendered(chunk: &str) -> String {
    let mut out = String::with_capacity(chunk.len());
    for line in chunk.lines() {
        let mut l = line.trim_start();
        loop {
            let before = l;
            l = l.trim_start_matches('>').trim_start();
            if let Some(rest) = l.strip_prefix(['-', '*', '+']).filter(|r| r.starts_with(' ')) {
                l = rest.trim_start();
            }
            let digits = l.chars().take_while(char::is_ascii_digit).count();
            if digits > 0 && digits < 10 {
                let rest = &l[digits..];
                if let Some(r) = rest.strip_prefix(['.', ')']).filter(|r| r.is_empty() || r.starts_with(' ')) {
                    l = r.trim_start();
                }
            }
            if l == before {
                break;
            }
        }
        let mut rest = l;
        while let Some(i) = rest.find(['<', ']']) {
            let (head, tail) = rest.split_at(i);
            out.push_str(head);
            if tail.starts_with("](") {
                // `[text](target)`: the target is not rendered text
                rest = tail.find(')').map_or("", |j| &tail[j + 1..]);
            } else if tail.starts_with('<')
                && tail[1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
                && !tail[1..].starts_with("http")
            {
                // an HTML tag
                rest = tail.find('>').map_or("", |j| &tail[j + 1..]);
            } else {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// A chunk that carries no text of its own: empty, or only headings and Markdown image
/// placeholders (`# photo.png\n\n![photo.png](<photo.png>)`), as a file-name wrapper of an
/// image would be.
pub fn is_image_placeholder(chunk: &str) -> bool {
    let mut saw_image = false;
    for line in chunk.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("![") && line.ends_with(')') {
            saw_image = true;
        } else if !line.starts_with('#') {
            return false;
        }
    }
    saw_image
}

/// Query terms: lowercase words and CJK characters + adjacent pairs.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_cjk = |cjk: &mut Vec<char>, out: &mut Vec<String>| {
        for (i, c) in cjk.iter().enumerate() {
            out.push(c.to_string());
            if let Some(n) = cjk.get(i + 1) {
                out.push(format!("{c}{n}"));
            }
        }
        cjk.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            cjk.push(c);
        } else if c.is_alphanumeric() {
            flush_cjk(&mut cjk, &mut out);
            word.extend(c.to_lowercase());
        } else {
            flush_cjk(&mut cjk, &mut out);
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        }
    }
    flush_cjk(&mut cjk, &mut out);
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x9fff | 0xf900..=0xfaff | 0x20000..=0x2ffff)
}

/// The block that best matches the query terms (share of distinct terms it contains; OCR
/// blocks first on a tie when `prefer_ocr`). `None` when no block holds any term.
pub fn best_block_for_terms(blocks: &[BlockText<'_>], query: &str, prefer_ocr: bool) -> Option<usize> {
    let mut q = terms(query);
    q.sort();
    q.dedup();
    if q.is_empty() {
        return None;
    }
    let mut best: Option<(usize, (usize, bool))> = None;
    for (i, b) in blocks.iter().enumerate() {
        let lower = b.text.to_lowercase();
        let hits = q.iter().filter(|t| lower.contains(t.as_str())).count();
        if hits == 0 {
            continue;
        }
        let key = (hits, prefer_ocr && b.is_ocr);
        if best.is_none_or(|(_, k)| key > k) {
            best = Some((i, key));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(texts: &[&'static str]) -> Vec<BlockText<'static>> {
        texts.iter().map(|t| BlockText { text: t, is_ocr: false }).collect()
    }

    #[test]
    fn a_raw_markdown_chunk_aligns_exactly_to_rendered_blocks() {
        let b = blocks(&["Handbook", "Acme Robotics builds warehouse robots in Lyon.", "Engineering", "Marie leads the team."]);
        let s = Stream::new(&b);
        let chunk = "# Handbook\n\nAcme Robotics builds **warehouse** robots in Lyon.\n\n## Engineering\n";
        assert_eq!(s.align(chunk), Some(Alignment { quality: MatchQuality::Exact, first: 0, blocks: 3 }));
        // An overlap chunk starting mid-block.
        assert_eq!(
            s.align("robots in Lyon.\n\n## Engineering\n\nMarie leads"),
            Some(Alignment { quality: MatchQuality::Exact, first: 1, blocks: 3 })
        );
    }

    #[test]
    fn cjk_text_aligns_without_its_whitespace() {
        let b = blocks(&["第一章 概述", "线程作用域是并发编程中的重要概念。", "其他内容"]);
        let s = Stream::new(&b);
        let a = s.align("线程 作用域是并发\n编程中的重要概念").unwrap();
        assert_eq!((a.quality, a.first, a.blocks), (MatchQuality::Exact, 1, 1));
    }

    #[test]
    fn a_partly_different_chunk_aligns_fuzzy_and_nonsense_is_unmatched() {
        let long = "The warehouse robots are charged overnight in the north hall. Each robot reports its battery level every minute to the fleet controller.";
        let b = blocks(&["Intro text here.", long, "Closing remarks."]);
        let s = Stream::new(&b);
        let changed = long.replace("north hall", "east wing");
        let a = s.align(&changed).unwrap();
        assert_eq!((a.quality, a.first), (MatchQuality::Fuzzy, 1));
        assert_eq!(
            s.align("Completely unrelated sentence about astronomy and the stars tonight.").unwrap().quality,
            MatchQuality::Unmatched
        );
        assert_eq!(s.align("  \n# ## "), None);
    }

    #[test]
    fn raw_markdown_chunks_read_like_rendered_blocks() {
        let b = blocks(&["Definitions.", "Licensor shall mean the copyright owner.", "See the guide for details.", "a quote"]);
        let s = Stream::new(&b);
        let chunk = "1. Definitions.\n\n   - **Licensor** shall mean the copyright owner.\n\nSee [the guide](https://x.example/g?a=1) for <b>details</b>.\n> a quote";
        assert_eq!(s.align(chunk).unwrap().quality, MatchQuality::Fuzzy, "raw: the list number and link target differ");
        let a = s.align(&markdown_as_rendered(chunk)).unwrap();
        assert_eq!((a.quality, a.first, a.blocks), (MatchQuality::Exact, 0, 4));
        assert_eq!(markdown_as_rendered("2023 was a year.\n"), "2023 was a year.\n", "a number that is no list marker stays");
    }

    #[test]
    fn image_placeholders_are_recognised() {
        assert!(is_image_placeholder("# image copy 6.png\n\n![image copy 6.png](<image copy 6.png>)"));
        assert!(!is_image_placeholder("# photo.png\n\n线程作用域"));
        assert!(!is_image_placeholder(""));
    }

    #[test]
    fn query_terms_pick_the_block_and_prefer_ocr() {
        let b = vec![
            BlockText { text: "Introduction to the guide", is_ocr: false },
            BlockText { text: "线程作用域 in the diagram", is_ocr: true },
            BlockText { text: "线程作用域 in prose", is_ocr: false },
        ];
        assert_eq!(best_block_for_terms(&b, "线程作用域", true), Some(1));
        assert_eq!(best_block_for_terms(&b, "prose 线程", false), Some(2));
        assert_eq!(best_block_for_terms(&b, "zebra", false), None);
        assert!(terms("Thread 作用域").contains(&"作用".to_string()));
    }
}
