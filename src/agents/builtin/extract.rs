//! Query-focused extraction: the searches the built-in agent plans for a question, and the
//! whole sentences of the passages found that answer it.
//!
//! A sentence is scored by the share of the question's terms it holds (the search analyzer's
//! terms: jieba for Chinese, stemmed English; question words dropped), each term weighted by
//! how rare it is among the candidate sentences and, for Chinese, by its length (a one-character
//! word says little); plus what an answer has that the question has not (new words, and the
//! kind of thing asked for: a number, a year or a date), the passage's search rank and a small
//! lead bonus for its first sentences, minus a penalty for a piece the search quote cut short.
//! Headings alone, code (unless the question is about code) and duplicates are left out; the
//! best sentences (within a margin of the best one) are kept, grouped by document.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::{
    answerable::{self, Fit},
    lang::Lang,
    terms::{content_words, question_terms, written_in},
};
use crate::{
    agents::{
        citations,
        tools::EvidenceHit,
        verdict::{Assessment, Verdict},
    },
    search::analyze,
};

/// Searches per question.
pub const MAX_SEARCHES: usize = 3;
/// Sentences in an answer, and from one passage.
const MAX_SENTENCES: usize = 5;
const PER_EVIDENCE: usize = 4;
/// Characters of the question that are searched (a pasted document is not a query).
const MAX_QUERY_CHARS: usize = 500;
/// Longest sentence quoted (a paragraph without sentence ends is cut).
const MAX_SENTENCE_CHARS: usize = 320;
/// Passages read whole per answer (one `read` call each).
pub const MAX_READS: usize = 3;
/// A sentence is kept when it scores at least this share of the best one.
const MARGIN: f64 = 0.5;
/// The weight of a question term a sentence does not name but its passage's first sentence
/// (or heading) does: the sentence speaks of what the passage is about.
const CARRIED: f64 = 0.7;

/// The searches for `question`: the question itself, then up to two key phrases (runs of
/// adjacent content words as written), longest first; none that would search the same terms
/// as the question.
pub fn plan_queries(question: &str) -> Vec<String> {
    let q = question.trim();
    let q = match q.char_indices().nth(MAX_QUERY_CHARS) {
        Some((i, _)) => &q[..i],
        None => q,
    };
    if q.is_empty() {
        return Vec::new();
    }
    let all_terms = question_terms(q);
    let outer = content_words(q);
    // Adjacent words (nothing but spaces or hyphens between them) form a phrase.
    let mut phrases: Vec<(usize, usize, usize)> = Vec::new(); // (start, end, words)
    for (s, e) in outer {
        match phrases.last_mut() {
            Some(p) if q[p.1..s].chars().all(|c| c == ' ' || c == '-') => {
                p.1 = e;
                p.2 += 1;
            }
            _ => phrases.push((s, e, 1)),
        }
    }
    phrases.sort_by(|a, b| b.2.cmp(&a.2).then((b.1 - b.0).cmp(&(a.1 - a.0))).then(a.0.cmp(&b.0)));
    let mut out = vec![q.to_string()];
    let mut seen: Vec<HashSet<String>> = vec![all_terms];
    for (s, e, _) in phrases {
        if out.len() >= MAX_SEARCHES {
            break;
        }
        let phrase = &q[s..e];
        let terms = question_terms(phrase);
        if terms.is_empty() || seen.contains(&terms) {
            continue;
        }
        seen.push(terms);
        out.push(phrase.to_string());
    }
    out
}

/// Strip what cut quotes carry (`…`) and trim.
fn tidy(sentence: &str) -> String {
    let s = sentence.trim().trim_matches('…').trim();
    match s.char_indices().nth(MAX_SENTENCE_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Comparable text of a sentence (for deduplication).
fn key(s: &str) -> String {
    s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// Whether `question` asks about code (then code lines may be quoted).
fn about_code(question: &str) -> bool {
    if question.contains('`') || question.contains("::") {
        return true;
    }
    let q = question.to_lowercase();
    let words: Vec<&str> = q.split(|c: char| !c.is_alphanumeric()).collect();
    ["code", "function", "syntax", "snippet", "macro", "api", "command"].iter().any(|w| words.contains(w))
        || ["代码", "函数", "语法", "命令"].iter().any(|w| q.contains(w))
}

/// Whether a raw piece of a quote reads as code rather than prose: a fence, a line that opens
/// or closes a block, statement punctuation, or more symbols than a sentence has.
pub(super) fn looks_like_code(raw: &str) -> bool {
    let t = raw.trim();
    if t.contains("```") || t.contains("~~~") {
        return true;
    }
    let symbols = t.chars().filter(|c| "{}()[];=<>|&$".contains(*c)).count();
    let letters = t.chars().filter(|c| c.is_alphanumeric()).count().max(1);
    let last = t.trim_end_matches(['…', ' ']).chars().last();
    let starts =
        ["fn ", "let ", "use ", "pub ", "impl ", "def ", "import ", "from ", "return ", "const ", "var ", "#include", "//", "$ "];
    matches!(last, Some('{' | '}' | ';'))
        || starts.iter().any(|s| t.starts_with(s))
        || symbols * 6 > letters
        || t.contains("::") && !t.contains(' ')
}

/// A piece of a quote the search cut short (it starts or ends with `…` where the quote was
/// shortened around the match): not a whole sentence.
fn is_fragment(raw: &str, first: bool, last: bool) -> bool {
    let t = raw.trim();
    (first && t.starts_with('…')) || (last && t.ends_with('…'))
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x3040..=0x30FF | 0xAC00..=0xD7AF)
}

/// `text` cut after its sentence ends ([`citations::split_sentences`]), except inside brackets:
/// "St." in "（Cathedral Church of St. Paul）" ends no sentence.
fn sentence_pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut end, mut depth) = (0usize, 0usize, 0i32);
    for piece in citations::split_sentences(text) {
        end += piece.len();
        depth += piece
            .chars()
            .map(|c| match c {
                '(' | '（' | '[' => 1,
                ')' | '）' | ']' => -1,
                _ => 0,
            })
            .sum::<i32>();
        if depth <= 0 {
            out.push(&text[start..end]);
            (start, depth) = (end, 0);
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// A sentence of a passage that may go into the answer.
struct Sentence {
    hit: usize,
    /// Its place in the passage (0: the first sentence, which often says what the rest is about).
    pos: usize,
    text: String,
    terms: HashSet<String>,
    whole: bool,
}

/// The candidate sentences of one hit, headings-only and (unless `code`) code pieces left out.
fn sentences_of(i: usize, h: &EvidenceHit, code: bool) -> Vec<Sentence> {
    let heading = h.section.as_deref().map(key).unwrap_or_default();
    let pieces = sentence_pieces(&h.quote);
    let n = pieces.len();
    let mut out = Vec::new();
    for (j, piece) in pieces.into_iter().enumerate() {
        if !code && looks_like_code(piece) {
            continue;
        }
        let text = tidy(&citations::clean_sentence(piece));
        // A passage that only repeats its heading (a heading block) says nothing.
        if !citations::has_content(&text) || (!heading.is_empty() && key(&text) == heading) {
            continue;
        }
        let terms: HashSet<String> = analyze::analyze(&text).into_iter().map(|t| t.term).collect();
        let whole = !is_fragment(piece, j == 0, j + 1 == n);
        out.push(Sentence { hit: i, pos: j, text, terms, whole });
    }
    out
}

/// The weight of each question term among `sentences`: rarer terms weigh more (a word every
/// passage has does not pick a sentence); a Chinese word by its length (one character says
/// little, a long name much).
fn weights(q: &HashSet<String>, sentences: &[Sentence]) -> HashMap<String, f64> {
    let n = sentences.len() as f64;
    q.iter()
        .map(|t| {
            let df = sentences.iter().filter(|s| s.terms.contains(t)).count() as f64;
            let idf = ((n + 1.0) / (df + 0.5)).ln().max(0.2);
            let chars = t.chars().count();
            let len = if t.chars().any(is_cjk) { (chars as f64).min(4.0) / 2.0 } else { 1.0 };
            (t.clone(), idf * len)
        })
        .collect()
}

struct Scored {
    hit: usize,
    text: String,
    score: f64,
}

/// The best sentences of `hits` for `question`: `(hit index, sentence)` in answer order —
/// grouped by document (documents in order of their best sentence), best first within one.
///
/// A sentence must share enough of the question's terms, or hold the kind of value asked for
/// next to the question's focus (`预算金额（元）：700000` for 预算金额是多少) in a passage that
/// shares them. Its score: the terms it covers (and, less, those its passage covers), what it
/// adds, the value asked for (most when it names the focus), the search's own score of its
/// passage (relative to the best), a lead bonus, minus a penalty for a piece cut short.
pub fn select_sentences(question: &str, hits: &[EvidenceHit]) -> Vec<(usize, String)> {
    let q = question_terms(question);
    if q.is_empty() {
        return Vec::new();
    }
    let code = about_code(question);
    let kind = answerable::asked_kind(question);
    let focus = answerable::focus_terms(question);
    let mut sentences: Vec<Sentence> = hits.iter().enumerate().flat_map(|(i, h)| sentences_of(i, h, code)).collect();
    for s in &mut sentences {
        s.terms.extend(written_in(&q, &s.text));
    }
    let w = weights(&q, &sentences);
    let total: f64 = w.values().sum();
    let need = ((q.len() as f64 * 0.34).ceil() as usize).clamp(1, 3);
    let best_score = hits.iter().map(|h| h.score).fold(0.0, f64::max);
    // The question's terms each document holds (its passages found, and their headings): a
    // sentence holding the value sits in a document about the rest of the question.
    let mut doc: HashMap<Uuid, HashSet<&String>> = HashMap::new();
    for s in &sentences {
        doc.entry(hits[s.hit].source_id).or_default().extend(s.terms.iter().filter_map(|t| q.get(t)));
    }
    for h in hits {
        if let Some(sec) = &h.section {
            let d = doc.entry(h.source_id).or_default();
            d.extend(analyze::analyze(sec).into_iter().filter_map(|t| q.get(&t.term)));
        }
    }
    // What a passage is about: the question's terms its first sentence (and its heading)
    // name. A later sentence of the passage speaks of it by a pronoun or not at all
    // (其吻部…, 本鱼…, 雌鱼及幼鱼为…), so it carries those terms at [`CARRIED`] weight.
    let mut lead: HashMap<usize, HashSet<&String>> = HashMap::new();
    for s in sentences.iter().filter(|s| s.pos == 0) {
        lead.entry(s.hit).or_default().extend(s.terms.iter().filter_map(|t| q.get(t)));
    }
    for (i, h) in hits.iter().enumerate() {
        if let Some(sec) = &h.section {
            lead.entry(i).or_default().extend(analyze::analyze(sec).into_iter().filter_map(|t| q.get(&t.term)));
        }
    }
    let mut scored = Vec::new();
    for s in sentences {
        let shared: Vec<&String> = s.terms.intersection(&q).collect();
        let carried: Vec<&String> = match lead.get(&s.hit) {
            Some(l) if s.pos > 0 => l.iter().copied().filter(|t| !s.terms.contains(*t)).collect(),
            _ => Vec::new(),
        };
        let value = kind.is_some_and(|k| answerable::holds(k, &s.text));
        let names_focus = value && shared.iter().any(|t| focus.contains(*t));
        let in_doc = doc.get(&hits[s.hit].source_id);
        // A carried term counts toward what the sentence must share only beside one of its own.
        let held = shared.len() + if shared.is_empty() { 0 } else { carried.len() };
        if held < need && !(names_focus && in_doc.is_some_and(|d| d.len() >= need)) {
            continue;
        }
        let own = shared.iter().map(|t| w[*t]).sum::<f64>();
        let coverage = (own + CARRIED * carried.iter().map(|t| w[*t]).sum::<f64>()) / total;
        let around = in_doc.map(|d| d.iter().map(|t| w[*t]).sum::<f64>()).unwrap_or(0.0) / total;
        // What the sentence says beyond the question's words: an answer adds something.
        let new = s.terms.iter().filter(|t| !q.contains(*t)).count() as f64;
        let novelty = (new / 8.0).min(1.0);
        let fits = match (value, names_focus) {
            (_, true) => 0.6,
            (true, false) => 0.1,
            _ => 0.0,
        };
        let rank = if best_score > 0.0 { hits[s.hit].score / best_score } else { 1.0 / (s.hit as f64 + 1.0) };
        // A sentence the search cut short ranks below whole ones of the same worth.
        let cut = if s.whole { 0.0 } else { 0.15 };
        // A passage's first sentences tend to say what it is about (who, what, where).
        let lead = 0.05 / (s.pos as f64 + 1.0);
        let score = 0.8 * coverage + 0.2 * around + 0.1 * novelty + fits + 0.1 * rank + lead - cut;
        scored.push(Scored { hit: s.hit, text: s.text, score });
    }
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.hit.cmp(&b.hit)));
    let best = scored.first().map(|s| s.score).unwrap_or(0.0);
    scored.retain(|s| s.score >= best * MARGIN);
    pick(hits, scored, MAX_SENTENCES)
}

/// When no sentence shares enough of the question's words but the searches returned passages:
/// the best sentence of each of the first few documents' best passages (search order), so an
/// answer never claims nothing was found while evidence was.
pub fn closest_sentences(question: &str, hits: &[EvidenceHit]) -> Vec<(usize, String)> {
    let q = question_terms(question);
    let code = about_code(question);
    let mut candidates = Vec::new();
    let mut docs: Vec<Uuid> = Vec::new();
    for (i, h) in hits.iter().enumerate() {
        if docs.len() >= 3 && !docs.contains(&h.source_id) {
            continue;
        }
        let best = sentences_of(i, h, code)
            .into_iter()
            .map(|mut s| {
                s.terms.extend(written_in(&q, &s.text));
                s
            })
            .enumerate()
            .map(|(j, s)| {
                let overlap = s.terms.intersection(&q).count() as f64;
                (overlap + if s.whole { 0.5 } else { 0.0 } - 0.01 * j as f64, s.text)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((score, text)) = best {
            if !docs.contains(&h.source_id) {
                docs.push(h.source_id);
            }
            candidates.push(Scored { hit: i, text, score: score - i as f64 });
        }
    }
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.hit.cmp(&b.hit)));
    pick(hits, candidates, 3)
}

/// Up to `max` of `candidates` (best first): no sentence twice (nor one inside another), at
/// most [`PER_EVIDENCE`] from one passage; grouped by document, in order of each document's
/// best sentence.
fn pick(hits: &[EvidenceHit], candidates: Vec<Scored>, max: usize) -> Vec<(usize, String)> {
    let mut picked: Vec<Scored> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for c in candidates {
        if picked.len() >= max {
            break;
        }
        let k = key(&c.text);
        if k.is_empty() || keys.iter().any(|x| x.contains(&k) || k.contains(x.as_str())) {
            continue;
        }
        let id = hits[c.hit].evidence_id;
        if picked.iter().filter(|p| hits[p.hit].evidence_id == id).count() >= PER_EVIDENCE {
            continue;
        }
        keys.push(k);
        picked.push(c);
    }
    let mut docs: Vec<Uuid> = Vec::new();
    for c in &picked {
        if !docs.contains(&hits[c.hit].source_id) {
            docs.push(hits[c.hit].source_id);
        }
    }
    let mut out = Vec::new();
    for d in docs {
        for c in picked.iter().filter(|c| hits[c.hit].source_id == d) {
            out.push((c.hit, c.text.clone()));
        }
    }
    out
}

/// Markdown-escape text that goes into the answer (no stray links, headings or emphasis).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '[' | ']' | '\\' | '<' | '>' | '#' | '_' | '`' | '*') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The answer: a lead line saying what follows (quotations that answer, that answer part of
/// it, or the closest passages, not an answer), then the sentences under their document's
/// title, each in quotation marks with its own numbered citation (two quotes never share a
/// number, even from one passage).
pub fn compose(lang: Lang, hits: &[EvidenceHit], picked: &[(usize, String)], a: &Assessment) -> String {
    if picked.is_empty() {
        return lang.nothing_found().to_string();
    }
    let mut out = match a.verdict {
        Verdict::Answered => lang.intro().to_string(),
        Verdict::Partial => lang.partial_intro(a.missing, &a.missing_terms),
        Verdict::NotFound => lang.closest_intro().to_string(),
    };
    let mut current: Option<Uuid> = None;
    for (n, (i, sentence)) in picked.iter().enumerate() {
        let h = &hits[*i];
        if current != Some(h.source_id) {
            out.push_str(&format!("\n\n### {}\n", escape(&h.source_title)));
            current = Some(h.source_id);
        }
        out.push_str(&format!("\n- “{}” {}", escape(sentence), citations::numbered(&h.citation_markdown, n + 1)));
    }
    out.push('\n');
    out
}

/// Whether the search cut `quote` short (it starts or ends with `…`).
pub(super) fn is_cut(quote: &str) -> bool {
    let t = quote.trim();
    t.starts_with('…') || t.ends_with('…')
}

/// The hits (indices) to read whole, at most [`MAX_READS`]: those whose quote the search cut
/// short and that hold a sentence the answer would quote (or, with none, the closest), in
/// answer order, and the best-ranked passage (the sentence that answers may lie outside its
/// quote).
pub fn cut_passages(question: &str, hits: &[EvidenceHit]) -> Vec<usize> {
    let mut picked = select_sentences(question, hits);
    if picked.is_empty() {
        picked = closest_sentences(question, hits);
    }
    let order = picked.into_iter().map(|(i, _)| i).chain((!hits.is_empty()).then_some(0));
    let mut out: Vec<usize> = Vec::new();
    for i in order {
        if out.len() >= MAX_READS {
            break;
        }
        if is_cut(&hits[i].quote) && !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The built-in answer: its text, whether the passages answer (the receipt's claim), and what
/// was measured to decide it.
#[derive(Debug, Clone)]
pub struct BuiltinAnswer {
    pub text: String,
    pub assessment: Assessment,
    pub measures: answerable::Measures,
}

/// The built-in answer to `question` from the searches' `hits`: the sentences that answer it,
/// else (the searches found passages) the closest ones, said as such; "nothing relevant" only
/// when the searches found nothing quotable. Whether they answer is [`answerable::judge`]d.
pub fn answer_from(question: &str, lang: Lang, hits: &[EvidenceHit]) -> BuiltinAnswer {
    let mut picked = select_sentences(question, hits);
    let mut fit = Fit::Answer;
    if picked.is_empty() {
        picked = closest_sentences(question, hits);
        fit = Fit::Closest;
    }
    let (assessment, measures) = answerable::judge(question, hits, &picked, fit);
    BuiltinAnswer { text: compose(lang, hits, &picked, &assessment), assessment, measures }
}
