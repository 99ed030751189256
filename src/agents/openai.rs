//! The `openai` runtime: an OpenAI-compatible `/v1/chat/completions` endpoint, streamed, with
//! the MNote tools as functions. (Interface first; implementation in progress.)

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{AgentError, AgentRuntime, Provider, RunEnv, RunInput, RunOutput};
use crate::platform::SecretString;

/// How to reach the model.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// Base URL as configured (`http://host:port/v1` or without `/v1`).
    pub endpoint: String,
    pub model: String,
    pub api_key: Option<SecretString>,
    /// Offer the MNote tools (`hermes`) or not (`chat_only`).
    pub with_tools: bool,
    /// No chunk for this long fails the run (`agent_timeout`).
    pub idle_timeout: Duration,
    pub max_tool_rounds: usize,
}

pub struct OpenAiRuntime {
    settings: OpenAiSettings,
}

impl OpenAiRuntime {
    pub fn new(settings: OpenAiSettings) -> Self {
        OpenAiRuntime { settings }
    }
}

impl AgentRuntime for OpenAiRuntime {
    fn provider(&self) -> Provider {
        Provider::OpenAi
    }

    fn run<'a>(&'a self, _input: &'a RunInput, _env: &'a RunEnv) -> BoxFuture<'a, Result<RunOutput, AgentError>> {
        Box::pin(
            async move { Err(AgentError::upstream("llm_unavailable", format!("not implemented yet ({})", self.settings.model))) },
        )
    }
}
