//! Blocks too short to be evidence on their own: a lone character of a title laid out one
//! character per paragraph («判», «决», «书»), a page number, an OCR fragment («il»).
//!
//! The rule applies at indexing, after any provider ([`super::index::write`]), so every
//! kind follows it and no provider needs to know it. A fragment keeps its row, its locator
//! and its place in the source map (the viewer still shows and locates it), but it is kept out
//! of ranking: it gets no lexical terms (neither the mirror nor the SQL ranking can return it,
//! so it is never quoted) and no vector (the embedding backlog skips blocks without terms).
//! The text of a run of fragments («判决书») is carried, like a heading, as context of the
//! next block of the same section (or, at the end of a section, of the previous one), so a
//! title spread over fragments still finds its document.

use super::artifact::Block;

/// Letters or digits a block needs to be evidence on its own (a CJK character counts one).
const MIN_CHARS: usize = 2;
/// An OCR block needs more: short OCR output is mostly noise from lines, stamps and edges.
const MIN_OCR_CHARS: usize = 4;
/// Below this mean word confidence (0–100), a short OCR block is noise too.
const MIN_OCR_CONFIDENCE: f32 = 40.0;
/// "Short" for the confidence rule: a longer OCR block is kept whatever its confidence.
const SHORT_OCR_CHARS: usize = 20;

/// Whether `b` is too short to be evidence on its own (`ocr`: its page was recognised by OCR).
pub fn is_fragment(b: &Block, ocr: bool) -> bool {
    let n = b.text.chars().filter(|c| c.is_alphanumeric()).count();
    if ocr || b.confidence.is_some() {
        let unsure = b.confidence.is_some_and(|c| c < MIN_OCR_CONFIDENCE);
        return n < MIN_OCR_CHARS || (unsure && n < SHORT_OCR_CHARS);
    }
    n < MIN_CHARS
}

/// For each block (in order), the text of the fragment run it carries as lexical context
/// (see the module documentation); `fragment[i]` says whether block `i` is one.
pub fn carried_context(blocks: &[&Block], fragment: &[bool]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = vec![None; blocks.len()];
    let mut i = 0;
    while i < blocks.len() {
        if !fragment[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < blocks.len() && fragment[i] && blocks[i].section_id == blocks[start].section_id {
            i += 1;
        }
        let run: String = blocks[start..i].iter().map(|b| b.text.trim()).collect();
        let same_section = |j: usize| blocks[j].section_id == blocks[start].section_id && !fragment[j];
        let target = if i < blocks.len() && same_section(i) {
            Some(i)
        } else if start > 0 && same_section(start - 1) {
            Some(start - 1)
        } else {
            None
        };
        if let Some(t) = target {
            let slot = out[t].get_or_insert_with(String::new);
            slot.push_str(&run);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(text: &str, section: &str) -> Block {
        Block { id: text.to_string(), section_id: Some(section.to_string()), ..Block::flowing(text) }
    }

    #[test]
    fn lone_characters_and_short_ocr_are_fragments_words_are_not() {
        for t in ["判", "2", " — ", "（1）", "a."] {
            assert!(is_fragment(&block(t, "s"), false), "{t:?}");
        }
        for t in ["北京", "OK", "判决书", "Scoped threads"] {
            assert!(!is_fragment(&block(t, "s"), false), "{t:?}");
        }
        assert!(is_fragment(&block("il", "s"), true));
        assert!(!is_fragment(&block("Invoice", "s"), true));
        let mut unsure = block("lIl1 ,i", "s");
        unsure.confidence = Some(22.0);
        assert!(is_fragment(&unsure, true));
        let mut long = block("a long line the recogniser was unsure about", "s");
        long.confidence = Some(22.0);
        assert!(!is_fragment(&long, true), "long OCR text is kept whatever its confidence");
    }

    #[test]
    fn a_run_of_fragments_is_carried_by_the_next_block_of_its_section() {
        let bs = [block("判", "s1"), block("决", "s1"), block("书", "s1"), block("本院认为", "s1"), block("x", "s2")];
        let refs: Vec<&Block> = bs.iter().collect();
        let frag: Vec<bool> = bs.iter().map(|b| is_fragment(b, false)).collect();
        assert_eq!(frag, [true, true, true, false, true]);
        let ctx = carried_context(&refs, &frag);
        assert_eq!(ctx, [None, None, None, Some("判决书".to_string()), None], "s2's lone block has no neighbour");
        // At the end of a section, the previous block carries the run.
        let bs = [block("正文一段", "s1"), block("完", "s1")];
        let refs: Vec<&Block> = bs.iter().collect();
        assert_eq!(carried_context(&refs, &[false, true]), [Some("完".to_string()), None]);
    }
}
