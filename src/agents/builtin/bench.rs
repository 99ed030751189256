//! `mnote bench answers` (docs/BENCHMARKS.md): the built-in agent's answers, without a
//! language model, measured on CMRC 2018's reading-comprehension questions, whose gold answers
//! are spans of their passage. Every passage of the BEIR-style corpus (`scripts/eval/
//! convert_cmrc.py`) is indexed as `mnote eval` does (one Markdown upload each, embedded by
//! the configured embedder); each question goes through the built-in agent's own code path —
//! [`plan_queries`], [`gather`] (the same tool box calls a run makes, here a detached tool box
//! of the KB) and [`answer_from`] — and the answer is scored:
//! * how often its text holds one of the question's gold answers (whitespace removed,
//!   full-width forms folded, citation links and Markdown escapes left out);
//! * how often its first citation is a block of the question's own passage;
//! * its length (characters without the citation links) and the sentences quoted.

use std::{
    collections::HashMap,
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

use super::{Lang, Quiet, answer_from, gather, plan_queries};
use crate::{
    agents::{citations, tools::ToolBox, verify},
    context::{act_as, app_pool},
    journal::ContextRefs,
    search::eval::{self, Doc},
    state::AppState,
};

pub struct BenchArgs<'a> {
    pub tenant: &'a str,
    pub kb: &'a str,
    /// The passages (`corpus.jsonl` of `scripts/eval/convert_cmrc.py`).
    pub corpus: &'a Path,
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
    let mut push = |context: &str, qa: &Value, id: &str, q: &str| {
        let answers = strings(&qa["answers"]);
        if !answers.is_empty() && !q.trim().is_empty() {
            out.push(Question { id: id.to_string(), text: q.to_string(), answers, passage: passage_id(context) });
        }
    };
    if let Some(articles) = v.get("data").and_then(Value::as_array) {
        for p in articles.iter().flat_map(|a| a["paragraphs"].as_array().into_iter().flatten()) {
            let context = p["context"].as_str().unwrap_or_default();
            for qa in p["qas"].as_array().into_iter().flatten() {
                push(context, qa, qa["id"].as_str().unwrap_or_default(), qa["question"].as_str().unwrap_or_default());
            }
        }
    } else if let Some(list) = v.as_array() {
        for p in list {
            let context = p["context_text"].as_str().unwrap_or_default();
            for qa in p["qas"].as_array().into_iter().flatten() {
                push(context, qa, qa["query_id"].as_str().unwrap_or_default(), qa["query_text"].as_str().unwrap_or_default());
            }
        }
    }
    anyhow::ensure!(!out.is_empty(), "no question with answers: expected CMRC 2018 (SQuAD style or the original release)");
    Ok(out)
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
    contains_gold: bool,
    first_citation_in_gold_passage: bool,
    gold_passage_found: bool,
    gold_in_evidence: bool,
    answer: &'a str,
    /// The passages the answer was chosen from (search order; read whole where the agent read
    /// them): for studying the extraction offline.
    evidence: Vec<Evidence<'a>>,
}

#[derive(Serialize)]
struct Evidence<'a> {
    passage: Option<&'a str>,
    quote: &'a str,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    eval::percentile(sorted, p)
}

pub async fn answers_command(a: BenchArgs<'_>) -> anyhow::Result<()> {
    let docs: Vec<Doc> = eval::read_jsonl(a.corpus)?;
    let text = std::fs::read_to_string(a.cmrc).with_context(|| format!("reading {}", a.cmrc.display()))?;
    let mut questions = read_cmrc(&text).with_context(|| a.cmrc.display().to_string())?;
    let known: std::collections::HashSet<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    let total = questions.len();
    questions.retain(|q| known.contains(q.passage.as_str()));
    anyhow::ensure!(!questions.is_empty(), "no question's passage is in {}", a.corpus.display());
    if questions.len() < total {
        eprintln!("note: {} questions whose passage is not in the corpus are left out", total - questions.len());
    }
    if let Some(n) = a.limit {
        questions.truncate(n);
    }

    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, a.tenant, None).await?;
    let kb = eval::kb_or_create(&pool, &actor, a.kb, "built-in answer benchmark").await?;
    eprintln!("{} passages, {} questions with gold answers, KB {:?}", docs.len(), questions.len(), a.kb);
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
    let (mut contains, mut first_in_gold, mut found, mut in_evidence, mut nothing) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut lengths: Vec<f64> = Vec::new();
    let mut quoted: Vec<f64> = Vec::new();
    let mut took: Vec<Duration> = Vec::new();
    for q in &questions {
        let started = Instant::now();
        let queries = plan_queries(&q.text);
        let lang = Lang::of(&q.text);
        let hits = gather(&tools, &q.text, &queries, &cancel, &mut Quiet).await.map_err(|e| anyhow::anyhow!("{}: {e}", q.id))?;
        let answer = answer_from(&q.text, lang, &hits);
        took.push(started.elapsed());
        let cited = verify::citations_of(&answer);
        let source_of = |id: Option<Uuid>| hits.iter().find(|h| Some(h.evidence_id) == id).map(|h| h.source_id);
        let first = cited.first().and_then(|c| source_of(c.evidence_id)).and_then(|s| passage_of.get(&s));
        let ok = holds_gold(&answer, &q.answers);
        let first_ok = first.is_some_and(|p| *p == q.passage);
        let gold_found = hits.iter().any(|h| passage_of.get(&h.source_id).is_some_and(|p| *p == q.passage));
        let evidence: String = hits.iter().map(|h| normalise(&h.quote)).collect::<Vec<_>>().join("\n");
        let gold_in = q.answers.iter().any(|g| evidence.contains(&normalise(g)));
        contains += ok as usize;
        first_in_gold += first_ok as usize;
        found += gold_found as usize;
        in_evidence += gold_in as usize;
        nothing += cited.is_empty() as usize;
        lengths.push(answer_text(&answer).chars().count() as f64);
        quoted.push(cited.len() as f64);
        if let Some(w) = dump.as_mut() {
            let line = Line {
                id: &q.id,
                question: &q.text,
                gold: &q.answers,
                contains_gold: ok,
                first_citation_in_gold_passage: first_ok,
                gold_passage_found: gold_found,
                gold_in_evidence: gold_in,
                answer: &answer,
                evidence: hits
                    .iter()
                    .map(|h| Evidence { passage: passage_of.get(&h.source_id).map(String::as_str), quote: &h.quote })
                    .collect(),
            };
            writeln!(w, "{}", serde_json::to_string(&line)?)?;
        }
        b.inc(1);
        b.set_message(format!("gold {:.1} %", 100.0 * contains as f64 / took.len() as f64));
    }
    b.finish();
    if let Some(mut w) = dump {
        w.flush()?;
    }
    let n = questions.len() as f64;
    let share = |k: usize| 100.0 * k as f64 / n;
    lengths.sort_by(f64::total_cmp);
    let mut ms: Vec<f64> = took.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    println!("questions: {}", questions.len());
    println!("answer contains a gold answer: {contains} ({:.1} %)", share(contains));
    println!("first citation in the gold passage: {first_in_gold} ({:.1} %)", share(first_in_gold));
    println!("gold passage among the agent's hits: {found} ({:.1} %)", share(found));
    println!("gold answer in the evidence the agent read: {in_evidence} ({:.1} %)", share(in_evidence));
    println!("answers without a citation (nothing found): {nothing}");
    println!(
        "answer length (characters, citation links excluded): mean {:.0}, p50 {:.0}, p95 {:.0}, max {:.0}",
        lengths.iter().sum::<f64>() / n,
        pct(&lengths, 50.0),
        pct(&lengths, 95.0),
        lengths.last().copied().unwrap_or(0.0)
    );
    println!("citations per answer: mean {:.2}", quoted.iter().sum::<f64>() / n);
    println!("time per question ms p50/p95: {:.0} / {:.0}", pct(&ms, 50.0), pct(&ms, 95.0));
    Ok(())
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

        let answer = "以下摘自您的文档（原文引用）：\n\n### a.md\n\n- “广茂铁路全长３６４.６ 公里。” \
                      [1 · a.md · L1](/sources/00000000-0000-0000-0000-000000000001/view?evidence=00000000-0000-0000-0000-000000000002&line=1#hl)\n";
        assert!(holds_gold(answer, &["364.6公里".into()]), "full-width digits and spaces are folded");
        assert!(!holds_gold(answer, &["a.md · L1".into()]), "the citation label is not the answer");
        assert!(holds_gold("a\\_b", &["a_b".into()]), "Markdown escapes are not text");
        assert!(!holds_gold(answer, &["1903年".into()]));
    }
}
