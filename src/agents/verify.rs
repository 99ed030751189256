//! Citation verification: every citation of a finished answer is checked against the block it
//! names. (Interface first; implementation in progress.)

use serde::Serialize;
use uuid::Uuid;

use super::tools::ToolCallRecord;
use crate::{auth::Auth, state::AppState};

/// One citation of the answer and whether it holds.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CitationCheck {
    /// 1-based, in order of appearance.
    pub n: usize,
    pub evidence_id: Option<Uuid>,
    /// The link text as written.
    pub label: String,
    /// The sentence the citation is attached to.
    pub sentence: String,
    pub verified: bool,
    /// `quote_found`, `key_terms`, or why not: `evidence_not_found`, `not_visible`, `unsupported`, `malformed`.
    pub reason: String,
}

/// `mnote.agent_run_receipt.v1`
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub schema: &'static str,
    pub tool_calls: Vec<ToolCallRecord>,
    /// Every evidence id the tools returned, first occurrence order.
    pub evidence_ids: Vec<Uuid>,
    pub citations: Vec<CitationCheck>,
    pub total: usize,
    pub verified: usize,
}

/// Check `answer`'s citations as `actor` sees the evidence.
pub async fn check(state: &AppState, actor: &Auth, answer: &str, tool_calls: Vec<ToolCallRecord>) -> Receipt {
    let _ = (state, actor, answer);
    let mut evidence_ids: Vec<Uuid> = Vec::new();
    for c in &tool_calls {
        for id in &c.evidence_ids {
            if !evidence_ids.contains(id) {
                evidence_ids.push(*id);
            }
        }
    }
    Receipt { schema: "mnote.agent_run_receipt.v1", tool_calls, evidence_ids, citations: Vec::new(), total: 0, verified: 0 }
}
