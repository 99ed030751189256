//! Citation verification: every citation of a finished answer — a `citationMarkdown` link
//! (`…?evidence=<uuid>…`) or a leftover `[evidence:<uuid>]` marker — is checked against the
//! block it names, as the run's actor sees it:
//! 1. the evidence exists and the actor may read it (RLS, KB visibility, grant not revoked),
//!    else `evidence_not_found`;
//! 2. the sentence it is attached to ([`citations::attach_sentences`]) is supported by the
//!    block: a quoted span of it, or the sentence itself, occurs in the block text
//!    (whitespace, case and width normalised: `quote_found`), or at least
//!    [`KEY_TERM_SHARE`] of its key terms (the search analyzer's: jieba for CJK, stemmed
//!    English) occur in the block or its section path (`key_terms`); else `unsupported`.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::{
    citations::{self, Found},
    tools::ToolCallRecord,
    verdict::{self, Basis, Claim},
};
use crate::{auth::Auth, evidence::KbScope, search::analyze, state::AppState};

pub use crate::journal::receipt::{CitationCheck, Receipt, ReceiptSchema};

/// Share of a sentence's key terms the block must hold for `key_terms`.
pub const KEY_TERM_SHARE: f64 = 0.6;

/// How a sentence relates to the text of the block it cites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    QuoteFound,
    KeyTerms,
    Unsupported,
}

impl Support {
    pub fn reason(self) -> &'static str {
        match self {
            Support::QuoteFound => "quote_found",
            Support::KeyTerms => "key_terms",
            Support::Unsupported => "unsupported",
        }
    }
}

/// A citation of the answer before it is checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Cited {
    pub evidence_id: Option<Uuid>,
    pub label: String,
    pub sentence: String,
}

/// Every citation of `answer` in order (a marker naming several ids gives one per id), with
/// the sentence each is attached to.
pub fn citations_of(answer: &str) -> Vec<Cited> {
    let found = citations::scan(answer);
    let spans: Vec<_> = found.iter().map(Found::span).collect();
    let sentences = citations::attach_sentences(answer, &spans);
    let mut out = Vec::new();
    for (f, sentence) in found.iter().zip(sentences) {
        match f {
            Found::Link { label, id, .. } => {
                out.push(Cited { evidence_id: *id, label: label.to_string(), sentence });
            }
            Found::Marker { span, ids, .. } => {
                for id in ids {
                    out.push(Cited { evidence_id: *id, label: answer[span.clone()].to_string(), sentence: sentence.clone() });
                }
            }
        }
    }
    out
}

/// Full-width forms folded, lower case, Markdown emphasis/escapes dropped, whitespace runs as
/// one space, ellipses and surrounding punctuation trimmed.
pub fn normalise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = match c as u32 {
            0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            0x3000 => ' ',
            _ => c,
        };
        match c {
            '\\' | '*' | '`' => {}
            '…' => out.push(' '),
            c if c.is_whitespace() => out.push(' '),
            c => out.extend(c.to_lowercase()),
        }
    }
    let collapsed = out.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed.trim_matches(|c: char| !c.is_alphanumeric() && !is_cjk(c)).to_string()
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xAC00..=0xD7AF | 0x20000..=0x2FA1F)
}

/// Whether `span` (normalised) is long enough that finding it in a block means something.
fn quotable(span: &str) -> bool {
    let n = span.chars().filter(|c| c.is_alphanumeric()).count();
    let cjk = span.chars().any(is_cjk);
    n >= if cjk { 4 } else { 10 }
}

/// Spans of `sentence` inside quotation marks (“…”, "…", 「…」, 『…』).
pub fn quoted_spans(sentence: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (open, close) in [('“', '”'), ('"', '"'), ('「', '」'), ('『', '』')] {
        let mut rest = sentence;
        while let Some(a) = rest.find(open) {
            let after = &rest[a + open.len_utf8()..];
            let Some(b) = after.find(close) else { break };
            out.push(&after[..b]);
            rest = &after[b + close.len_utf8()..];
        }
    }
    out
}

/// Share of the sentence's distinct key terms found among `block_terms` (`None`: the sentence
/// has no key terms at all).
pub fn key_term_share(sentence: &str, block_terms: &HashSet<String>) -> Option<f64> {
    let terms: HashSet<String> = analyze::analyze(sentence).into_iter().map(|t| t.term).collect();
    if terms.is_empty() {
        return None;
    }
    let hit = terms.iter().filter(|t| block_terms.contains(*t)).count();
    Some(hit as f64 / terms.len() as f64)
}

/// Whether `block` (its text, and the titles of its section path) supports `sentence`.
pub fn support(sentence: &str, block_text: &str, section_path: &[String]) -> Support {
    let block = normalise(block_text);
    let found = |span: &str| {
        let n = normalise(span);
        quotable(&n) && block.contains(&n)
    };
    if quoted_spans(sentence).into_iter().any(found) || found(sentence) {
        return Support::QuoteFound;
    }
    let mut block_terms: HashSet<String> = analyze::analyze(block_text).into_iter().map(|t| t.term).collect();
    for title in section_path {
        block_terms.extend(analyze::analyze(title).into_iter().map(|t| t.term));
    }
    match key_term_share(sentence, &block_terms) {
        Some(share) if share >= KEY_TERM_SHARE => Support::KeyTerms,
        _ => Support::Unsupported,
    }
}

/// What the actor can read of a cited block.
struct Block {
    text: String,
    section_path: Vec<String>,
}

/// The cited blocks `actor` may read (RLS, KB visibility, the source's grant not revoked).
async fn blocks(state: &AppState, actor: &Auth, scope: &KbScope, ids: &[Uuid]) -> sqlx::Result<HashMap<Uuid, Block>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let mut tx = actor.tx(state).await?;
    let rows = sqlx::query!(
        r#"select b.id, b.text, coalesce(sec.path, '{}'::text[]) as "path!"
         from evidence_block b
         join readable_source s on s.tenant_id = b.tenant_id and s.id = b.source_id
         left join evidence_section sec
           on sec.tenant_id = b.tenant_id and sec.source_id = b.source_id and sec.section_key = b.section_key
         where b.tenant_id = $2 and b.id = any($1) and ($3::uuid[] is null or s.kb_id = any($3))"#,
        ids,
        actor.tenant_id,
        scope.kb_ids() as Option<&[Uuid]>,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(|r| (r.id, Block { text: r.text, section_path: r.path })).collect())
}

/// Check `answer`'s citations as `actor` sees the evidence inside the run's `scope` (a block
/// outside it counts as not found, as it does for the run's tools), and decide the verdict
/// from what the agent `claim`ed (`None`: the run had no evidence tools, no verdict).
pub async fn check(
    state: &AppState,
    actor: &Auth,
    scope: &KbScope,
    answer: &str,
    tool_calls: Vec<ToolCallRecord>,
    claim: Option<Claim>,
) -> Receipt {
    let mut evidence_ids: Vec<Uuid> = Vec::new();
    for c in &tool_calls {
        for id in &c.evidence_ids {
            if !evidence_ids.contains(id) {
                evidence_ids.push(*id);
            }
        }
    }
    let cited = citations_of(answer);
    let mut wanted: Vec<Uuid> = cited.iter().filter_map(|c| c.evidence_id).collect();
    wanted.sort();
    wanted.dedup();
    let found = match blocks(state, actor, scope, &wanted).await {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::warn!("citation check: the cited blocks could not be read: {e}");
            None
        }
    };
    let citations: Vec<CitationCheck> = cited
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let reason = match (c.evidence_id, &found) {
                (None, _) => "malformed",
                (Some(_), None) => "check_failed",
                (Some(id), Some(found)) => match found.get(&id) {
                    None => "evidence_not_found",
                    Some(b) => support(&c.sentence, &b.text, &b.section_path).reason(),
                },
            };
            CitationCheck {
                n: i + 1,
                evidence_id: c.evidence_id,
                label: c.label,
                sentence: c.sentence,
                verified: matches!(reason, "quote_found" | "key_terms"),
                reason: reason.to_string(),
            }
        })
        .collect();
    receipt(tool_calls, evidence_ids, citations, claim)
}

/// The receipt of checked `citations`, its verdict decided from `claim`.
pub fn receipt(
    tool_calls: Vec<ToolCallRecord>,
    evidence_ids: Vec<Uuid>,
    citations: Vec<CitationCheck>,
    claim: Option<Claim>,
) -> Receipt {
    let total = citations.len();
    let verified = citations.iter().filter(|c| c.verified).count();
    let quotes_found = citations.iter().filter(|c| c.reason == "quote_found").count();
    let decision = claim.map(|c| verdict::decide(c, total, verified));
    let checked = checked_words(total, verified, quotes_found, decision.as_ref());
    let (basis, a) = match decision {
        Some(d) => (Some(d.basis), Some(d.assessment)),
        None => (None, None),
    };
    Receipt {
        schema: ReceiptSchema::V1,
        tool_calls,
        evidence_ids,
        total,
        verified,
        quotes_found,
        verdict: a.as_ref().map(|a| a.verdict),
        verdict_basis: basis,
        verdict_reason: a.as_ref().map(|a| a.reason),
        missing: a.as_ref().and_then(|a| a.missing),
        missing_terms: a.map(|a| a.missing_terms).unwrap_or_default(),
        checked,
        citations,
    }
}

/// The receipt's `checked`: what the quote check found and who judged the verdict.
fn checked_words(total: usize, verified: usize, quotes_found: usize, d: Option<&verdict::Decision>) -> String {
    let quotes = match total {
        0 => "the answer cites no passage".to_string(),
        _ => {
            let by_terms = verified - quotes_found.min(verified);
            let mut s = format!("{verified} of {total} citations found in their passages");
            if by_terms > 0 {
                s.push_str(&format!(" ({quotes_found} word for word, {by_terms} by their key terms)"));
            }
            s
        }
    };
    let who = match d.map(|d| d.basis) {
        None => return format!("{quotes}; no verdict: the run had no evidence tools"),
        Some(Basis::Evidence) => {
            "the built-in agent judged from its passages whether they hold the question's key terms and what it asks for"
        }
        Some(Basis::Model) => "the model said whether the evidence answers, and its citations were checked",
        Some(Basis::Quotes) => "the agent gives no verdict of its own: the verdict follows the citation check",
    };
    format!("{quotes}; {who}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZH_BLOCK: &str = "在 Rust 中，使用线程作用域可以借用栈上的数据。";
    const EN_BLOCK: &str = "Scoped threads let a closure borrow data from the parent stack frame.";

    #[test]
    fn a_sentence_copied_from_the_block_is_a_found_quote_in_both_languages() {
        assert_eq!(support("Scoped threads let a closure borrow data.", EN_BLOCK, &[]), Support::QuoteFound);
        assert_eq!(
            support("SCOPED  threads let a closure borrow data from the parent stack frame.", EN_BLOCK, &[]),
            Support::QuoteFound
        );
        assert_eq!(support("使用线程作用域可以借用栈上的数据。", ZH_BLOCK, &[]), Support::QuoteFound);
        assert_eq!(support("书上说“使用线程作用域可以借用栈上的数据”", ZH_BLOCK, &[]), Support::QuoteFound);
        assert_eq!(support("The docs say \"a closure borrow data from the parent\" here", EN_BLOCK, &[]), Support::QuoteFound);
        // Full-width letters and an ellipsis from a cut quote.
        assert_eq!(support("…ｓｃｏｐｅｄ threads let a closure borrow", EN_BLOCK, &[]), Support::QuoteFound);
    }

    #[test]
    fn a_paraphrase_holds_by_its_key_terms() {
        assert_eq!(support("Closures in scoped threads may borrow stack data", EN_BLOCK, &[]), Support::KeyTerms);
        assert_eq!(support("线程作用域能借用栈上数据", ZH_BLOCK, &[]), Support::KeyTerms);
        // The heading counts: the search found the block by it too.
        assert_eq!(
            support("Concurrency: scoped threads", "They borrow.", &["Concurrency".into(), "Scoped threads".into()]),
            Support::KeyTerms
        );
    }

    #[test]
    fn an_unrelated_sentence_is_unsupported() {
        assert_eq!(support("Tomatoes grow best in warm summer gardens.", EN_BLOCK, &[]), Support::Unsupported);
        assert_eq!(support("番茄在夏天的花园里长得最好。", ZH_BLOCK, &[]), Support::Unsupported);
        assert_eq!(support("", EN_BLOCK, &[]), Support::Unsupported);
        assert_eq!(support("the", EN_BLOCK, &[]), Support::Unsupported, "no key terms");
        // A short fragment is not a quote.
        assert_eq!(support("a", EN_BLOCK, &[]), Support::Unsupported);
    }

    #[test]
    fn every_citation_of_an_answer_gets_its_sentence() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let answer = format!(
            "### notes.md\n\n- Scoped threads borrow data. [1 · notes.md · L3](/sources/s/view?evidence={a}#hl)\n\
             - 通道传递消息。[evidence:{a}, {b}] Made up [evidence:nope]"
        );
        let c = citations_of(&answer);
        assert_eq!(c.len(), 4);
        assert_eq!(
            c[0],
            Cited { evidence_id: Some(a), label: "1 · notes.md · L3".into(), sentence: "Scoped threads borrow data.".into() }
        );
        assert_eq!((c[1].evidence_id, c[2].evidence_id), (Some(a), Some(b)));
        assert_eq!(c[1].sentence, "通道传递消息。");
        assert_eq!(c[2].label, format!("[evidence:{a}, {b}]"));
        assert_eq!((c[3].evidence_id, c[3].sentence.as_str()), (None, "Made up"));
    }

    #[test]
    fn normalising_folds_case_width_space_and_markup() {
        assert_eq!(normalise("  **Ｈｅｌｌｏ**\n  World…  "), "hello world");
        assert_eq!(normalise("a \\[x\\] b"), "a [x] b");
        assert_eq!(normalise("数据。"), "数据");
    }
}
