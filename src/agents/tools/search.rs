//! `mnote.evidence.search`: passages about a question or key words, in the context's KBs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    env::{Located, ToolEnv, plural},
    failure::ToolError,
    tool::{Capability, Cited, Line, Tool, found, markdown},
};
use crate::{
    evidence::tools::{Mode, SearchRequest, uuid_schema},
    search::query,
};

/// Passages a search returns unless asked otherwise, and at most.
const DEFAULT_TOP_K: usize = 8;
const MAX_TOP_K: usize = 20;
const MAX_QUERY_CHARS: usize = 4000;

/// `mnote.evidence.search` arguments.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for: a question or key words, in any language (Chinese text is segmented).
    pub query: String,
    /// `hybrid` (default: words and meaning), `lexical` (exact words), `vector` (meaning) or
    /// `graph` (also passages linked to the matches).
    #[serde(default)]
    pub mode: Option<Mode>,
    /// How many passages to return (1–20, default 8).
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub top_k: Option<usize>,
}

impl SearchArgs {
    /// `query` with the default mode and count.
    pub fn query(query: &str) -> SearchArgs {
        SearchArgs { query: query.to_string(), mode: None, top_k: None }
    }
}

/// A search result as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceHit {
    /// The passage's id (for `read` and `open`).
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    /// The passage's text as indexed (shortened around the match).
    pub quote: String,
    /// `[document · place](url)`: cite the passage with exactly this link.
    pub citation_markdown: String,
    pub source_title: String,
    #[schemars(schema_with = "uuid_schema")]
    pub source_id: Uuid,
    pub score: f64,
    /// The heading the passage sits under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    #[serde(flatten)]
    pub located: Located,
}

/// `mnote.evidence.search` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchOutput {
    pub results: Vec<EvidenceHit>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
}

pub struct Search;

impl Tool for Search {
    const NAME: &'static str = "mnote.evidence.search";
    const CAPABILITY: Capability = Capability::Evidence;
    const DESCRIPTION: &'static str = "Search the knowledge bases of this conversation for passages (evidence) about a \
                                       question or key words, in Chinese or English. Each result has an evidenceId, a \
                                       quote, the document title and a citationMarkdown link. Cite a passage by writing \
                                       [evidence:<evidenceId>] right after the sentence it supports.";
    const MCP_DESCRIPTION: &'static str = "Search the team's knowledge bases (every one this token's user can read) for \
                                           passages about a question or key words, in Chinese or English. Each result \
                                           has an evidenceId, the quote, the document title, its locator (page and \
                                           bbox, lines or DOCX paragraph), an absolute citationUrl and citationMarkdown.";
    type Args = SearchArgs;
    type Output = SearchOutput;

    /// Search the context's KBs (every KB the actor can read when it names none); hits from
    /// the context's sources rank first.
    async fn call(env: &ToolEnv, args: SearchArgs) -> Result<SearchOutput, ToolError> {
        let q = args.query.trim();
        if q.is_empty() || q.chars().count() > MAX_QUERY_CHARS {
            return Err(ToolError::invalid(format!("query: 1 to {MAX_QUERY_CHARS} characters")));
        }
        let top_k = args.top_k.unwrap_or(DEFAULT_TOP_K);
        if !(1..=MAX_TOP_K).contains(&top_k) {
            return Err(ToolError::invalid(format!("topK: 1 to {MAX_TOP_K}")));
        }
        let mut req = SearchRequest::new(q, args.mode.unwrap_or_default());
        let prefer = &env.context.source_ids;
        req.top_k = Some(if prefer.is_empty() { top_k } else { (top_k * 3).min(query::MAX_TOP_K) });
        req.kb_ids = env.scope().kb_ids().map(<[Uuid]>::to_vec);
        let resp = query::search_retrying(|| env.actor.read_tx(&env.state), &env.state.search_engine(), &req)
            .await
            .map_err(|e| ToolError::from(crate::error::AppError::from(e)))?;
        let mut hits = resp.results;
        hits.sort_by_key(|h| !prefer.contains(&h.source_id));
        hits.truncate(top_k);
        let results = hits
            .into_iter()
            .map(|h| {
                let (citation_markdown, located) =
                    env.locate(&h.source_title, &h.source, &h.open_action, h.citation_markdown.clone());
                EvidenceHit {
                    evidence_id: h.evidence_id,
                    quote: h.quote.clone(),
                    citation_markdown,
                    source_title: h.source_title.clone(),
                    source_id: h.source_id,
                    score: (h.score * 10_000.0).round() / 10_000.0,
                    section: h.source.section_path.last().cloned(),
                    located,
                }
            })
            .collect();
        Ok(SearchOutput { degraded: resp.degraded, degraded_reason: resp.degraded_reason, results })
    }

    fn count(out: &SearchOutput) -> usize {
        out.results.len()
    }

    fn cited(out: &SearchOutput) -> Vec<Cited> {
        out.results.iter().map(|r| Cited::new(r.evidence_id, &r.citation_markdown)).collect()
    }

    fn summary(out: &SearchOutput) -> String {
        if out.results.is_empty() {
            return "no results".to_string();
        }
        let mut docs: Vec<Uuid> = out.results.iter().map(|r| r.source_id).collect();
        docs.sort();
        docs.dedup();
        format!("{} in {}", plural(out.results.len(), "result", "results"), plural(docs.len(), "document", "documents"))
    }

    fn text(out: &SearchOutput) -> String {
        let lines: Vec<Line> =
            out.results.iter().map(|r| Line { citation_markdown: &r.citation_markdown, text: Some(&r.quote) }).collect();
        let degraded = out.degraded.then(|| out.degraded_reason.as_deref().unwrap_or("degraded"));
        markdown(Some(found(lines.len())), degraded, &lines)
    }
}
