//! The run's receipt (`mnote.agent_run_receipt.v1`): what the answer cites and whether each
//! citation holds, the run's tool calls, the verdict. One type, written by the executor (built
//! by `agents::verify`), stored as `ai_run.receipt` and read back as itself (`Json<Receipt>`:
//! a receipt that does not parse is an error, never "no citations"), shown by the run page and
//! returned by the API (`RunView.receipt`).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::event::{RunCompleted, Verdict};

/// The receipt's `schema`: this version's name, and nothing else reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ReceiptSchema {
    #[serde(rename = "mnote.agent_run_receipt.v1")]
    V1,
}

/// What one call returned, compactly (for the receipt and `tool.completed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    pub call_id: String,
    pub name: String,
    pub ok: bool,
    pub count: Option<usize>,
    pub evidence_ids: Vec<Uuid>,
}

/// One citation of the answer and whether it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// `quote_found`, `key_terms`, or why not: `evidence_not_found`, `unsupported`,
    /// `malformed` (not a UUID), `check_failed` (the database could not be asked).
    pub reason: String,
}

/// `mnote.agent_run_receipt.v1`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub schema: ReceiptSchema,
    pub tool_calls: Vec<ToolCallRecord>,
    /// Every evidence id the tools returned, first occurrence order.
    pub evidence_ids: Vec<Uuid>,
    pub citations: Vec<CitationCheck>,
    pub total: usize,
    pub verified: usize,
    /// Of `verified`, the citations whose quoted text was found word for word in their passage.
    pub quotes_found: usize,
    /// Whether the evidence answers the question; `null` for a run offered no evidence tools
    /// (a chat without documents is neither).
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// Who judged the verdict: `evidence` (the built-in agent, from its passages), `model`, or
    /// `quotes` (the quote check alone); capped by the quote check in every case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_basis: Option<Basis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_reason: Option<VerdictReason>,
    /// `partial`: the kind of thing the question asks for that no passage states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<AnswerKind>,
    /// Key terms of the question that no quoted passage holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_terms: Vec<String>,
    /// What was checked, in words (English): "2 of 2 quotes found in their passages; …".
    pub checked: String,
}

/// Who judged the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The built-in agent, from the passages it found (then capped by the quote check).
    Evidence,
    /// The language model said whether the evidence answers (then capped by the quote check).
    Model,
    /// The quote check alone (the agent gives no verdict of its own).
    Quotes,
}

/// Why the verdict is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerdictReason {
    /// The quoted passages hold the question's key terms and the kind of thing asked for.
    AnswerInPassages,
    /// The passages are on topic, but none states the kind of thing asked for (`missing`).
    AskedKindMissing,
    /// Only part of the question is covered (`missingTerms` are in no quoted passage).
    PartOfQuestion,
    /// The question's key terms are in none of the passages found.
    KeyTermsMissing,
    /// The searches ranked nothing above the relevance floor.
    BelowRelevanceFloor,
    /// The searches found no passage.
    NoPassages,
    /// The model said the evidence does not answer.
    ModelSaidNotFound,
    /// The model said the evidence answers only part of the question.
    ModelSaidPartial,
    /// Every citation was found in the passage it cites.
    QuotesVerified,
    /// Some citations were not found in the passages they cite.
    SomeQuotesUnverified,
    /// The answer cites evidence, but no citation was found in its passage.
    NoVerifiedQuote,
    /// The answer cites no evidence.
    NoCitation,
}

/// The kind of thing a question asks for, when it is one a sentence visibly holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// An amount or a count (多少, 几, how much, how many).
    Number,
    /// A date or a year (何时, 哪年, when, what year).
    Date,
    /// A person's name (谁, who).
    Person,
}

impl Receipt {
    /// A receipt of nothing: no tool call, no citation, no verdict.
    pub fn empty() -> Receipt {
        Receipt {
            schema: ReceiptSchema::V1,
            tool_calls: Vec::new(),
            evidence_ids: Vec::new(),
            citations: Vec::new(),
            total: 0,
            verified: 0,
            quotes_found: 0,
            verdict: None,
            verdict_basis: None,
            verdict_reason: None,
            missing: None,
            missing_terms: Vec::new(),
            checked: String::new(),
        }
    }
}

impl RunCompleted {
    /// The ending of a run that answered `answer` with `receipt`.
    pub fn of(answer: &str, receipt: &Receipt) -> RunCompleted {
        RunCompleted {
            answer: answer.to_string(),
            citations_total: receipt.total,
            citations_verified: receipt.verified,
            verdict: receipt.verdict,
            reconciled: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_reads_back_as_written_and_another_schema_does_not_read() {
        let mut r = Receipt::empty();
        r.verdict = Some(Verdict::Partial);
        r.missing = Some(AnswerKind::Date);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schema"], "mnote.agent_run_receipt.v1");
        assert_eq!(serde_json::from_value::<Receipt>(v.clone()).unwrap(), r);
        let mut other = v.clone();
        other["schema"] = "mnote.agent_run_receipt.v0".into();
        assert!(serde_json::from_value::<Receipt>(other).is_err());
        let mut broken = v;
        broken["total"] = "two".into();
        assert!(serde_json::from_value::<Receipt>(broken).is_err());
    }
}
