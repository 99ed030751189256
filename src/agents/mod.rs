//! Agent runtimes. One [`AgentRuntime`] trait; three providers:
//! - `builtin` (offline, no LLM): plans searches, answers extractively with citations;
//! - `openai`: an OpenAI-compatible `/v1/chat/completions` endpoint, streamed, with our tools
//!   as functions (`hermes`) or without them (`chat_only`);
//! - `acp`: an Agent Client Protocol agent process started from the operator's config
//!   (`reasonix`).
//!
//! Runtimes call the evidence tools in-process through [`tools::ToolBox`] (one registry:
//! names, schemas, descriptions), under the run actor's grants and KB visibility, and write
//! their events to the run journal through [`crate::journal::sink::EventSink`]. The
//! [`executor`] drives a run from `pending` to its end; [`verify`] checks every citation of the
//! answer against the evidence it names. Runs never modify documents.

pub mod acp;
pub mod api;
pub mod builtin;
pub mod capabilities;
pub mod citations;
pub mod config;
pub mod connect;
pub mod descriptors;
pub mod executor;
pub mod history;
pub mod offer;
pub mod openai;
pub mod pages;
pub mod preferences;
pub mod queries;
pub mod selftest;
pub mod tools;
pub mod verdict;
pub mod verify;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::journal::{ContextRefs, sink::EventSink, sink::JournalError};

pub use crate::ai::{AgentId, Capability, PreferenceValue, Provider, RunPreferencesSnapshot};

/// A turn of the conversation a run continues (a resumed run carries its parent's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnRole {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub role: TurnRole,
    pub text: String,
}

/// What a runtime is asked to do.
#[derive(Debug, Clone)]
pub struct RunInput {
    pub host_run_id: Uuid,
    pub agent: AgentId,
    pub prompt: String,
    pub context: ContextRefs,
    /// Earlier turns, oldest first (empty for a fresh run). A resumed run's last turn may be
    /// the parent's partial answer: continue it, do not repeat it.
    pub transcript: Vec<Turn>,
    /// The conversation's earlier turns before this question (or before the run it resumes),
    /// oldest first, bounded (`history`); empty for a conversation's first question.
    pub history: Vec<Turn>,
    /// The user's preferences frozen into the run (`ai.common.*` and this agent's scope).
    pub preferences: std::collections::BTreeMap<String, PreferenceValue>,
}

impl RunInput {
    /// The question of the conversation's previous turn: what a short follow-up ("and its
    /// length?") refers to.
    pub fn previous_question(&self) -> Option<&str> {
        self.history.iter().rev().find(|t| t.role == TurnRole::User).map(|t| t.text.as_str())
    }
}

/// What a runtime works with.
#[derive(Clone)]
pub struct RunEnv {
    /// The journal (deltas, plans, the agent's own tool calls).
    pub events: EventSink,
    /// Our tools, under the actor's rights; each call journals `tool.started/completed`.
    pub tools: std::sync::Arc<tools::ToolBox>,
    /// Fired when the run is cancelled (or its lease is lost): stop promptly.
    pub cancel: CancellationToken,
    /// Our `/mcp` for this run (ACP runs with tools): the URL and the run-scoped token an
    /// agent that takes MCP servers gets in `session/new`.
    pub mcp: Option<McpAccess>,
}

/// `/mcp` as one run's agent reaches it: the URL (this server's own address) and the run's
/// token (`Authorization: Bearer …`), valid while the run is live and only at `/mcp`.
#[derive(Clone, Debug)]
pub struct McpAccess {
    pub url: String,
    pub token: crate::config::SecretString,
}

/// A finished answer.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Markdown; citations are `citationMarkdown` links (`[label](/sources/…/view?evidence=…#hl)`).
    pub answer: String,
    pub provider_run_id: Option<String>,
    /// What the agent says of its answer (the receipt's verdict starts from it).
    pub claim: verdict::Claim,
}

/// Why a run did not produce an answer. `code()` is the stable error code of `run.failed`.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("the run was cancelled")]
    Cancelled,
    /// No chunk (or no answer) within the configured time.
    #[error("{0}")]
    Timeout(String),
    /// The model endpoint or agent process failed, or answered something unusable.
    #[error("{message}")]
    Upstream { code: &'static str, message: String },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl AgentError {
    pub fn upstream(code: &'static str, message: impl Into<String>) -> Self {
        AgentError::Upstream { code, message: message.into() }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AgentError::Cancelled => "cancelled",
            AgentError::Timeout(_) => "agent_timeout",
            AgentError::Upstream { code, .. } => code,
            AgentError::Journal(e) => e.code(),
            AgentError::Internal(_) => "internal",
        }
    }
}

/// One agent runtime (builtin, openai, acp).
pub trait AgentRuntime: Send + Sync {
    fn provider(&self) -> Provider;

    /// Answer `input`, streaming through `env.events`; return the final answer.
    fn run<'a>(&'a self, input: &'a RunInput, env: &'a RunEnv) -> BoxFuture<'a, Result<RunOutput, AgentError>>;
}
