//! The journal's types: a run's status, its events (stored as `kind` + `payload`), where an
//! event comes from, and the context a run was asked in.

use serde::{Deserialize, Serialize};
use serde_json::Value; // JSON edge: jsonb payloads and a model's tool arguments
use uuid::Uuid;

use crate::ai::{AgentId, Provider};

/// `status` of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Pending,
    Running,
    Interrupted,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "pending" => RunStatus::Pending,
            "running" => RunStatus::Running,
            "interrupted" => RunStatus::Interrupted,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }

    /// Completed, failed or cancelled: nothing more happens to the run.
    pub fn is_terminal(self) -> bool {
        matches!(self, RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled)
    }

    /// Pending or running: a worker holds (or is about to take) its lease.
    pub fn is_live(self) -> bool {
        matches!(self, RunStatus::Pending | RunStatus::Running)
    }
}

impl std::str::FromStr for RunStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RunStatus::parse(s).ok_or_else(|| format!("unknown run status {s:?}"))
    }
}

// `ai_run.status` is a text column read and bound as this enum.
crate::db::text_column!(RunStatus);

/// Who wrote an event: the host (`mnote`), one of our tools (`tool`), or the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSource {
    Mnote,
    Tool,
    Agent(AgentId),
}

impl EventSource {
    pub fn as_str(self) -> &'static str {
        match self {
            EventSource::Mnote => "mnote",
            EventSource::Tool => "tool",
            EventSource::Agent(a) => a.as_str(),
        }
    }
}

impl From<AgentId> for EventSource {
    fn from(a: AgentId) -> Self {
        EventSource::Agent(a)
    }
}

/// `{code, message}` of a failed run or tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "RunError")]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// One entry of an agent's plan (`plan.updated`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanEntry {
    pub content: String,
    /// `pending | in_progress | completed`
    pub status: String,
}

/// `run.created`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunCreated {
    pub agent_id: AgentId,
    pub provider: Provider,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<Uuid>,
    pub prompt: String,
}

/// `tool.started`: what was asked (arguments as the agent sent them, capped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolStarted {
    pub call_id: String,
    pub name: String,
    /// The arguments as the agent sent them (their schema is the tool's `parameters`), capped.
    #[serde(default)]
    #[schemars(with = "ToolArgument")]
    pub arguments: Value, // JSON edge: what a model or ACP agent sent, kept as sent
}

/// `tool.completed`: a compact result (counts and evidence ids, never raw provider chunks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCompleted {
    pub call_id: String,
    pub name: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_ids: Vec<Uuid>,
    /// One line for the tool card ("5 results in 2 documents").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

// The receipt's `verdict`, a value of the run (`agents::verdict` decides it).
/// Whether the evidence answers the question. Ordered: `not_found` < `partial` < `answered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    NotFound,
    Partial,
    Answered,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::NotFound => "not_found",
            Verdict::Partial => "partial",
            Verdict::Answered => "answered",
        }
    }
}

/// `run.completed`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunCompleted {
    /// The final answer (Markdown with `citationMarkdown` links).
    pub answer: String,
    pub citations_total: usize,
    pub citations_verified: usize,
    /// The receipt's verdict, so a live client knows it with the ending (absent for a chat
    /// without evidence tools, and in events written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// The stream built this ending from the run's row (the journal has none).
    #[serde(default, skip_serializing_if = "is_false")]
    pub reconciled: bool,
}

/// `run.failed`: the error code and message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunFailed {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub reconciled: bool,
}

/// `run.cancelled` (`user`) and `run.interrupted` (`worker_lost`): why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunStopped {
    pub reason: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub reconciled: bool,
}

impl RunStopped {
    pub fn new(reason: &str) -> RunStopped {
        RunStopped { reason: reason.into(), reconciled: false }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A tool call's arguments as sent: an object (as the tool's `parameters` say; `{truncated,
/// bytes, prefix}` when capped), or whatever else an agent sent.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum ToolArgument {
    Null(()),
    String(String),
    Number(f64),
    Bool(bool),
    List(Vec<ToolArgument>),
    Object(std::collections::BTreeMap<String, ToolArgument>),
}

/// One journal event, typed; stored as `kind` + `payload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "payload")]
pub enum Event {
    #[serde(rename = "run.created")]
    RunCreated(RunCreated),
    #[serde(rename = "message.delta")]
    MessageDelta { text: String },
    #[serde(rename = "tool.started")]
    ToolStarted(ToolStarted),
    #[serde(rename = "tool.completed")]
    ToolCompleted(ToolCompleted),
    #[serde(rename = "plan.updated")]
    PlanUpdated { entries: Vec<PlanEntry> },
    /// Files an agent reports it changed (runs never write documents; recorded, not applied).
    #[serde(rename = "changed_files")]
    ChangedFiles { files: Vec<String> },
    /// The worker was lost (`worker_lost`): the run can be resumed as a child run.
    #[serde(rename = "run.interrupted")]
    RunInterrupted(RunStopped),
    #[serde(rename = "run.completed")]
    RunCompleted(RunCompleted),
    #[serde(rename = "run.failed")]
    RunFailed(RunFailed),
    #[serde(rename = "run.cancelled")]
    RunCancelled(RunStopped),
}

impl Event {
    /// `(kind, payload)` as stored.
    pub fn split(&self) -> (String, Value) {
        // JSON edge: the jsonb payload column
        let v = serde_json::to_value(self).expect("events serialize");
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        let payload = v.get("payload").cloned().unwrap_or(Value::Object(Default::default())); // JSON edge: as above
        (kind, payload)
    }

    /// The stored `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunCreated(_) => "run.created",
            Event::MessageDelta { .. } => "message.delta",
            Event::ToolStarted(_) => "tool.started",
            Event::ToolCompleted(_) => "tool.completed",
            Event::PlanUpdated { .. } => "plan.updated",
            Event::ChangedFiles { .. } => "changed_files",
            Event::RunInterrupted(_) => "run.interrupted",
            Event::RunCompleted(_) => "run.completed",
            Event::RunFailed(_) => "run.failed",
            Event::RunCancelled(_) => "run.cancelled",
        }
    }

    /// Whether this event ends the run's stream (terminal, or interrupted).
    pub fn ends_stream(&self) -> bool {
        matches!(self, Event::RunCompleted(_) | Event::RunFailed(_) | Event::RunCancelled(_) | Event::RunInterrupted(_))
    }
}

/// What the browser and the API see of a run's context (`contextRefs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextRefs {
    #[serde(default)]
    pub kb_ids: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_ids: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_ids: Vec<Uuid>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_into_kind_and_payload_and_back() {
        let e = Event::MessageDelta { text: "hi".into() };
        let (kind, payload) = e.split();
        assert_eq!(kind, "message.delta");
        assert_eq!(payload, serde_json::json!({"text": "hi"}));
        let back: Event = serde_json::from_value(serde_json::json!({"kind": kind, "payload": payload})).unwrap();
        assert_eq!(back, e);
        let f = Event::RunFailed(RunFailed { code: "llm_timeout".into(), message: "m".into(), reconciled: false });
        assert_eq!(f.split(), (f.kind().to_string(), serde_json::json!({"code": "llm_timeout", "message": "m"})));
        assert!(f.ends_stream() && !e.ends_stream());
        let c = Event::RunCancelled(RunStopped { reconciled: true, ..RunStopped::new("user") });
        assert_eq!(c.split().1, serde_json::json!({"reason": "user", "reconciled": true}));
    }
}
