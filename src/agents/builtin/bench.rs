//! `mnote bench answers` (docs/BENCHMARKS.md): the built-in agent's answers, without a
//! language model, measured on SQuAD-style reading-comprehension questions (CMRC 2018, XQuAD),
//! whose gold answers are spans of their passage. The passages (the BEIR-style corpus of
//! `scripts/eval/convert_cmrc.py`, or the gold file's own contexts) are indexed as `mnote eval`
//! does (one Markdown upload each, embedded by the configured embedder); each question goes
//! through the built-in agent's own code path — [`plan_queries`], [`gather`] (the same tool box
//! calls a run makes, here a detached tool box of the KB) and [`answer_from`] — and the answer
//! is scored:
//! * how often its text holds one of the question's gold answers (whitespace removed,
//!   full-width forms folded, citation links and Markdown escapes left out);
//! * how often its first citation is a block of the question's own passage;
//! * its verdict (`answered`, `partial`, `not_found`);
//! * its length (characters without the citation links) and the sentences quoted.
//!
//! `--held-out` indexes the passages of half of the articles only (split by article, by the
//! parity of the SHA-256 of its title, so no indexed sibling passage answers a held-out
//! question) and asks every question: an indexed question should be answered with its gold
//! answer, a held-out one `not_found`.

use std::{
    collections::{HashMap, HashSet},
    io::Write,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{Lang, Measures, Quiet, answer_from, gather, plan_queries};
use crate::{
    agents::{
        citations,
        tools::ToolBox,
        verdict::{self, Claim, Verdict, VerdictReason},
        verify,
    },
    context::{act_as, app_pool},
    journal::ContextRefs,
    search::eval::{self, Doc},
    state::AppState,
};

pub struct BenchArgs<'a> {
    pub tenant: &'a str,
    pub kb: &'a str,
    /// The passages (`corpus.jsonl` of `scripts/eval/convert_cmrc.py`); `None`: the contexts
    /// of the gold file.
    pub corpus: Option<&'a Path>,
    /// Index half of the articles only, and ask the questions of both halves.
    pub held_out: bool,
    /// The CMRC 2018 file with the gold answers (SQuAD style or the original release).
    pub cmrc: &'a Path,
    /// Only the first N questions.
    pub limit: Option<usize>,
    /// Write one JSON line per question (question, gold answers, answer, scores) here.
    pub dump: Option<&'a Path>,
    /// `ingest::corpus::load_boxed`, passed in by the CLI.
    pub load: crate::search::eval::LoadCorpus,
}

/// One question with its gold answers and the id of its passage (sha256 of the text, as the
/// converter names documents).
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub id: String,
    pub text: String,
    pub answers: Vec<String>,
    pub passage: String,
    /// The article the passage comes from (its title, else its id).
    pub article: String,
}

fn passage_id(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn strings(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in v.as_array().into_iter().flatten() {
        // SQuAD style: {"text", "answer_start"}; the original release: plain strings (and a
        // few numbers a spreadsheet made of dates, which no passage holds: left out).
        let s = a.get("text").and_then(Value::as_str).or(a.as_str());
        if let Some(s) = s.map(str::trim).filter(|s| !s.is_empty())
            && !out.iter().any(|x| x == s)
        {
            out.push(s.to_string());
        }
    }
    out
}

/// The questions of a CMRC 2018 file in file order: SQuAD style (`{"data": [{"paragraphs":
/// [{"context", "qas": [{"id", "question", "answers": [{"text"}]}]}]}]}`) or the original
/// release (`[{"context_text", "qas": [{"query_id", "query_text", "answers": [..]}]}]`).
pub fn read_cmrc(text: &str) -> anyhow::Result<Vec<Question>> {
    let v: Value = serde_json::from_str(text).context("not JSON")?;
    let mut out = Vec::new();
    let mut push = |article: &str, context: &str, qa: &Value, id: &str, q: &str| {
        let answers = strings(&qa["answers"]);
        if !answers.is_empty() && !q.trim().is_empty() {
            let (passage, article) = (passage_id(context), article.to_string());
            out.push(Question { id: id.to_string(), text: q.to_string(), answers, passage, article });
        }
    };
    let name = |a: &Value, id: &str| {
        let t = a["title"].as_str().unwrap_or_default();
        if t.is_empty() { a[id].as_str().unwrap_or_default().to_string() } else { t.to_string() }
    };
    if let Some(articles) = v.get("data").and_then(Value::as_array) {
        for a in articles {
            let article = name(a, "id");
            for p in a["paragraphs"].as_array().into_iter().flatten() {
                let context = p["context"].as_str().unwrap_or_default();
                for qa in p["qas"].as_array().into_iter().flatten() {
                    let (id, q) = (qa["id"].as_str().unwrap_or_default(), qa["question"].as_str().unwrap_or_default());
                    push(&article, context, qa, id, q);
                }
            }
        }
    } else if let Some(list) = v.as_array() {
        for p in list {
            let article = name(p, "context_id");
            let context = p["context_text"].as_str().unwrap_or_default();
            for qa in p["qas"].as_array().into_iter().flatten() {
                let (id, q) = (qa["query_id"].as_str().unwrap_or_default(), qa["query_text"].as_str().unwrap_or_default());
                push(&article, context, qa, id, q);
            }
        }
    }
    anyhow::ensure!(!out.is_empty(), "no question with answers: expected CMRC 2018 (SQuAD style or the original release)");
    Ok(out)
}

/// The passages of a gold file (either shape), each once, named as the converter names them.
pub(crate) fn read_passages(text: &str) -> anyhow::Result<Vec<Doc>> {
    let v: Value = serde_json::from_str(text).context("not JSON")?;
    let contexts: Vec<&str> = match (v.get("data").and_then(Value::as_array), v.as_array()) {
        (Some(articles), _) => articles
            .iter()
            .flat_map(|a| a["paragraphs"].as_array().into_iter().flatten())
            .filter_map(|p| p["context"].as_str())
            .collect(),
        (None, Some(list)) => list.iter().filter_map(|p| p["context_text"].as_str()).collect(),
        _ => Vec::new(),
    };
    let mut seen = std::collections::HashSet::new();
    Ok(contexts
        .into_iter()
        .filter(|c| seen.insert(passage_id(c)))
        .map(|c| Doc { id: passage_id(c), title: String::new(), text: c.to_string() })
        .collect())
}

/// Whether `article` is in the indexed half of a held-out split (by its SHA-256's parity).
pub fn indexed_half(article: &str) -> bool {
    Sha256::digest(article.as_bytes())[0] % 2 == 0
}

/// Text as compared: no whitespace, full-width forms folded to their ASCII twins, lower case.
pub fn normalise(s: &str) -> String {
    s.chars()
        .map(|c| match c as u32 {
            0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            _ => c,
        })
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// What an answer says: its text without the citation links and the Markdown escapes.
pub fn answer_text(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut last = 0;
    for f in citations::scan(answer) {
        let span = f.span();
        out.push_str(&answer[last..span.start]);
        last = span.end;
    }
    out.push_str(&answer[last..]);
    let mut plain = String::with_capacity(out.len());
    let mut chars = out.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => plain.extend(chars.next()),
            c => plain.push(c),
        }
    }
    plain
}

/// Whether `answer` holds one of `gold`.
pub fn holds_gold(answer: &str, gold: &[String]) -> bool {
    let text = normalise(&answer_text(answer));
    gold.iter().map(|g| normalise(g)).any(|g| !g.is_empty() && text.contains(&g))
}

#[derive(Serialize)]
struct Line<'a> {
    id: &'a str,
    question: &'a str,
    gold: &'a [String],
    /// Its passage was not indexed (`--held-out`).
    held_out: bool,
    contains_gold: bool,
    first_citation_in_gold_passage: bool,
    gold_passage_found: bool,
    gold_in_evidence: bool,
    verdict: Verdict,
    reason: VerdictReason,
    missing_terms: &'a [String],
    measures: &'a Measures,
    answer: &'a str,
    /// The passages the answer was chosen from (search order; read whole where the agent read
    /// them): for studying the extraction offline.
    evidence: Vec<Evidence<'a>>,
}

#[derive(Serialize)]
struct Evidence<'a> {
    passage: Option<&'a str>,
    score: f64,
    quote: &'a str,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    eval::percentile(sorted, p)
}

/// The counts of one group of questions (indexed or held out).
#[derive(Default)]
struct Tally {
    n: usize,
    contains: usize,
    first_in_gold: usize,
    found: usize,
    in_evidence: usize,
    nothing: usize,
    answered: usize,
    partial: usize,
    not_found: usize,
    lengths: Vec<f64>,
    quoted: Vec<f64>,
}

impl Tally {
    fn share(&self, k: usize) -> String {
        format!("{k} / {} = {:.1} %", self.n, 100.0 * k as f64 / self.n.max(1) as f64)
    }

    fn verdicts(&self) -> String {
        format!(
            "answered {}, partial {}, not_found {}",
            self.share(self.answered),
            self.share(self.partial),
            self.share(self.not_found)
        )
    }
}

/// A question to ask, and whether its passage is held out (not indexed).
type Asked = (Question, bool);

/// The questions to ask and the passages to index: every passage of the corpus and the
/// questions whose passage it holds; with `held_out`, the passages of the indexed half of the
/// articles and every question (held out: its article is in the other half). `limit` applies
/// to each group.
fn split(
    docs: Vec<Doc>,
    mut questions: Vec<Question>,
    held_out: bool,
    limit: Option<usize>,
) -> anyhow::Result<(Vec<Doc>, Vec<Asked>)> {
    let known: HashSet<String> = docs.iter().map(|d| d.id.clone()).collect();
    let total = questions.len();
    questions.retain(|q| known.contains(&q.passage));
    if questions.len() < total {
        eprintln!("note: {} questions whose passage is not in the corpus are left out", total - questions.len());
    }
    anyhow::ensure!(!questions.is_empty(), "no question's passage is in the corpus");
    if !held_out {
        let mut qs: Vec<Asked> = questions.into_iter().map(|q| (q, false)).collect();
        if let Some(n) = limit {
            qs.truncate(n);
        }
        return Ok((docs, qs));
    }
    // The articles of the indexed half; a passage is indexed when one of its questions'
    // articles is (a passage belongs to one article).
    let indexed: HashSet<String> = questions.iter().filter(|q| indexed_half(&q.article)).map(|q| q.passage.clone()).collect();
    let held: HashSet<String> = questions.iter().filter(|q| !indexed_half(&q.article)).map(|q| q.passage.clone()).collect();
    let docs: Vec<Doc> = docs.into_iter().filter(|d| indexed.contains(&d.id) && !held.contains(&d.id)).collect();
    let n = limit.unwrap_or(usize::MAX);
    let (mut ins, mut outs): (Vec<Question>, Vec<Question>) = questions.into_iter().partition(|q| indexed_half(&q.article));
    ins.retain(|q| !held.contains(&q.passage));
    ins.truncate(n);
    outs.truncate(n);
    Ok((docs, ins.into_iter().map(|q| (q, false)).chain(outs.into_iter().map(|q| (q, true))).collect()))
}

pub async fn answers_command(a: BenchArgs<'_>) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(a.cmrc).with_context(|| format!("reading {}", a.cmrc.display()))?;
    let docs: Vec<Doc> = match a.corpus {
        Some(c) => eval::read_jsonl(c)?,
        None => read_passages(&text)?,
    };
    let questions = read_cmrc(&text).with_context(|| a.cmrc.display().to_string())?;
    let (docs, questions) = split(docs, questions, a.held_out, a.limit)?;

    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, a.tenant, None).await?;
    let kb = eval::kb_or_create(&pool, &actor, a.kb, "built-in answer benchmark").await?;
    let held = questions.iter().filter(|q| q.1).count();
    eprintln!(
        "{} passages indexed, {} questions with gold answers ({} held out), KB {:?}",
        docs.len(),
        questions.len(),
        held,
        a.kb
    );
    (a.load)(&pool, &cfg, &actor, kb, &eval::as_markdown(&docs)).await?;
    let embedder = crate::state::load_embedder(&pool).await;
    match &embedder {
        Some(e) => {
            let (n, took) = eval::embed_all(&pool, actor.tenant_id, e).await?;
            if n > 0 {
                eprintln!("embedded {n} blocks in {:.1} s", took.as_secs_f64());
            }
        }
        None => eprintln!("note: no embedder available; the agent's hybrid searches run degraded (lexical)"),
    }
    let state = AppState::new(pool.clone(), cfg.clone()).with_embedder(embedder);
    let context = ContextRefs { kb_ids: vec![kb], ..Default::default() };
    let offered = ToolBox::offered_for(&state, &actor, &context).await;
    let base = cfg.public_url.clone().unwrap_or_else(|| format!("http://{}", cfg.bind));
    let tools = ToolBox::detached(state, actor.clone(), base, offered).within(context);

    // Passage (document) id of every source of the KB.
    let mut tx = actor.tx_pool(&pool).await?;
    let paths = sqlx::query!("select id, resource_path from source where tenant_id = $2 and kb_id = $1", kb, actor.tenant_id)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    let passage_of: HashMap<Uuid, String> = paths
        .into_iter()
        .map(|r| (r.id, r.resource_path.trim_start_matches("uploads/").trim_end_matches(".md").to_string()))
        .collect();

    let mut dump = match a.dump {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).with_context(|| p.display().to_string())?)),
        None => None,
    };
    let cancel = CancellationToken::new();
    let b = crate::platform::progress::bar(questions.len() as u64, "answers");
    let (mut indexed, mut heldout) = (Tally::default(), Tally::default());
    let mut took: Vec<Duration> = Vec::new();
    for (q, is_held) in &questions {
        let started = Instant::now();
        let queries = plan_queries(&q.text);
        let lang = Lang::of(&q.text);
        let hits = gather(&tools, &q.text, &queries, &cancel, &mut Quiet).await.map_err(|e| anyhow::anyhow!("{}: {e}", q.id))?;
        let built = answer_from(&q.text, lang, &hits);
        let answer = &built.text;
        took.push(started.elapsed());
        let cited = verify::citations_of(answer);
        let source_of = |id: Option<Uuid>| hits.iter().find(|h| Some(h.evidence_id) == id).map(|h| h.source_id);
        let first = cited.first().and_then(|c| source_of(c.evidence_id)).and_then(|s| passage_of.get(&s));
        let ok = holds_gold(answer, &q.answers);
        let first_ok = first.is_some_and(|p| *p == q.passage);
        let gold_found = hits.iter().any(|h| passage_of.get(&h.source_id).is_some_and(|p| *p == q.passage));
        let evidence: String = hits.iter().map(|h| normalise(&h.quote)).collect::<Vec<_>>().join("\n");
        let gold_in = q.answers.iter().any(|g| evidence.contains(&normalise(g)));
        // The verdict as the run's receipt decides it: the agent's claim, capped by the quote
        // check (the built-in agent's quotes are the passages' own text).
        let verdict = verdict::decide(Claim::Judged(built.assessment.clone()), cited.len(), cited.len()).assessment;
        let t = if *is_held { &mut heldout } else { &mut indexed };
        t.n += 1;
        t.contains += ok as usize;
        t.first_in_gold += first_ok as usize;
        t.found += gold_found as usize;
        t.in_evidence += gold_in as usize;
        t.nothing += cited.is_empty() as usize;
        match verdict.verdict {
            Verdict::Answered => t.answered += 1,
            Verdict::Partial => t.partial += 1,
            Verdict::NotFound => t.not_found += 1,
        }
        t.lengths.push(answer_text(answer).chars().count() as f64);
        t.quoted.push(cited.len() as f64);
        if let Some(w) = dump.as_mut() {
            let line = Line {
                id: &q.id,
                question: &q.text,
                gold: &q.answers,
                held_out: *is_held,
                contains_gold: ok,
                first_citation_in_gold_passage: first_ok,
                gold_passage_found: gold_found,
                gold_in_evidence: gold_in,
                verdict: verdict.verdict,
                reason: verdict.reason,
                missing_terms: &built.assessment.missing_terms,
                measures: &built.measures,
                answer,
                evidence: hits
                    .iter()
                    .map(|h| Evidence {
                        passage: passage_of.get(&h.source_id).map(String::as_str),
                        score: h.score,
                        quote: &h.quote,
                    })
                    .collect(),
            };
            writeln!(w, "{}", serde_json::to_string(&line)?)?;
        }
        b.inc(1);
        b.set_message(format!("gold {:.1} %", 100.0 * indexed.contains as f64 / indexed.n.max(1) as f64));
    }
    b.finish();
    if let Some(mut w) = dump {
        w.flush()?;
    }
    report(&mut indexed, &heldout, a.held_out);
    let mut ms: Vec<f64> = took.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    println!("time per question ms p50/p95: {:.0} / {:.0}", pct(&ms, 50.0), pct(&ms, 95.0));
    Ok(())
}

fn report(t: &mut Tally, held: &Tally, held_out: bool) {
    let n = t.n as f64;
    t.lengths.sort_by(f64::total_cmp);
    println!("questions{}: {}", if held_out { " whose passage is indexed" } else { "" }, t.n);
    println!("answer contains a gold answer: {}", t.share(t.contains));
    println!("first citation in the gold passage: {}", t.share(t.first_in_gold));
    println!("gold passage among the agent's hits: {}", t.share(t.found));
    println!("gold answer in the evidence the agent read: {}", t.share(t.in_evidence));
    println!("answers without a citation (nothing found): {}", t.nothing);
    println!("verdicts: {}", t.verdicts());
    println!(
        "answer length (characters, citation links excluded): mean {:.0}, p50 {:.0}, p95 {:.0}, max {:.0}",
        t.lengths.iter().sum::<f64>() / n,
        pct(&t.lengths, 50.0),
        pct(&t.lengths, 95.0),
        t.lengths.last().copied().unwrap_or(0.0)
    );
    println!("citations per answer: mean {:.2}", t.quoted.iter().sum::<f64>() / n);
    if held_out {
        println!("held-out questions (passage not indexed): {}", held.n);
        println!("held-out verdicts: {}", held.verdicts());
        println!("held-out answers that still contain a gold answer: {}", held.share(held.contains));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_cmrc_shapes_and_scores_answers() {
        let original = r#"[{"context_id":"DEV_0","context_text":"广茂铁路全长364.6公里。","title":"t",
            "qas":[{"query_text":"广茂铁路全长多少公里？","query_id":"DEV_0_QUERY_0","answers":["364.6公里","364.6公里",39764.0]}]}]"#;
        let squad = r#"{"version":"v1.0","data":[{"title":"t","id":"DEV_0","paragraphs":[{"id":"DEV_0",
            "context":"广茂铁路全长364.6公里。","qas":[{"question":"广茂铁路全长多少公里？","id":"DEV_0_QUERY_0",
            "answers":[{"text":"364.6公里","answer_start":6}]}]}]}]}"#;
        let a = read_cmrc(original).unwrap();
        let b = read_cmrc(squad).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0].answers, ["364.6公里"], "duplicates and non-strings left out");
        assert_eq!(a[0].passage, passage_id("广茂铁路全长364.6公里。"));
        assert!(read_cmrc("[]").is_err());

        let answer = "以下摘自你的文档（原文引用）：\n\n### a.md\n\n- “广茂铁路全长３６４.６ 公里。” \
                      [1 · a.md · L1](/sources/00000000-0000-0000-0000-000000000001/view?evidence=00000000-0000-0000-0000-000000000002&line=1#hl)\n";
        assert!(holds_gold(answer, &["364.6公里".into()]), "full-width digits and spaces are folded");
        assert!(!holds_gold(answer, &["a.md · L1".into()]), "the citation label is not the answer");
        assert!(holds_gold("a\\_b", &["a_b".into()]), "Markdown escapes are not text");
        assert!(!holds_gold(answer, &["1903年".into()]));
    }
}
