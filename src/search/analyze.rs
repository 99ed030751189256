//! Text analysis shared by the indexer and the query side, so both see the same terms.
//!
//! * CJK runs (Han, kana, Hangul) are segmented with jieba in search mode, which also emits the
//!   dictionary sub-words of long words (`线程作用域` → `线程`, `作用`, `作用域`), so a query
//!   written with or without spaces meets the block's terms.
//! * Other letters/digits form words: lower-cased (full-width forms folded), English stop words
//!   dropped, Snowball-stemmed (`borrowing` → `borrow`).
//!
//! The result becomes a `tsvector` literal (one position per token) for the GIN index and the
//! BM25 scorer, and highlight ranges over the original text.

use std::{
    collections::{BTreeMap, HashSet},
    sync::OnceLock,
};

use jieba_rs::Jieba;
use rust_stemmers::{Algorithm, Stemmer};

/// One analysed term and where it came from, as byte offsets into the analysed text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub term: String,
    pub start: usize,
    pub end: usize,
}

/// Longest term kept; longer "words" are hashes, base64 and the like.
const MAX_TERM_CHARS: usize = 48;
/// Postgres keeps at most 256 positions per lexeme and positions up to 16383.
const MAX_POSITION: usize = 16_383;
const MAX_POSITIONS_PER_TERM: usize = 255;

fn jieba() -> &'static Jieba {
    static J: OnceLock<Jieba> = OnceLock::new();
    J.get_or_init(Jieba::new)
}

/// How common a Chinese word is in general text: its count in jieba's dictionary, or for a
/// word it does not know (a name, a rare term) the count its characters suggest (small).
/// The built-in agent's verdict weighs a missing common word (特点, 名字) less than a missing
/// name.
pub fn word_frequency(word: &str) -> usize {
    jieba().suggest_freq(word)
}

fn stemmer() -> &'static Stemmer {
    static S: OnceLock<Stemmer> = OnceLock::new();
    S.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// Words recur (Zipf): a per-thread memo makes stemming a hash lookup for most of them.
/// Cleared when it grows past a bound, so memory stays flat. The stem is copied into `out`
/// (a buffer the caller reuses), so a known word costs no allocation.
fn stem_into(word: &str, out: &mut String) {
    const MAX: usize = 50_000;
    thread_local! {
        static MEMO: std::cell::RefCell<std::collections::HashMap<String, String>> = Default::default();
    }
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        out.clear();
        if let Some(s) = m.get(word) {
            out.push_str(s);
            return;
        }
        let s = stemmer().stem(word).into_owned();
        out.push_str(&s);
        if m.len() >= MAX {
            m.clear();
        }
        m.insert(word.to_string(), s);
    })
}

const EN_STOP: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "s",
    "t",
    "d",
    "ll",
    "m",
    "re",
    "ve",
];

/// Function words that carry no meaning on their own; multi-character words stay.
const ZH_STOP: &[&str] = &[
    "的", "了", "是", "在", "和", "与", "及", "或", "也", "就", "都", "而", "把", "被", "让", "给", "对", "从", "向", "于", "以",
    "之", "其", "这", "那", "个", "着", "过", "吗", "呢", "吧", "啊", "呀", "么", "得", "地", "所", "则", "即", "并", "且", "还",
    "又", "为", "由", "等", "中", "上", "下",
];

fn stop_words() -> &'static HashSet<&'static str> {
    static S: OnceLock<HashSet<&'static str>> = OnceLock::new();
    S.get_or_init(|| EN_STOP.iter().chain(ZH_STOP).copied().collect())
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified
        | 0xF900..=0xFAFF    // compatibility ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0x20000..=0x2FA1F) // extensions B–F, compatibility supplement
}

/// Full-width ASCII forms (`ＡＢＣ１２３`) as their ASCII letters.
fn fold(c: char) -> char {
    match c as u32 {
        0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    }
}

fn is_word_char(c: char) -> bool {
    let c = fold(c);
    c.is_alphanumeric() && !is_cjk(c)
}

/// The length of a footnote marker glued to the start of `word`: one to three ASCII digits
/// followed by a capitalised word (`2The`, `12Flight`), not a token like `3D`, `4K`, `H2O` or
/// `2nd` (no capital, or no lower-case letter after it).
fn glued_marker(word: &str) -> Option<usize> {
    let b = word.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let glued = (1..=3).contains(&digits)
        && b.get(digits).is_some_and(|c| c.is_ascii_uppercase())
        && b.get(digits + 1).is_some_and(|c| c.is_ascii_lowercase());
    glued.then_some(digits)
}

/// Analyse `text` into terms with their byte ranges, in text order.
pub fn analyze(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    each_token(text, |term, start, end| out.push(Token { term: term.to_string(), start, end }));
    out
}

/// [`analyze`] without building the tokens: `f` gets each term and its byte range. Quotes and
/// highlights analyse every returned block's text, so this allocates nothing per word.
pub fn each_token(text: &str, mut f: impl FnMut(&str, usize, usize)) {
    let stop = stop_words();
    let mut word = String::new();
    let mut stemmed = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if is_cjk(c) {
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if !is_cjk(c) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            let run = &text[start..end];
            for t in jieba().cut_for_search(run, true) {
                let w = t.word;
                if stop.contains(w) || w.chars().count() > MAX_TERM_CHARS {
                    continue;
                }
                f(w, start + t.byte_start, start + t.byte_end);
            }
        } else if is_word_char(c) {
            // A footnote marker glued to the word it precedes («2The flight…»): the digits
            // are dropped, the word is analysed on its own.
            if let Some(n) = glued_marker(&text[start..]) {
                for _ in 0..n {
                    chars.next();
                }
                continue;
            }
            let mut end = start;
            word.clear();
            while let Some(&(i, c)) = chars.peek() {
                if !is_word_char(c) {
                    break;
                }
                end = i + c.len_utf8();
                let c = fold(c);
                if c.is_ascii() {
                    word.push(c.to_ascii_lowercase());
                } else {
                    word.extend(c.to_lowercase());
                }
                chars.next();
            }
            if stop.contains(word.as_str()) || word.chars().count() > MAX_TERM_CHARS {
                continue;
            }
            if word.bytes().all(|b| b.is_ascii_alphabetic()) {
                stem_into(&word, &mut stemmed);
                f(&stemmed, start, end);
            } else {
                f(&word, start, end);
            }
        } else {
            chars.next();
        }
    }
}

/// What the indexer stores for a block: the `tsvector` literal and the BM25 length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lexemes {
    pub tsvector: String,
    /// Number of analysed tokens (document length for BM25).
    pub len: i32,
    /// Distinct terms, sorted (for the per-KB document frequencies).
    pub terms: Vec<String>,
}

/// Analyse a block for the index.
pub fn index_terms(text: &str) -> Lexemes {
    let tokens: Vec<String> = analyze(text).into_iter().map(|t| t.term).collect();
    lexemes(&tokens, text.len())
}

/// Analyse a block for the index with the titles of the sections it sits in: each distinct
/// term of `context` counts once (however many headings repeat it), then the block's own
/// text counts as written. So a block is found by its headings' words, but a short block does
/// not outrank the ones that use the words only because it sits under them.
pub fn index_terms_in_context(context: &[String], text: &str) -> Lexemes {
    let mut seen = HashSet::new();
    let mut tokens: Vec<String> = Vec::new();
    for title in context {
        for t in analyze(title) {
            if seen.insert(t.term.clone()) {
                tokens.push(t.term);
            }
        }
    }
    tokens.extend(analyze(text).into_iter().map(|t| t.term));
    lexemes(&tokens, text.len())
}

fn lexemes(tokens: &[String], text_len: usize) -> Lexemes {
    let mut positions: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, t) in tokens.iter().enumerate() {
        let p = positions.entry(t.as_str()).or_default();
        if p.len() < MAX_POSITIONS_PER_TERM {
            p.push((i + 1).min(MAX_POSITION));
        }
    }
    let mut tsv = String::with_capacity(text_len + positions.len() * 4);
    for (term, pos) in &positions {
        if !tsv.is_empty() {
            tsv.push(' ');
        }
        push_quoted(&mut tsv, term);
        tsv.push(':');
        let mut last = 0;
        let mut first = true;
        for &p in pos {
            // Positions must increase; the cap can repeat MAX_POSITION.
            if p <= last {
                continue;
            }
            if !first {
                tsv.push(',');
            }
            tsv.push_str(&p.to_string());
            last = p;
            first = false;
        }
    }
    Lexemes { tsvector: tsv, len: tokens.len() as i32, terms: positions.keys().map(|t| t.to_string()).collect() }
}

fn push_quoted(out: &mut String, term: &str) {
    out.push('\'');
    for c in term.chars() {
        if c == '\'' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
}

/// The analysed query: distinct terms with their counts, in first-seen order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryTerms {
    pub terms: Vec<String>,
    pub counts: Vec<i32>,
    /// Share of the query's letters that are CJK (0..=1).
    pub cjk_ratio: f64,
}

impl QueryTerms {
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// `'a' | 'b' | …`: a block matches when it holds any query term.
    pub fn tsquery(&self) -> String {
        let mut q = String::new();
        for t in &self.terms {
            if !q.is_empty() {
                q.push_str(" | ");
            }
            push_quoted(&mut q, t);
        }
        q
    }
}

pub fn query_terms(query: &str) -> QueryTerms {
    let mut qt = QueryTerms::default();
    for t in analyze(query) {
        match qt.terms.iter().position(|x| *x == t.term) {
            Some(i) => qt.counts[i] += 1,
            None => {
                qt.terms.push(t.term);
                qt.counts.push(1);
            }
        }
    }
    let letters = query.chars().filter(|c| c.is_alphanumeric()).count();
    let cjk = query.chars().filter(|&c| is_cjk(c)).count();
    qt.cjk_ratio = if letters == 0 { 0.0 } else { cjk as f64 / letters as f64 };
    qt
}

/// Byte ranges of `text` whose terms are among `terms`, merged where they overlap or touch.
pub fn highlight_ranges(text: &str, terms: &[String]) -> Vec<(usize, usize)> {
    // A query has a handful of terms: comparing with each is cheaper than hashing every word.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    each_token(text, |term, start, end| {
        if terms.iter().any(|t| t == term) {
            ranges.push((start, end));
        }
    });
    ranges.sort();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footnote_markers_glued_to_a_word_are_split_off() {
        let terms = |t: &str| analyze(t).into_iter().map(|t| t.term).collect::<Vec<_>>();
        assert_eq!(terms("2The flight control system"), terms("The flight control system"));
        assert_eq!(terms("stable.12Flight tests"), ["stabl", "flight", "test"]);
        let t = analyze("2Flight tests");
        assert_eq!((t[0].term.as_str(), t[0].start, t[0].end), ("flight", 1, 7), "the word's own range, without the marker");
        for kept in ["3D", "4K", "H2O", "2nd", "1984Orwell", "COVID19"] {
            assert_eq!(terms(kept), [kept.to_lowercase()], "{kept}");
        }
    }

    fn terms(text: &str) -> Vec<String> {
        analyze(text).into_iter().map(|t| t.term).collect()
    }

    #[test]
    fn chinese_is_segmented_and_query_word_order_does_not_matter() {
        let block = index_terms("在 Rust 里，使用线程作用域可以借用栈上的数据。");
        let q1 = query_terms("线程作用域");
        let q2 = query_terms("作用域 线程");
        assert!(!q1.is_empty());
        for t in q1.terms.iter().chain(&q2.terms) {
            assert!(block.terms.contains(t), "{t} missing from {:?}", block.terms);
        }
        assert!(block.terms.contains(&"线程".to_string()));
        assert!(block.terms.contains(&"作用域".to_string()));
        assert!(!block.terms.contains(&"的".to_string()), "function words are dropped");
    }

    #[test]
    fn english_is_stemmed_and_stop_words_dropped() {
        assert_eq!(terms("Borrowing the borrowed Data"), ["borrow", "borrow", "data"]);
        assert_eq!(query_terms("borrowing").terms, ["borrow"]);
        assert_eq!(terms("ＲＵＳＴ２０２４"), ["rust2024"], "full-width folded");
    }

    #[test]
    fn offsets_point_into_the_original_text() {
        let text = "Scoped threads: 线程作用域 borrow.";
        for t in analyze(text) {
            assert!(text.is_char_boundary(t.start) && text.is_char_boundary(t.end));
        }
        let q = query_terms("作用域 borrowing");
        let hl: Vec<&str> = highlight_ranges(text, &q.terms).iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(hl, ["作用域", "borrow"]);
    }

    #[test]
    fn tsvector_literal_has_sorted_quoted_terms_with_positions() {
        let l = index_terms("data borrow data");
        assert_eq!(l.tsvector, "'borrow':2 'data':1,3");
        assert_eq!(l.len, 3);
        assert_eq!(query_terms("data, borrow data").tsquery(), "'data' | 'borrow'");
        assert_eq!(query_terms("data, borrow data").counts, [2, 1]);
    }

    #[test]
    fn section_titles_count_once_per_block() {
        let path = vec!["线程作用域".to_string(), "作用域的注意事项".to_string()];
        let l = index_terms_in_context(&path, "不需要 Arc 就能共享数据。");
        let own = index_terms("不需要 Arc 就能共享数据。");
        let positions = |l: &Lexemes, term: &str| {
            let prefix = format!("'{term}':");
            l.tsvector.split(' ').find(|t| t.starts_with(&prefix)).map(|t| t.matches(',').count() + 1).unwrap_or(0)
        };
        assert_eq!(positions(&l, "作用域"), 1, "in both titles, counted once: {}", l.tsvector);
        assert_eq!(positions(&own, "作用域"), 0);
        assert_eq!(positions(&l, "arc"), 1);
        assert!(l.len > own.len);
        assert_eq!(index_terms_in_context(&[], "data borrow data"), index_terms("data borrow data"));
    }

    #[test]
    fn highlights_and_tokens_agree_with_the_analysis() {
        let text = "Ｒｕｓｔ borrowing: 借用检查器 checks the Borrowed data, ÉCOLE naïve x1 borrow";
        let mut seen = Vec::new();
        each_token(text, |t, s, e| seen.push(Token { term: t.to_string(), start: s, end: e }));
        assert_eq!(seen, analyze(text));
        assert_eq!(seen[0].term, "rust", "full-width folded and lower-cased");
        let q = query_terms("borrow école 借用");
        let hl: Vec<&str> = highlight_ranges(text, &q.terms).iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(hl, ["borrowing", "借用", "Borrowed", "ÉCOLE", "borrow"]);
    }

    #[test]
    fn hostile_text_stays_bounded() {
        let long = "x".repeat(100_000);
        assert!(index_terms(&long).terms.is_empty(), "over-long words are not terms");
        let many = "word ".repeat(40_000);
        let l = index_terms(&many);
        assert_eq!(l.terms, ["word"]);
        assert!(l.tsvector.matches(',').count() < MAX_POSITIONS_PER_TERM);
        assert!(index_terms("").tsvector.is_empty());
    }
}
