//! The `builtin` runtime: offline, no LLM, for a server without a configured model (and as the
//! reference behaviour of a tool-using agent). It
//! 0. searches a follow-up on its own on a new topic, with the previous question when it
//!    depends on it (`followup`: a pronoun referring back, a continuation cue, one content
//!    word), and says which as the plan's first step;
//! 1. plans up to [`MAX_SEARCHES`] searches — the question, then its key phrases (the search
//!    analyzer's terms: jieba for Chinese, stop and question words dropped, adjacent words
//!    joined back into phrases as written) — and publishes the plan;
//! 2. runs each through the tool box (so each is journaled and on the receipt);
//! 3. reads whole (the `read` tool, at most [`MAX_READS`]) the passages whose search quote cut
//!    short a sentence the answer would quote, and the best-ranked one;
//! 4. for knowledge bases of the run bound to a LightRAG server (the knowledge-RAG capability
//!    on), asks LightRAG (`rag`, mode chosen automatically) and streams its answer first, its
//!    references cited at our evidence and added to the passages the answer may quote;
//! 5. answers extractively (`extract`): the whole sentences that answer the question, scored
//!    by the question's weighted terms, the kind of value asked for next to the question's
//!    focus, the search's own scores and what an answer adds (no code lines unless the
//!    question is about code, no heading-only passages, no duplicates), grouped by document
//!    under its title, each in quotation marks with its own numbered citation
//!    (`[1 · notes.md · L3–5](…)`), after a lead line saying what they are, in the question's
//!    language; whether they answer is judged from the evidence (`answerable`: the receipt's
//!    verdict `answered`, `partial` saying what is missing, or `not_found` with the closest
//!    passages, said to be no answer); "nothing relevant" only when nothing was found (no
//!    citations);
//! 6. streams the answer in small pieces and stops promptly when cancelled.
//!
//! Offered no search tool (`chat_only`, or the evidence capability switched off) it plans and
//! calls nothing and answers that without tools it cannot search.
//!
//! `bench` measures the answers on CMRC 2018 (`mnote bench answers`, docs/BENCHMARKS.md).

mod answerable;
pub mod bench;
mod extract;
pub mod followup;
mod lang;
mod rag;
mod terms;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use self::{
    answerable::{Fit, Measures, asked_kind, focus_terms, judge},
    extract::{
        BuiltinAnswer, MAX_READS, MAX_SEARCHES, answer_from, closest_sentences, compose, cut_passages, plan_queries,
        select_sentences,
    },
    lang::Lang,
    terms::question_terms,
};
use super::{
    AgentError, AgentRuntime, Provider, RunEnv, RunInput, RunOutput, TurnRole,
    tools::{EvidenceHit, Read, ReadArgs, Search, SearchArgs, ToolBox},
    verdict::Claim,
};
use crate::journal::{Event, PlanEntry};

/// Streamed piece size, in characters.
const PIECE_CHARS: usize = 24;

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

/// Told when search `i` of the plan starts (`in_progress`) and ends (`completed`): a run
/// publishes its plan, the benchmark does nothing.
pub trait Steps: Send {
    fn step(&mut self, i: usize, status: &'static str) -> BoxFuture<'_, Result<(), AgentError>>;
}

/// No one to tell.
pub struct Quiet;

impl Steps for Quiet {
    fn step(&mut self, _: usize, _: &'static str) -> BoxFuture<'_, Result<(), AgentError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A run's plan, published at every step.
struct Plan<'a> {
    env: &'a RunEnv,
    entries: Vec<(String, &'static str)>,
    /// The entry of search 0 (a follow-up's first entry says how it was searched).
    first_search: usize,
}

impl Steps for Plan<'_> {
    fn step(&mut self, i: usize, status: &'static str) -> BoxFuture<'_, Result<(), AgentError>> {
        self.entries[self.first_search + i].1 = status;
        // Published when a search starts; its end shows with the next step.
        let publish_now = status == "in_progress";
        Box::pin(async move { if publish_now { publish(self.env, &self.entries).await } else { Ok(()) } })
    }
}

/// The evidence for `question`: each of `queries` searched through `tools` (their hits
/// merged, each passage once), then the passages [`cut_passages`] names read whole so the
/// answer quotes whole sentences. Fails only when every search failed.
pub async fn gather(
    tools: &ToolBox,
    question: &str,
    queries: &[String],
    cancel: &CancellationToken,
    steps: &mut dyn Steps,
) -> Result<Vec<EvidenceHit>, AgentError> {
    let mut hits: Vec<EvidenceHit> = Vec::new();
    let mut failures = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        steps.step(i, "in_progress").await?;
        let call_id = format!("builtin-search-{}", i + 1);
        let result = tokio::select! {
            r = tools.invoke::<Search>(&call_id, SearchArgs::query(q)) => r,
            _ = cancel.cancelled() => return Err(AgentError::Cancelled),
        };
        steps.step(i, "completed").await?;
        match result {
            Ok(out) => {
                for h in out.results {
                    if !hits.iter().any(|x| x.evidence_id == h.evidence_id) {
                        hits.push(h);
                    }
                }
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    if !queries.is_empty() && failures.len() == queries.len() {
        return Err(AgentError::upstream("tool_failed", format!("the searches failed ({})", failures.join("; "))));
    }
    // Whole sentences: a passage the search quoted cut short (around the match) is read whole
    // when it holds a sentence of the answer, so the answer quotes the sentence, not a piece.
    if tools.offers::<Read>() {
        for (n, i) in cut_passages(question, &hits).into_iter().enumerate() {
            let call_id = format!("builtin-read-{}", n + 1);
            let args = ReadArgs { evidence_id: hits[i].evidence_id, window: Some(0) };
            let result = tokio::select! {
                r = tools.invoke::<Read>(&call_id, args) => r,
                _ = cancel.cancelled() => return Err(AgentError::Cancelled),
            };
            if let Ok(out) = result
                && let Some(b) = out.blocks.iter().find(|b| b.anchor && !b.text.trim().is_empty())
            {
                hits[i].quote = b.text.clone();
            }
        }
    }
    Ok(hits)
}

async fn run(input: &RunInput, env: &RunEnv) -> Result<RunOutput, AgentError> {
    let question = input.prompt.trim();
    let lang = Lang::of(question);
    // No search offered (chat only, or the evidence tools switched off): nothing to plan, no
    // call to fail; the answer says what the built-in agent can and cannot do.
    if !env.tools.offers::<Search>() {
        let answer = continuing(input, lang.without_tools().to_string());
        stream(env, &answer).await?;
        return Ok(RunOutput { answer, provider_run_id: None, claim: Claim::None });
    }
    // A follow-up that depends on the previous turn ("and its length?", "它的上限呢？") is searched
    // and answered with the previous question; a new topic on its own (`followup`). The plan
    // says which, first, when there was a previous question.
    let previous = input.previous_question();
    let asked = followup::asked(question, previous);
    let question = asked.query.as_str();
    let queries = plan_queries(question);
    let mut plan: Vec<(String, &'static str)> = Vec::new();
    if let Some(prev) = previous {
        plan.push((lang.followup_step(asked.with_previous, prev), "completed"));
    }
    let first_search = plan.len();
    plan.extend(queries.iter().map(|q| (lang.search_step(q), "pending")));
    plan.push((lang.answer_step().to_string(), "pending"));

    let mut steps = Plan { env, entries: plan, first_search };
    let mut hits = gather(&env.tools, question, &queries, &env.cancel, &mut steps).await?;
    let mut plan = steps.entries;
    // LightRAG for the KBs bound to it (`rag`): its answer streamed first, its references
    // passages the extractive answer may quote too.
    let consulted = rag::consult(input, env, &mut plan).await?;
    for h in consulted.hits {
        if !hits.iter().any(|x| x.evidence_id == h.evidence_id) {
            hits.push(h);
        }
    }
    plan.last_mut().expect("the answer step").1 = "in_progress";
    publish(env, &plan).await?;
    // Each citation opens the viewer with the way back to this answer.
    if let Some(run) = env.events.run_id() {
        for h in &mut hits {
            h.citation_markdown = crate::agents::tools::cite::from_answer(&h.citation_markdown, run);
        }
    }

    let BuiltinAnswer { text: extractive, assessment, .. } = answer_from(question, lang, &hits);
    // LightRAG's part is already streamed: the answer goes on after it (a resumed run
    // continues its parent only when there was no LightRAG part, which differs every time).
    let (answer, rest) = if consulted.text.is_empty() {
        let answer = continuing(input, extractive);
        (answer.clone(), answer)
    } else {
        (format!("{}{extractive}", consulted.text), extractive)
    };
    stream(env, &rest).await?;
    plan.last_mut().expect("the answer step").1 = "completed";
    publish(env, &plan).await?;
    Ok(RunOutput { answer, provider_run_id: None, claim: Claim::Judged(assessment) })
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
    use uuid::Uuid;

    use super::{
        extract::{is_cut, looks_like_code},
        *,
    };
    use crate::agents::{
        verdict::{Assessment, Verdict, VerdictReason},
        verify::{Support, citations_of, support},
    };

    #[test]
    fn a_later_sentence_speaks_of_what_its_passage_is_about() {
        let passage = "棕榈蝮属是蝰蛇科蝮亚科下的一个有毒蛇属，主要分布于墨西哥及中美洲。\
                       其吻部呈突出状，拥有相当灵活并占其整体长度15%的长尾巴。\
                       棕榈蝮的颜色主要由偏暗的绿色为基调，斑纹根据品种不同而定。";
        let hits = vec![hit(1, 10, "palm.md", passage), hit(2, 20, "other.md", "赤尾青竹丝是一种蝮亚科竹叶青属毒蛇。")];
        let picked = select_sentences("棕榈蝮身体的哪个部位十分灵活？", &hits);
        assert!(picked[0].1.contains("长尾巴"), "the sentence that answers, though it names the snake only by 其: {picked:?}");
        // A question about the passage itself still quotes its first sentence first.
        let picked = select_sentences("棕榈蝮属是什么？", &hits);
        assert!(picked[0].1.starts_with("棕榈蝮属是蝰蛇科"), "{picked:?}");
    }

    fn answered() -> Assessment {
        Assessment::new(Verdict::Answered, VerdictReason::AnswerInPassages)
    }

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
        let answer = compose(Lang::En, &hits, &picked, &answered());
        assert!(answer.starts_with("From your documents (quoted word for word):"), "{answer}");
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
        let answer = compose(Lang::Zh, &hits, &picked, &answered());
        assert!(answer.starts_with("以下摘自你的文档（原文引用）："), "{answer}");
        assert!(answer.contains("[1 · zh.md · L1]("));
        assert!(select_sentences("番茄怎么种？", &hits).is_empty());
        assert_eq!(compose(Lang::Zh, &hits, &[], &answered()), "在知识库中没有找到与这个问题相关的内容。");
        assert!(citations_of(&compose(Lang::En, &hits, &[], &answered())).is_empty());
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
        let answer = compose(Lang::En, &hits, &picked, &answered());
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
        for (lang, intro) in
            [(Lang::En, "Nothing in these knowledge bases answers this."), (Lang::Zh, "这些知识库里没有能回答这个问题的内容。")]
        {
            let a = answer_from(q, lang, &hits);
            assert_eq!(a.assessment.verdict, Verdict::NotFound, "closest passages are no answer");
            let answer = a.text;
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
        assert_eq!(answer_from(q, Lang::En, &[]).text, Lang::En.nothing_found());
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

    #[test]
    fn the_sentence_that_answers_comes_first_and_quotations_are_marked() {
        // A CMRC-like passage: the question's terms are spread over several sentences; the one
        // that holds them and the kind of thing asked for (a number) is quoted first.
        let passage = "广茂铁路是中国广东省一条起自广州市广州西站的铁路，全长364.6公里，由三茂铁路股份有限公司管理运营。\
                       广茂铁路在广州由广茂联络线连接广州西站及广州站。广三铁路于1903年筑成，全长49公里。";
        let hits = vec![
            hit(1, 10, "guangmao.md", passage),
            hit(2, 20, "other.md", "京广铁路是中国的一条铁路干线。"),
            hit(3, 10, "guangmao.md", passage),
        ];
        let picked = select_sentences("广茂铁路全长多少公里？", &hits);
        assert_eq!(
            picked[0].1,
            "广茂铁路是中国广东省一条起自广州市广州西站的铁路，全长364.6公里，由三茂铁路股份有限公司管理运营。"
        );
        assert!(!picked.iter().any(|(_, s)| s.contains("京广")), "{picked:?}");
        let texts: Vec<&str> = picked.iter().map(|(_, s)| s.as_str()).collect();
        let mut unique = texts.clone();
        unique.dedup();
        assert_eq!(texts.len(), unique.len(), "a passage found twice is quoted once: {texts:?}");
        let picked = select_sentences("广三铁路在哪年建成？", &hits);
        assert_eq!(picked[0].1, "广三铁路于1903年筑成，全长49公里。", "a year for a when-question: {picked:?}");

        let answer = answer_from("广茂铁路全长多少公里？", Lang::Zh, &hits);
        assert_eq!(answer.assessment.verdict, Verdict::Answered, "{answer:?}");
        let answer = answer.text;
        assert!(answer.starts_with("以下摘自你的文档（原文引用）："), "{answer}");
        assert!(answer.contains("\n- “广茂铁路是中国广东省"), "each quotation in quotation marks: {answer}");
        assert!(answer.contains("管理运营。” [1 · guangmao.md · L1]("), "{answer}");
        for c in citations_of(&answer) {
            let h = hits.iter().find(|h| Some(h.evidence_id) == c.evidence_id).unwrap();
            assert_eq!(support(&c.sentence, &h.quote, &[]), Support::QuoteFound, "{c:?}");
        }
        let en =
            answer_from("How do scoped threads borrow data?", Lang::En, &[hit(1, 10, "a.md", "Scoped threads borrow data.")])
                .text;
        assert!(
            en.starts_with("From your documents (quoted word for word):\n\n### a.md\n\n- “Scoped threads borrow data.” [1 · "),
            "{en}"
        );
    }

    #[test]
    fn the_sentence_holding_the_amount_asked_for_is_quoted_first_each_quote_with_its_own_number() {
        // Issue 41: 预算金额是多少 quoted the title and «35万元/年», not the budget line.
        let doc = "公告.docx";
        let hits = vec![
            hit(1, 10, doc, "某县农贸市场经营管理权项目招标公告"),
            hit(2, 10, doc, "农贸市场经营管理权项目经营期限三年，承包费不低于35万元/年。中标人负责农贸市场的日常经营管理。"),
            hit(3, 10, doc, "预算金额（元）：700000"),
        ];
        let q = "农贸市场经营管理权项目的预算金额是多少？";
        let picked = select_sentences(q, &hits);
        assert_eq!(picked[0].1, "预算金额（元）：700000", "{picked:?}");
        let a = answer_from(q, Lang::Zh, &hits);
        assert_eq!(a.assessment.verdict, Verdict::Answered, "{a:?}");
        // Two sentences of one passage: each quote gets its own chip number.
        let two =
            vec![hit(1, 10, "a.md", "Scoped threads borrow data from the stack. Scoped threads end before the scope returns.")];
        let picked = select_sentences("What do scoped threads do with the stack and the scope?", &two);
        assert_eq!(picked.len(), 2, "{picked:?}");
        let text = compose(Lang::En, &two, &picked, &answered());
        assert!(text.contains("[1 · a.md · L1](") && text.contains("[2 · a.md · L1]("), "{text}");
    }

    #[test]
    fn weak_sentences_give_way_to_the_best_and_english_still_answers() {
        // SciFact-like English passages: the sentence that holds the rare terms wins; one that
        // only shares a common word is left out.
        let hits = vec![
            hit(
                1,
                10,
                "vitamin.md",
                "Vitamin D deficiency is common in older adults. In this cohort, vitamin D supplementation reduced the \
                 risk of hip fracture by 30 percent over five years. Participants were recruited from clinics.",
            ),
            hit(2, 20, "clinics.md", "The clinics recruited adults from three cities in the study."),
        ];
        let picked = select_sentences("Does vitamin D supplementation reduce hip fracture risk?", &hits);
        assert_eq!(
            picked[0].1,
            "In this cohort, vitamin D supplementation reduced the risk of hip fracture by 30 percent over five years."
        );
        assert!(!picked.iter().any(|(_, s)| s.contains("three cities")), "{picked:?}");
    }
}
