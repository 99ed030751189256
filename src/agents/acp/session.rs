//! One conversation with a started agent: `initialize`, `session/new`, one `session/prompt`
//! turn, while serving what the agent sends meanwhile (updates, `_mnote/tools/call`),
//! watching the idle timeout and the run's cancellation.
//!
//! The crate's handlers only forward what arrives into one channel, in arrival order; this
//! task does the work (journal writes, tool calls), so nothing blocks the crate's dispatch
//! loop. A response is delivered only after every message before it was dispatched, so once
//! the prompt's response is in, the channel already holds every update of the turn.

use std::{path::Path, time::Duration};

use agent_client_protocol::{
    Agent,
    schema::ProtocolVersion,
    v1::{
        ConnectionTo, Responder,
        schema::{
            CancelNotification, ClientCapabilities, ContentBlock, HttpHeader, Implementation, InitializeRequest, McpServer,
            McpServerHttp, NewSessionRequest, PromptRequest, SessionId, SessionNotification, StopReason, TextContent,
        },
    },
};
use tokio::{sync::mpsc::UnboundedReceiver, time::Instant};

use super::{
    ext::{self, ToolsCallRequest, ToolsCallResponse},
    transport::{Activity, Violation},
    updates::Updates,
};
use crate::{
    agents::{McpAccess, RunEnv, RunInput, TurnRole, tools::ToolResult},
    journal::sink::JournalError,
};

/// How long a cancelled agent gets to end its turn (`stopReason: cancelled`) before it is killed.
pub const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// What the crate's handlers forward (boxed: both are large).
pub enum Inbound {
    Update(Box<SessionNotification>),
    ToolCall(Box<ToolCall>),
}

/// An agent's `_mnote/tools/call`, waiting for its answer.
pub struct ToolCall {
    pub request: ToolsCallRequest,
    pub responder: Responder<ToolsCallResponse>,
}

/// A turn that ended with an answer.
#[derive(Debug)]
pub struct Finished {
    pub text: String,
    /// Why the answer may be incomplete (the agent stopped for another reason than end of turn).
    pub note: Option<&'static str>,
    pub session_id: String,
}

/// Why a conversation ended without an answer. The caller adds what the process says.
#[derive(Debug)]
pub enum Failure {
    Cancelled,
    Idle,
    /// The connection ended (end of output, a broken pipe): the process decides the code.
    Closed(String),
    /// The agent broke the protocol.
    Protocol(String),
    /// The agent wrote a line over the transport's cap.
    LineTooLong(String),
    /// The agent answered one of our requests with an error.
    Agent(String),
    Journal(JournalError),
}

impl From<Violation> for Failure {
    fn from(v: Violation) -> Self {
        match v {
            Violation::LineTooLong(m) => Failure::LineTooLong(m),
            Violation::Protocol(m) => Failure::Protocol(m),
        }
    }
}

impl From<JournalError> for Failure {
    fn from(e: JournalError) -> Self {
        Failure::Journal(e)
    }
}

/// An error of one of our requests, classified.
fn request_failed(method: &str, e: agent_client_protocol::Error) -> Failure {
    use agent_client_protocol::ErrorCode;
    let message: String = e.message.chars().take(500).collect();
    if agent_client_protocol::is_connection_terminated(&e) {
        return Failure::Closed(format!("{method}: {message}"));
    }
    match e.code {
        ErrorCode::PARSE_ERROR | ErrorCode::INVALID_REQUEST | ErrorCode::METHOD_NOT_FOUND | ErrorCode::INVALID_PARAMS => {
            Failure::Protocol(format!("the agent's answer to {method}: {message} ({})", e.code.value()))
        }
        _ => Failure::Agent(format!("the agent answered {method} with an error: {message} ({})", e.code.value())),
    }
}

pub struct Driver<'a> {
    pub env: &'a RunEnv,
    pub inbound: UnboundedReceiver<Inbound>,
    pub violations: UnboundedReceiver<Violation>,
    pub activity: Activity,
    pub idle: Duration,
    pub updates: Updates,
    calls: usize,
}

impl<'a> Driver<'a> {
    pub fn new(
        env: &'a RunEnv,
        inbound: UnboundedReceiver<Inbound>,
        violations: UnboundedReceiver<Violation>,
        activity: Activity,
        idle: Duration,
    ) -> Self {
        Driver { env, inbound, violations, activity, idle, updates: Updates::default(), calls: 0 }
    }

    /// The whole conversation; `workdir` is the session's `cwd`.
    pub async fn converse(&mut self, cx: &ConnectionTo<Agent>, workdir: &Path, input: &RunInput) -> Result<Finished, Failure> {
        let init = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(ClientCapabilities::new())
            .client_info(Implementation::new("mnote", env!("CARGO_PKG_VERSION")));
        let init = self.wait("initialize", cx.send_request(init).block_task()).await?;
        if init.protocol_version != ProtocolVersion::V1 {
            return Err(Failure::Protocol(format!(
                "the agent speaks ACP version {}; MNote speaks version 1",
                serde_json::to_string(&init.protocol_version).unwrap_or_default()
            )));
        }
        let meta = ext::with_preferences(ext::session_meta(self.env.tools.offered()), &input.preferences);
        // Our tools over standard MCP too, to an agent that takes HTTP MCP servers (we have no
        // stdio MCP bridge: an agent without `mcpCapabilities.http` has only `_mnote`).
        let http = init.agent_capabilities.mcp_capabilities.http;
        let servers = mcp_servers(self.env.mcp.as_ref().filter(|_| http));
        let new = NewSessionRequest::new(workdir).mcp_servers(servers).meta(meta);
        let session = self.wait("session/new", cx.send_request(new).block_task()).await?.session_id;
        self.prompt(cx, session, prompt_blocks(input)).await
    }

    /// Wait for the response to `session/new` or `initialize`, serving the agent meanwhile.
    async fn wait<T>(
        &mut self,
        method: &str,
        response: impl Future<Output = Result<T, agent_client_protocol::Error>>,
    ) -> Result<T, Failure> {
        tokio::pin!(response);
        loop {
            let idle_at = self.idle_deadline();
            tokio::select! {
                biased;
                Some(v) = self.violations.recv() => return Err(v.into()),
                Some(item) = self.inbound.recv() => self.serve(item).await?,
                r = &mut response => return r.map_err(|e| request_failed(method, e)),
                _ = self.env.cancel.cancelled() => return Err(Failure::Cancelled),
                _ = tokio::time::sleep_until(idle_at) => self.check_idle()?,
            }
        }
    }

    /// The prompt turn: updates until the response's stop reason; on cancellation
    /// `session/cancel`, then at most [`CANCEL_WAIT`] for the agent to end the turn.
    async fn prompt(
        &mut self,
        cx: &ConnectionTo<Agent>,
        session: SessionId,
        blocks: Vec<ContentBlock>,
    ) -> Result<Finished, Failure> {
        let response = cx.send_request(PromptRequest::new(session.clone(), blocks)).block_task();
        tokio::pin!(response);
        let mut cancelled_at: Option<Instant> = None;
        let response = loop {
            let idle_at = self.idle_deadline();
            let give_up_at = cancelled_at.map_or(idle_at, |t| t + CANCEL_WAIT);
            tokio::select! {
                biased;
                Some(v) = self.violations.recv() => return Err(v.into()),
                Some(item) = self.inbound.recv() => self.serve(item).await?,
                r = &mut response => break r,
                _ = self.env.cancel.cancelled(), if cancelled_at.is_none() => {
                    // If the notification cannot be sent the agent is gone; the wait below ends it.
                    let _ = cx.send_notification(CancelNotification::new(session.clone()));
                    cancelled_at = Some(Instant::now());
                }
                _ = tokio::time::sleep_until(give_up_at), if cancelled_at.is_some() => return Err(Failure::Cancelled),
                _ = tokio::time::sleep_until(idle_at), if cancelled_at.is_none() => self.check_idle()?,
            }
        };
        // Every update of the turn arrived before its response.
        self.drain().await?;
        if cancelled_at.is_some() {
            return Err(Failure::Cancelled);
        }
        let stop = response.map_err(|e| request_failed("session/prompt", e))?.stop_reason;
        let note = match stop {
            StopReason::EndTurn => None,
            StopReason::Cancelled => return Err(Failure::Cancelled),
            StopReason::MaxTokens => Some("The agent reached its output limit; the answer may be incomplete."),
            StopReason::MaxTurnRequests => {
                Some("The agent reached its limit of steps for one turn; the answer may be incomplete.")
            }
            StopReason::Refusal => Some("The agent declined to continue."),
            _ => Some("The agent stopped before finishing."),
        };
        Ok(Finished { text: self.updates.text().to_string(), note, session_id: session.0.to_string() })
    }

    /// Journal what already arrived (after the turn, or after the connection ended).
    pub async fn drain(&mut self) -> Result<(), Failure> {
        while let Ok(item) = self.inbound.try_recv() {
            match item {
                Inbound::Update(n) => self.updates.apply(&self.env.events, n.update).await?,
                Inbound::ToolCall(call) => {
                    let ended = agent_client_protocol::Error::invalid_request().data("the turn has ended");
                    let _ = call.responder.respond_with_error(ended);
                }
            }
        }
        Ok(())
    }

    async fn serve(&mut self, item: Inbound) -> Result<(), Failure> {
        match item {
            Inbound::Update(n) => self.updates.apply(&self.env.events, n.update).await?,
            Inbound::ToolCall(call) => {
                let ToolCall { request: req, responder } = *call;
                self.calls += 1;
                let call_id = format!("acp-{}", self.calls);
                // Boxed: the tool's future is deep (search, knowledge RAG over HTTP), and proving
                // it `Send` inside the ACP connection's futures would exceed the recursion limit.
                let call: futures_util::future::BoxFuture<'_, ToolResult> =
                    Box::pin(self.env.tools.call(&call_id, &req.name, req.arguments));
                let result = tokio::select! {
                    r = call => Some(r),
                    _ = self.env.cancel.cancelled() => None,
                };
                // The agent may have gone meanwhile; its end shows elsewhere.
                let _ = match result {
                    Some(r) => responder.respond(ToolsCallResponse { ok: r.ok, content: r.content }),
                    None => responder.respond_with_error(agent_client_protocol::Error::request_cancelled()),
                };
                // The agent waited for us: the idle clock starts again now.
                self.activity.touch();
            }
        }
        Ok(())
    }

    fn idle_deadline(&self) -> Instant {
        Instant::from_std(self.activity.last()) + self.idle
    }

    fn check_idle(&self) -> Result<(), Failure> {
        if self.activity.last().elapsed() >= self.idle { Err(Failure::Idle) } else { Ok(()) }
    }
}

/// The name of our MCP server in `session/new` (what agents prefix our tools with).
pub const MCP_SERVER_NAME: &str = "mnote";

/// `session/new`'s `mcpServers`: our `/mcp` over HTTP with the run's token, or nothing.
pub fn mcp_servers(access: Option<&McpAccess>) -> Vec<McpServer> {
    access
        .map(|a| {
            let auth = HttpHeader::new("Authorization", format!("Bearer {}", a.token.expose()));
            McpServer::Http(McpServerHttp::new(MCP_SERVER_NAME, a.url.clone()).headers(vec![auth]))
        })
        .into_iter()
        .collect()
}

/// The prompt's content: the earlier turns (if any) as one text block, then the question.
pub fn prompt_blocks(input: &RunInput) -> Vec<ContentBlock> {
    let mut blocks = Vec::new();
    if !input.transcript.is_empty() || !input.history.is_empty() {
        let mut t = String::from("Earlier in this conversation (oldest first):\n");
        for turn in input.history.iter().chain(&input.transcript) {
            let who = match turn.role {
                TurnRole::User => "User",
                TurnRole::Assistant => "Assistant",
            };
            t.push_str(&format!("\n{who}: {}\n", turn.text.trim()));
        }
        if input.transcript.last().is_some_and(|t| t.role == TurnRole::Assistant) {
            t.push_str("\n(The last answer may have been cut off: continue it, do not repeat it.)\n");
        }
        blocks.push(ContentBlock::Text(TextContent::new(t)));
    }
    blocks.push(ContentBlock::Text(TextContent::new(input.prompt.clone())));
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::{AgentId, Turn};

    fn texts(blocks: &[ContentBlock]) -> Vec<String> {
        blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text(t) => t.text.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_fresh_prompt_is_one_block_and_earlier_turns_come_first() {
        let mut input = RunInput {
            host_run_id: uuid::Uuid::nil(),
            agent: AgentId::Reasonix,
            prompt: "And the charging?".into(),
            context: Default::default(),
            transcript: Vec::new(),
            history: Vec::new(),
            preferences: Default::default(),
        };
        assert_eq!(texts(&prompt_blocks(&input)), vec!["And the charging?"]);
        input.transcript = vec![
            Turn { role: TurnRole::User, text: "Where are the robots built?".into() },
            Turn { role: TurnRole::Assistant, text: "In Lyon".into() },
        ];
        let t = texts(&prompt_blocks(&input));
        assert_eq!(t.len(), 2);
        assert!(t[0].contains("User: Where are the robots built?\n\nAssistant: In Lyon"), "{}", t[0]);
        assert!(t[0].contains("continue it"), "{}", t[0]);
        assert_eq!(t[1], "And the charging?");
        // A follow-up: the conversation's earlier turns, not a cut-off answer to continue.
        input.history = std::mem::take(&mut input.transcript);
        let t = texts(&prompt_blocks(&input));
        assert!(t[0].contains("User: Where are the robots built?\n\nAssistant: In Lyon"), "{}", t[0]);
        assert!(!t[0].contains("continue it"), "{}", t[0]);
    }

    #[test]
    fn our_mcp_server_is_an_http_entry_with_the_bearer_header() {
        assert!(mcp_servers(None).is_empty());
        let access = McpAccess { url: "http://127.0.0.1:9/mcp".into(), token: crate::config::SecretString::new("mnoterun_t_s") };
        let v = serde_json::to_value(mcp_servers(Some(&access))).unwrap();
        assert_eq!(
            v,
            serde_json::json!([{"type": "http", "name": "mnote", "url": "http://127.0.0.1:9/mcp",
                                "headers": [{"name": "Authorization", "value": "Bearer mnoterun_t_s"}]}])
        );
    }

    #[test]
    fn protocol_and_agent_errors_are_told_apart() {
        let e = request_failed("session/prompt", agent_client_protocol::Error::method_not_found());
        assert!(matches!(e, Failure::Protocol(_)), "{e:?}");
        let e = request_failed("session/prompt", agent_client_protocol::Error::new(-32099, "model overloaded"));
        assert!(matches!(&e, Failure::Agent(m) if m.contains("model overloaded")), "{e:?}");
    }
}
