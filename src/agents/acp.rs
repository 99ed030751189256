//! The `acp` runtime: an Agent Client Protocol agent process started from the operator's
//! command. (Interface first; implementation in progress.)

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{AgentError, AgentRuntime, Provider, RunEnv, RunInput, RunOutput};

#[derive(Debug, Clone)]
pub struct AcpSettings {
    /// Program and arguments (operator config only).
    pub command: Vec<String>,
    /// No message from the agent for this long fails the run (`agent_timeout`).
    pub idle_timeout: Duration,
    /// Address-space limit of the agent process.
    pub memory_bytes: u64,
}

pub struct AcpRuntime {
    settings: AcpSettings,
}

impl AcpRuntime {
    pub fn new(settings: AcpSettings) -> Self {
        AcpRuntime { settings }
    }
}

impl AgentRuntime for AcpRuntime {
    fn provider(&self) -> Provider {
        Provider::Acp
    }

    fn run<'a>(&'a self, _input: &'a RunInput, _env: &'a RunEnv) -> BoxFuture<'a, Result<RunOutput, AgentError>> {
        Box::pin(
            async move { Err(AgentError::upstream("acp_failed", format!("not implemented yet ({:?})", self.settings.command))) },
        )
    }
}
