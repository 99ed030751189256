//! The `builtin` runtime: offline, no LLM, for a server without a configured model (and as the
//! reference behaviour of a tool-using agent). It
//! 1. plans up to [`MAX_SEARCHES`] searches — the question, then its key phrases (the search
//!    analyzer's terms: jieba for Chinese, stop and question words dropped, adjacent words
//!    joined back into phrases as written) — and publishes the plan;
//! 2. runs each through the tool box (so each is journaled and on the receipt);
//! 3. reads whole (the `read` tool, at most [`MAX_READS`]) the passages whose search quote cut
//!    short a sentence the answer would quote;
//! 4. answers extractively: the quotes' sentences that share enough of the question's terms,
//!    best first (whole sentences before cut pieces, no code lines unless the question is about
//!    code, no heading-only passages), deduplicated, grouped by document under its title, each
//!    followed by a numbered citation (`[1 · notes.md · L3–5](…)`), in the question's language;
//!    when the searches returned passages but no sentence shares enough words, the closest
//!    passages, said as such; "nothing relevant" only when nothing was found (no citations);
//! 5. streams the answer in small pieces and stops promptly when cancelled.
//!
//! Offered no search tool (`chat_only`, or the evidence capability switched off) it plans and
//! calls nothing and answers that without tools it cannot search.

use std::collections::HashSet;

use futures_util::future::BoxFuture;
use serde_json::json;
use uuid::Uuid;

use super::{
    AgentError, AgentRuntime, Provider, RunEnv, RunInput, RunOutput, TurnRole, citations,
    tools::{self, EvidenceHit, ReadOutput, SearchOutput},
};
use crate::{
    journal::{Event, PlanEntry},
    search::analyze,
};

/// Searches per question.
pub const MAX_SEARCHES: usize = 3;
/// Sentences in an answer, and from one passage.
const MAX_SENTENCES: usize = 6;
const PER_EVIDENCE: usize = 2;
/// Characters of the question that are searched (a pasted document is not a query).
const MAX_QUERY_CHARS: usize = 500;
/// Longest sentence quoted (a paragraph without sentence ends is cut).
const MAX_SENTENCE_CHARS: usize = 320;
/// Streamed piece size, in characters.
const PIECE_CHARS: usize = 24;
/// Passages read whole per answer (one `read` call each): those whose quote the search cut short
/// and that hold a sentence of the answer.
const MAX_READS: usize = 3;

/// Words that ask rather than say what is asked about (besides the analyzer's stop words).
const QUESTION_WORDS: &[&str] = &[
    "how",
    "what",
    "why",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "whose",
    "does",
    "do",
    "did",
    "is",
    "are",
    "can",
    "could",
    "should",
    "would",
    "tell",
    "explain",
    "describe",
    "please",
    "say",
    "says",
    "said",
    "mention",
    "mentions",
    "know",
    "give",
    "show",
    "find",
    "list",
    "according",
    "anything",
    "something",
    "如何",
    "怎么",
    "怎样",
    "怎么样",
    "什么",
    "为什么",
    "为何",
    "哪些",
    "哪个",
    "哪里",
    "哪儿",
    "是否",
    "能否",
    "可否",
    "请问",
    "请",
    "告诉",
    "我",
    "我们",
    "你",
    "你们",
    "一下",
    "里",
    "用",
    "关于",
    "有没有",
    "有",
    "吗",
    "呢",
    "介绍",
    "解释",
    "讲讲",
    "说说",
    "多少",
    "几",
    "能",
    "会",
    "要",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    /// Chinese when a good share of the question's letters are CJK.
    pub fn of(question: &str) -> Lang {
        if analyze::query_terms(question).cjk_ratio >= 0.3 { Lang::Zh } else { Lang::En }
    }

    fn search_step(self, q: &str) -> String {
        match self {
            Lang::En => format!("Search the knowledge bases: “{q}”"),
            Lang::Zh => format!("检索知识库：“{q}”"),
        }
    }

    fn answer_step(self) -> &'static str {
        match self {
            Lang::En => "Answer from the evidence, with citations",
            Lang::Zh => "根据证据作答并标注引用",
        }
    }

    fn intro(self) -> &'static str {
        match self {
            Lang::En => "Here is what the knowledge bases say:",
            Lang::Zh => "知识库中的相关内容：",
        }
    }

    pub fn nothing_found(self) -> &'static str {
        match self {
            Lang::En => "I found nothing relevant to this question in the knowledge bases.",
            Lang::Zh => "在知识库中没有找到与这个问题相关的内容。",
        }
    }

    /// The searches returned passages, but no sentence of them shares enough of the question's
    /// words: the closest passages, said as such.
    fn closest_intro(self) -> &'static str {
        match self {
            Lang::En => "No passage answers this question word for word. The closest passages the search found:",
            Lang::Zh => "没有找到逐字回答这个问题的段落。检索到的最接近的段落：",
        }
    }

    /// No search tool offered (the "chat only" agent, or the evidence tools switched off):
    /// the built-in agent has no language model to chat with, so it says what it can do.
    pub fn without_tools(self) -> &'static str {
        match self {
            Lang::En => {
                "This agent runs without tools, and with no language model connected it runs on the built-in agent, \
                 which can only answer by searching your knowledge bases: without tools I cannot search, so I cannot \
                 answer this question. Pick an agent with tools (Hermes) for an answer quoted from your documents, or \
                 ask an admin to connect a language model in the agent settings to chat without tools."
            }
            Lang::Zh => {
                "这个智能体不使用工具；未连接语言模型时它由内置智能体运行，而内置智能体只能通过检索知识库作答：\
                 没有工具就无法检索，所以无法回答这个问题。请选择使用工具的智能体（Hermes）以获得引自文档的回答，\
                 或请管理员在智能体设置中连接语言模型，以便不用工具直接对话。"
            }
        }
    }
}

fn is_question_word(w: &str) -> bool {
    let w = w.to_lowercase();
    QUESTION_WORDS.contains(&w.as_str())
}

/// The question's content terms (as the search analyses them).
pub fn question_terms(question: &str) -> HashSet<String> {
    analyze::analyze(question)
        .into_iter()
        .filter(|t| !is_question_word(&t.term) && !is_question_word(&question[t.start..t.end]))
        .map(|t| t.term)
        .collect()
}

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
    // The outermost content words (jieba's search mode also emits the sub-words of long words).
    let mut words: Vec<(usize, usize)> = analyze::analyze(q)
        .into_iter()
        .filter(|t| !is_question_word(&t.term) && !is_question_word(&q[t.start..t.end]))
        .map(|t| (t.start, t.end))
        .collect();
    words.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut outer: Vec<(usize, usize)> = Vec::new();
    for w in words {
        if outer.last().is_none_or(|l| w.0 >= l.1) {
            outer.push(w);
        }
    }
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

/// A sentence of a quote that may go into the answer.
#[derive(Debug, Clone)]
struct Candidate {
    hit: usize,
    sentence: String,
    score: f64,
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
fn looks_like_code(raw: &str) -> bool {
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

/// The candidate sentences of one hit: `(sentence, terms, whole)`, headings-only and (unless
/// `code`) code pieces left out.
fn sentences_of(h: &EvidenceHit, code: bool) -> Vec<(String, HashSet<String>, bool)> {
    let heading = h.section.as_deref().map(key).unwrap_or_default();
    let pieces = citations::split_sentences(&h.quote);
    let n = pieces.len();
    let mut out = Vec::new();
    for (j, piece) in pieces.into_iter().enumerate() {
        if !code && looks_like_code(piece) {
            continue;
        }
        let sentence = tidy(&citations::clean_sentence(piece));
        // A passage that only repeats its heading (a heading block) says nothing.
        if !citations::has_content(&sentence) || (!heading.is_empty() && key(&sentence) == heading) {
            continue;
        }
        let terms: HashSet<String> = analyze::analyze(&sentence).into_iter().map(|t| t.term).collect();
        let whole = !is_fragment(piece, j == 0, j + 1 == n);
        out.push((sentence, terms, whole));
    }
    out
}

/// The best sentences of `hits` for `question`: `(hit index, sentence)` in answer order —
/// grouped by document (documents in order of their best sentence), best first within one.
pub fn select_sentences(question: &str, hits: &[EvidenceHit]) -> Vec<(usize, String)> {
    let q = question_terms(question);
    if q.is_empty() {
        return Vec::new();
    }
    let code = about_code(question);
    let need = ((q.len() as f64 * 0.34).ceil() as usize).clamp(1, 3);
    let mut candidates = Vec::new();
    for (i, h) in hits.iter().enumerate() {
        for (sentence, terms, whole) in sentences_of(h, code) {
            let overlap = terms.intersection(&q).count();
            if overlap < need {
                continue;
            }
            let coverage = overlap as f64 / q.len() as f64;
            let density = overlap as f64 / terms.len().max(1) as f64;
            let rank = 1.0 / (i as f64 + 1.0);
            // A sentence the search cut short ranks below whole ones of the same worth.
            let cut = if whole { 0.0 } else { 0.15 };
            candidates.push(Candidate { hit: i, sentence, score: coverage + 0.2 * density + 0.05 * rank - cut });
        }
    }
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.hit.cmp(&b.hit)));
    pick(hits, candidates, MAX_SENTENCES)
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
        let best = sentences_of(h, code)
            .into_iter()
            .enumerate()
            .map(|(j, (s, terms, whole))| {
                let overlap = terms.intersection(&q).count() as f64;
                (overlap + if whole { 0.5 } else { 0.0 } - 0.01 * j as f64, s)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((score, sentence)) = best {
            if !docs.contains(&h.source_id) {
                docs.push(h.source_id);
            }
            candidates.push(Candidate { hit: i, sentence, score: score - i as f64 });
        }
    }
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.hit.cmp(&b.hit)));
    pick(hits, candidates, 3)
}

/// Up to `max` of `candidates` (best first): no sentence twice (nor one inside another), at
/// most [`PER_EVIDENCE`] from one passage; grouped by document, in order of each document's
/// best sentence.
fn pick(hits: &[EvidenceHit], candidates: Vec<Candidate>, max: usize) -> Vec<(usize, String)> {
    let mut picked: Vec<Candidate> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for c in candidates {
        if picked.len() >= max {
            break;
        }
        let k = key(&c.sentence);
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
            out.push((c.hit, c.sentence.clone()));
        }
    }
    out
}

/// Markdown-escape text that goes into the answer (no stray links, headings or emphasis).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '[' | ']' | '\\' | '<' | '>' | '#' | '_' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// How the picked sentences relate to the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// They share the question's words ([`select_sentences`]).
    Answer,
    /// The closest the search found ([`closest_sentences`]).
    Closest,
}

/// The answer: sentences under their document's title, each with its numbered citation.
pub fn compose(lang: Lang, hits: &[EvidenceHit], picked: &[(usize, String)], fit: Fit) -> String {
    if picked.is_empty() {
        return lang.nothing_found().to_string();
    }
    let mut out = String::from(match fit {
        Fit::Answer => lang.intro(),
        Fit::Closest => lang.closest_intro(),
    });
    let mut numbers: Vec<Uuid> = Vec::new();
    let mut current: Option<Uuid> = None;
    for (i, sentence) in picked {
        let h = &hits[*i];
        if current != Some(h.source_id) {
            out.push_str(&format!("\n\n### {}\n", escape(&h.source_title)));
            current = Some(h.source_id);
        }
        let n = match numbers.iter().position(|x| *x == h.evidence_id) {
            Some(p) => p + 1,
            None => {
                numbers.push(h.evidence_id);
                numbers.len()
            }
        };
        out.push_str(&format!("\n- {} {}", escape(sentence), citations::numbered(&h.citation_markdown, n)));
    }
    out.push('\n');
    out
}

/// Whether the search cut `quote` short (it starts or ends with `…`).
fn is_cut(quote: &str) -> bool {
    let t = quote.trim();
    t.starts_with('…') || t.ends_with('…')
}

/// The hits (indices) to read whole: those whose quote was cut short and that hold a sentence
/// the answer would quote (or, with none, the closest), at most [`MAX_READS`], in answer order.
pub fn cut_passages(question: &str, hits: &[EvidenceHit]) -> Vec<usize> {
    let mut picked = select_sentences(question, hits);
    if picked.is_empty() {
        picked = closest_sentences(question, hits);
    }
    let mut out: Vec<usize> = Vec::new();
    for (i, _) in picked {
        if is_cut(&hits[i].quote) && !out.contains(&i) && out.len() < MAX_READS {
            out.push(i);
        }
    }
    out
}

/// The built-in answer to `question` from the searches' `hits`: the sentences that answer it,
/// else (the searches found passages) the closest ones, said as such; "nothing relevant" only
/// when the searches found nothing quotable.
pub fn answer_from(question: &str, lang: Lang, hits: &[EvidenceHit]) -> String {
    let picked = select_sentences(question, hits);
    if !picked.is_empty() {
        return compose(lang, hits, &picked, Fit::Answer);
    }
    compose(lang, hits, &closest_sentences(question, hits), Fit::Closest)
}

#[derive(Default)]
pub struct BuiltinRuntime;

impl BuiltinRuntime {
    pub fn new() -> Self {
        BuiltinRuntime
    }
}

async fn publish(env: &RunEnv, entries: &[(String, &'static str)]) -> Result<(), AgentError> {
    let entries = entries.iter().map(|(c, s)| PlanEntry { content: c.clone(), status: s.to_string() }).collect();
    env.events.agent(Event::PlanUpdated { entries }).await?;
    Ok(())
}

/// Stream `answer` in small pieces (stopping when cancelled).
async fn stream(env: &RunEnv, answer: &str) -> Result<(), AgentError> {
    let chars: Vec<char> = answer.chars().collect();
    for piece in chars.chunks(PIECE_CHARS) {
        if env.cancel.is_cancelled() {
            return Err(AgentError::Cancelled);
        }
        env.events.delta(&piece.iter().collect::<String>()).await?;
        tokio::task::yield_now().await;
    }
    Ok(())
}

/// A resumed run continues its parent's partial answer instead of repeating it.
fn continuing(input: &RunInput, answer: String) -> String {
    if let Some(last) = input.transcript.last().filter(|t| t.role == TurnRole::Assistant)
        && !last.text.is_empty()
        && let Some(rest) = answer.strip_prefix(last.text.as_str())
    {
        return rest.to_string();
    }
    answer
}

async fn run(input: &RunInput, env: &RunEnv) -> Result<RunOutput, AgentError> {
    let question = input.prompt.trim();
    let lang = Lang::of(question);
    // No search offered (chat only, or the evidence tools switched off): nothing to plan, no
    // call to fail; the answer says what the built-in agent can and cannot do.
    if !env.tools.offered().iter().any(|d| d.name == tools::SEARCH) {
        let answer = continuing(input, lang.without_tools().to_string());
        stream(env, &answer).await?;
        return Ok(RunOutput { answer, provider_run_id: None });
    }
    // A short follow-up ("and its length?") is searched and answered with the previous question.
    let asked = match input.previous_question() {
        Some(prev) if question.chars().count() <= 32 => format!("{question} {prev}"),
        _ => question.to_string(),
    };
    let question = asked.as_str();
    let queries = plan_queries(question);
    let mut plan: Vec<(String, &'static str)> = queries.iter().map(|q| (lang.search_step(q), "pending")).collect();
    plan.push((lang.answer_step().to_string(), "pending"));

    let mut hits: Vec<EvidenceHit> = Vec::new();
    let mut failures = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        plan[i].1 = "in_progress";
        publish(env, &plan).await?;
        let call_id = format!("builtin-search-{}", i + 1);
        let result = tokio::select! {
            r = env.tools.call(&call_id, tools::SEARCH, json!({"query": q})) => r,
            _ = env.cancel.cancelled() => return Err(AgentError::Cancelled),
        };
        plan[i].1 = "completed";
        match (result.ok, serde_json::from_value::<SearchOutput>(result.content)) {
            (true, Ok(out)) => {
                for h in out.results {
                    if !hits.iter().any(|x| x.evidence_id == h.evidence_id) {
                        hits.push(h);
                    }
                }
            }
            _ => failures.push(result.error.map(|e| format!("{}: {}", e.code, e.message)).unwrap_or_default()),
        }
    }
    if !queries.is_empty() && failures.len() == queries.len() {
        return Err(AgentError::upstream("tool_failed", format!("the searches failed ({})", failures.join("; "))));
    }
    plan.last_mut().expect("the answer step").1 = "in_progress";
    publish(env, &plan).await?;

    // Whole sentences: a passage the search quoted cut short (around the match) is read whole
    // when it holds a sentence of the answer, so the answer quotes the sentence, not a piece.
    if env.tools.offered().iter().any(|d| d.name == tools::READ) {
        for (n, i) in cut_passages(question, &hits).into_iter().enumerate() {
            let call_id = format!("builtin-read-{}", n + 1);
            let args = json!({"evidenceId": hits[i].evidence_id, "window": 0});
            let result = tokio::select! {
                r = env.tools.call(&call_id, tools::READ, args) => r,
                _ = env.cancel.cancelled() => return Err(AgentError::Cancelled),
            };
            if let (true, Ok(out)) = (result.ok, serde_json::from_value::<ReadOutput>(result.content))
                && let Some(b) = out.blocks.iter().find(|b| b.anchor && !b.text.trim().is_empty())
            {
                hits[i].quote = b.text.clone();
            }
        }
    }

    let answer = answer_from(question, lang, &hits);
    let answer = continuing(input, answer);
    stream(env, &answer).await?;
    plan.last_mut().expect("the answer step").1 = "completed";
    publish(env, &plan).await?;
    Ok(RunOutput { answer, provider_run_id: None })
}

impl AgentRuntime for BuiltinRuntime {
    fn provider(&self) -> Provider {
        Provider::Builtin
    }

    fn run<'a>(&'a self, input: &'a RunInput, env: &'a RunEnv) -> BoxFuture<'a, Result<RunOutput, AgentError>> {
        Box::pin(run(input, env))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::verify::{Support, citations_of, support};

    fn hit(n: u128, source: u128, title: &str, quote: &str) -> EvidenceHit {
        EvidenceHit {
            evidence_id: Uuid::from_u128(n),
            quote: quote.into(),
            citation_markdown: format!(
                "[{title} · L{n}](/sources/{}/view?evidence={}&line={n}#hl)",
                Uuid::from_u128(source),
                Uuid::from_u128(n)
            ),
            source_title: title.into(),
            source_id: Uuid::from_u128(source),
            score: 1.0,
            section: None,
            located: Default::default(),
        }
    }

    #[test]
    fn plans_the_question_and_its_key_phrases() {
        let p = plan_queries("How do scoped threads borrow data from the parent stack?");
        assert_eq!(p[0], "How do scoped threads borrow data from the parent stack?");
        assert_eq!(p[1], "scoped threads borrow data");
        assert_eq!(p[2], "parent stack");
        assert!(p.len() <= MAX_SEARCHES);
        // One phrase with every term: searching it again adds nothing.
        assert_eq!(plan_queries("scoped threads"), ["scoped threads"]);
        assert!(plan_queries("   ").is_empty());
        let zh = plan_queries("Rust 里如何用线程作用域借用栈上的数据？");
        assert_eq!(zh[0], "Rust 里如何用线程作用域借用栈上的数据？");
        assert!(zh.len() >= 2 && zh.len() <= MAX_SEARCHES, "{zh:?}");
        assert!(zh[1..].iter().all(|p| !p.contains("如何")), "question words are not searched: {zh:?}");
        assert!(zh.iter().any(|p| p.contains("线程作用域")), "{zh:?}");
    }

    #[test]
    fn the_language_follows_the_question() {
        assert_eq!(Lang::of("线程作用域是什么？"), Lang::Zh);
        assert_eq!(Lang::of("What are scoped threads?"), Lang::En);
        assert_eq!(Lang::of("Rust 的线程作用域怎么用"), Lang::Zh);
    }

    #[test]
    fn answers_cite_the_best_sentences_grouped_by_document() {
        let hits = vec![
            hit(1, 10, "en.md", "Scoped threads let a closure borrow data from the parent stack frame. Gardening is fun."),
            hit(2, 20, "other.md", "Channels send messages between threads."),
            hit(3, 10, "en.md", "…threads can borrow data without an Arc."),
        ];
        let q = "How do scoped threads borrow data?";
        let picked = select_sentences(q, &hits);
        let sentences: Vec<&str> = picked.iter().map(|(_, s)| s.as_str()).collect();
        assert!(sentences.contains(&"Scoped threads let a closure borrow data from the parent stack frame."), "{sentences:?}");
        assert!(!sentences.iter().any(|s| s.contains("Gardening")), "irrelevant sentences are left out");
        let mut heading = hit(4, 10, "en.md", "Scoped threads");
        heading.section = Some("Scoped threads".into());
        assert!(select_sentences(q, &[heading]).is_empty(), "a heading alone is not an answer");
        let answer = compose(Lang::En, &hits, &picked, Fit::Answer);
        assert!(answer.starts_with("Here is what the knowledge bases say:"));
        assert!(answer.contains("\n\n### en.md\n"), "{answer}");
        assert!(answer.contains(&format!(
            "[1 · en.md · L1](/sources/{}/view?evidence={}",
            Uuid::from_u128(10),
            Uuid::from_u128(1)
        )));
        assert_eq!(answer.matches("### en.md").count(), 1, "one heading per document: {answer}");
        // Every citation of the answer is attached to the sentence it quotes.
        for c in citations_of(&answer) {
            let h = hits.iter().find(|h| Some(h.evidence_id) == c.evidence_id).unwrap();
            assert_ne!(support(&c.sentence, &h.quote, &[]), Support::Unsupported, "{c:?}");
        }
    }

    #[test]
    fn chinese_answers_and_nothing_found() {
        let hits = vec![hit(1, 10, "zh.md", "在 Rust 中，使用线程作用域可以借用栈上的数据。另一段话讲的是通道。")];
        let picked = select_sentences("线程作用域怎么借用数据？", &hits);
        assert_eq!(picked.len(), 1, "{picked:?}");
        assert_eq!(picked[0].1, "在 Rust 中，使用线程作用域可以借用栈上的数据。");
        let answer = compose(Lang::Zh, &hits, &picked, Fit::Answer);
        assert!(answer.starts_with("知识库中的相关内容："), "{answer}");
        assert!(answer.contains("[1 · zh.md · L1]("));
        assert!(select_sentences("番茄怎么种？", &hits).is_empty());
        assert_eq!(compose(Lang::Zh, &hits, &[], Fit::Answer), "在知识库中没有找到与这个问题相关的内容。");
        assert!(citations_of(&compose(Lang::En, &hits, &[], Fit::Answer)).is_empty());
    }

    #[test]
    fn quoted_markup_is_escaped_and_not_a_citation() {
        let hits = vec![hit(
            1,
            10,
            "a_b.md",
            "See [the guide](/sources/x/view?evidence=00000000-0000-0000-0000-000000000009) for borrowing rules.",
        )];
        let picked = select_sentences("borrowing rules", &hits);
        let answer = compose(Lang::En, &hits, &picked, Fit::Answer);
        let cited = citations_of(&answer);
        assert_eq!(cited.len(), 1, "{answer}");
        assert_eq!(cited[0].evidence_id, Some(Uuid::from_u128(1)));
        assert!(answer.contains("### a\\_b.md"));
    }

    #[test]
    fn passages_found_are_never_nothing_relevant() {
        // The searches returned passages that share too few of the question's words for a
        // sentence to be picked (a semantic match): the closest ones are quoted, said as such.
        let hits = vec![
            hit(
                1,
                10,
                "oncall.md",
                "The pager moves to the next engineer every Monday at 10:00. Handovers happen in the ops channel.",
            ),
            hit(2, 20, "team.md", "Each week one engineer carries the pager."),
            hit(3, 10, "oncall.md", "The pager moves to the next engineer every Monday at 10:00."),
        ];
        let q = "What is the on-call rotation?";
        assert!(select_sentences(q, &hits).is_empty(), "no sentence shares the question's words");
        for (lang, intro) in [(Lang::En, "No passage answers"), (Lang::Zh, "没有找到逐字回答")] {
            let answer = answer_from(q, lang, &hits);
            assert!(answer.starts_with(intro), "{answer}");
            assert!(!answer.contains(lang.nothing_found()), "{answer}");
            let cited = citations_of(&answer);
            assert!(cited.len() >= 2, "{answer}");
            for c in &cited {
                let h = hits.iter().find(|h| Some(h.evidence_id) == c.evidence_id).unwrap();
                assert_ne!(support(&c.sentence, &h.quote, &[]), Support::Unsupported, "{c:?}");
            }
            assert_eq!(answer.matches("The pager moves").count(), 1, "no sentence twice: {answer}");
        }
        // Nothing quotable at all: then, and only then, nothing relevant.
        assert_eq!(answer_from(q, Lang::En, &[]), Lang::En.nothing_found());
    }

    #[test]
    fn code_lines_and_cut_pieces_give_way_to_whole_sentences() {
        let hits = vec![
            hit(1, 10, "threads.md", "```rust\nlet handle = thread::scope(|s| { s.spawn(|| data.len()); });\n```"),
            hit(2, 10, "threads.md", "…from the stack of the calling function, because scoped threads borrow data"),
            hit(3, 20, "book.md", "Scoped threads can borrow data from the stack of the calling function."),
        ];
        let q = "How do scoped threads borrow data from the stack?";
        let picked = select_sentences(q, &hits);
        let sentences: Vec<&str> = picked.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(
            sentences.first(),
            Some(&"Scoped threads can borrow data from the stack of the calling function."),
            "{sentences:?}"
        );
        assert!(!sentences.iter().any(|s| s.contains("let handle") || s.contains("```")), "no code: {sentences:?}");
        // A question about code may quote it.
        let code = select_sentences("Show the code for thread::scope with data.len", &hits);
        assert!(code.iter().any(|(i, _)| *i == 0), "{code:?}");
        assert!(looks_like_code("fn main() {"));
        assert!(looks_like_code("let x = vec![1, 2, 3];"));
        assert!(!looks_like_code("Scoped threads (since Rust 1.63) borrow data."));
        assert!(!looks_like_code("线程作用域可以借用栈上的数据。"));
    }

    #[test]
    fn passages_cut_short_are_read_whole_before_quoting() {
        let hits = vec![
            hit(1, 10, "a.md", "…from the stack of the calling function, because scoped threads borrow data…"),
            hit(2, 20, "b.md", "Scoped threads borrow data from the stack."),
            hit(3, 30, "c.md", "…gardening tomatoes…"),
        ];
        let q = "How do scoped threads borrow data from the stack?";
        assert_eq!(cut_passages(q, &hits), vec![0], "the cut passage that answers, not the whole one nor the irrelevant one");
        assert!(cut_passages("tomatoes gardening", &hits).contains(&2));
        assert!(is_cut("…x") && is_cut("x…") && !is_cut("x"));
    }
}
