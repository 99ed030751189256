//! The `builtin` runtime (offline, no LLM). (Interface first; implementation in progress.)

use futures_util::future::BoxFuture;

use super::{AgentError, AgentRuntime, Provider, RunEnv, RunInput, RunOutput};

#[derive(Default)]
pub struct BuiltinRuntime;

impl BuiltinRuntime {
    pub fn new() -> Self {
        BuiltinRuntime
    }
}

impl AgentRuntime for BuiltinRuntime {
    fn provider(&self) -> Provider {
        Provider::Builtin
    }

    fn run<'a>(&'a self, input: &'a RunInput, env: &'a RunEnv) -> BoxFuture<'a, Result<RunOutput, AgentError>> {
        Box::pin(async move {
            env.events.delta(&format!("(builtin) {}", input.prompt)).await?;
            Ok(RunOutput { answer: format!("(builtin) {}", input.prompt), provider_run_id: None })
        })
    }
}
