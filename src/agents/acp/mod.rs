//! The `acp` runtime: an Agent Client Protocol agent process started from the operator's
//! command (`MNOTE_ACP_REASONIX_COMMAND`; program and arguments, never a shell, never from a
//! team admin), spoken to over its stdio with the maintained `agent-client-protocol` crate
//! (protocol v1, newline-delimited JSON-RPC 2.0).
//!
//! A run is one process and one prompt turn:
//! 1. the command starts in a fresh temporary directory (also the session's `cwd` and the
//!    agent's HOME and TMPDIR), sandboxed by the supervisor ([`Supervised::sandboxed`]):
//!    under its address-space limit, with an allow-listed environment ([`sandbox`]: never
//!    the server's database URLs, keys or tokens, only what MNOTE_ACP_ENV names), without
//!    new privileges, as MNOTE_ACP_USER (default `nobody`) when the server runs as root,
//!    its file access confined by the kernel ([`sandbox::FsPolicy`]: Landlock, else a mount
//!    namespace; with neither the run fails with `agent_sandbox_unavailable` unless the
//!    operator set MNOTE_ACP_SANDBOX=off);
//! 2. `initialize` (protocol version 1; client capabilities: no file system, no terminal),
//!    `session/new` (our tools in `_meta`, see below; `mcpServers` holds our `/mcp` with the
//!    run's token when the agent advertises `mcpCapabilities.http`, see below), `session/prompt`
//!    (earlier turns of a resumed conversation as a text block before the question);
//! 3. `session/update` notifications are journaled ([`updates`]): answer chunks as
//!    `message.delta`, the plan as `plan.updated`, the agent's own tool calls as compact
//!    `tool.started`/`tool.completed` attributed to the agent; thoughts are not journaled;
//! 4. the prompt's `stopReason` ends the turn: `end_turn` → the answer; `cancelled` → the run
//!    is cancelled; `max_tokens`, `max_turn_requests`, `refusal` → the answer so far with a
//!    note. `providerRunId` is the ACP `sessionId`;
//! 5. the process and every process it started (also those that left its process group:
//!    the shim is their subreaper) are killed when the run ends, however it ends. A cancelled
//!    run sends `session/cancel` and gives the agent [`session::CANCEL_WAIT`] to end its turn.
//!
//! Failures: nothing from the agent for `idle_timeout` → `agent_timeout`; the process ends or
//! closes its output mid-run → `acp_failed` with its exit status and the last lines of its
//! stderr (every configured secret redacted, [`redact`]); a line over MNOTE_ACP_MAX_LINE_BYTES
//! (default 8 MiB) → `acp_line_too_long`; a broken protocol (stdout
//! that is not JSON-RPC, another protocol version, an unknown method) → `acp_protocol_error`;
//! an error answer to one of our requests → `acp_failed`.
//!
//! ## The `_mnote` extension (our tools, offered to the agent)
//!
//! `session/new` carries `_meta.mnote = {"callMethod": "_mnote/tools/call", "tools": [{"name":
//! "mnote.evidence.search", "description": "…", "inputSchema": {…JSON Schema…}}, …]}`: the
//! tools this run may use (none for `chat_only`). The agent calls one with the agent → client
//! request `_mnote/tools/call` `{"name": "mnote.evidence.search", "arguments": {…}}` and gets
//! `{"ok": true, "content": {…the tool's typed output…}}` (or `ok: false` with `content:
//! {"error": {code, message}}`). Calls run in-process under the run actor's rights and are
//! journaled (`tool.started`/`tool.completed`, source `tool`) like any runtime's. Evidence the
//! agent cites as `[evidence:<id>]` becomes our citation links in the final answer.
//!
//! ## Our tools over standard MCP
//!
//! An agent whose `initialize` answer advertises `agentCapabilities.mcpCapabilities.http` also
//! gets `mcpServers: [{"type": "http", "name": "mnote", "url": "<this server>/mcp", "headers":
//! [{"name": "Authorization", "value": "Bearer mnoterun_…"}]}]`: the run-scoped token the
//! executor minted (`crate::mcp::run_token`), valid only at `/mcp` and only while the run is
//! live. Its calls are journaled into the run through the database and count for the receipt
//! like `_mnote/tools/call`'s. Without that capability `mcpServers` is empty (we have no stdio
//! MCP bridge) and the `_mnote` extension is the agent's only way to our tools.
//!
//! Every other agent → client request is refused: `session/request_permission` gets the
//! `cancelled` outcome, `fs/*` and `terminal/*` (never advertised) and unknown methods a
//! JSON-RPC "method not found" error. A run never writes files.

pub mod ext;
pub mod sandbox;
mod session;
mod transport;
mod updates;

use std::{path::PathBuf, time::Duration};

use agent_client_protocol::{
    Client, Lines,
    v1::{
        ConnectionTo, Responder,
        schema::{RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse, SessionNotification},
    },
};
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use self::{
    ext::{ToolsCallRequest, ToolsCallResponse},
    session::{Driver, Failure, Finished, Inbound, ToolCall},
    transport::Activity,
};
use super::{AgentError, AgentRuntime, Provider, RunEnv, RunInput, RunOutput};
use crate::{
    config::{AcpSandbox, Config},
    platform::supervise::{Interactive, Sandbox, Supervised},
};

#[derive(Debug, Clone)]
pub struct AcpSettings {
    /// Program and arguments (operator config only).
    pub command: Vec<String>,
    /// No message from the agent for this long fails the run (`agent_timeout`).
    pub idle_timeout: Duration,
    /// Address-space limit of the agent process.
    pub memory_bytes: u64,
    /// The `mnote` executable that runs the sandbox shim.
    pub shim: PathBuf,
    /// Variables of the server's environment the agent also gets (MNOTE_ACP_ENV).
    pub env: Vec<String>,
    /// MNOTE_ACP_USER (see [`sandbox::run_as`]).
    pub user: Option<String>,
    /// The longest line the agent may write (`acp_line_too_long`).
    pub max_line_bytes: usize,
    /// MNOTE_ACP_SANDBOX: file access confined (`On`) or, by the operator's choice, not.
    pub sandbox: AcpSandbox,
    /// What a confined agent may reach ([`sandbox::FsPolicy`]).
    pub fs: sandbox::FsPolicy,
}

impl AcpSettings {
    pub fn from_config(cfg: &Config) -> Self {
        AcpSettings {
            command: cfg.agents.acp_command.clone().unwrap_or_default(),
            idle_timeout: cfg.agents.idle_timeout,
            memory_bytes: cfg.agents.acp_memory_bytes,
            shim: cfg.parser_exe.clone(),
            env: cfg.agents.acp_env.clone(),
            user: cfg.agents.acp_user.clone(),
            max_line_bytes: cfg.agents.acp_max_line_bytes,
            sandbox: cfg.agents.acp_sandbox,
            fs: sandbox::FsPolicy::from_config(cfg),
        }
    }
}

/// How long the shim may take to report the agent's confinement (it does before the program
/// starts: building the ruleset lists a few directories).
const CONFINEMENT_WAIT: Duration = Duration::from_secs(10);
/// How long an ended agent's exit status and last stderr lines are waited for.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// Characters of the agent's stderr a failure quotes (its last lines).
const STDERR_QUOTE_CHARS: usize = 600;

pub struct AcpRuntime {
    settings: AcpSettings,
    /// What the agent's quoted stderr never shows ([`sandbox::known_secrets`]).
    secrets: Vec<String>,
}

impl AcpRuntime {
    pub fn new(settings: AcpSettings) -> Self {
        let secrets =
            sandbox::known_secrets(std::env::vars_os().filter_map(|(n, v)| Some((n.into_string().ok()?, v.into_string().ok()?))));
        AcpRuntime { settings, secrets }
    }

    /// Start the agent in `workdir` (made its own when it runs as another user).
    fn spawn(&self, workdir: &std::path::Path) -> Result<Interactive, AgentError> {
        let failed = |m: String| AgentError::upstream("acp_failed", m);
        let (program, args) =
            self.settings.command.split_first().ok_or_else(|| failed("no ACP agent command is configured".into()))?;
        let user = sandbox::run_as(self.settings.user.as_deref(), sandbox::euid(), sandbox::lookup_user).map_err(failed)?;
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(workdir, Some(uid), Some(gid))
                .map_err(|e| failed(format!("the agent's working directory: {e}")))?;
        }
        let env = sandbox::environment(std::env::vars_os(), &self.settings.env, workdir);
        let fs = match self.settings.sandbox {
            AcpSandbox::Off => None,
            AcpSandbox::On => {
                let path = env.iter().find(|(n, _)| n == "PATH").map(|(_, v)| v.as_os_str());
                Some(self.settings.fs.rules(program, path, workdir))
            }
        };
        let confinement = Sandbox { shim: self.settings.shim.clone(), env, user, fs };
        Supervised::sandboxed(program, args, workdir, confinement)
            .memory_limit(self.settings.memory_bytes)
            .spawn_interactive()
            .map_err(|e| failed(format!("the agent process could not be started: {e}")))
    }

    /// Talk to the started agent until the turn ends; journals as it goes.
    async fn converse(
        &self,
        child: &mut Interactive,
        workdir: &std::path::Path,
        input: &RunInput,
        env: &RunEnv,
    ) -> Result<Finished, Failure> {
        let (Some(stdin), Some(stdout)) = (child.take_stdin(), child.take_stdout()) else {
            return Err(Failure::Closed("the agent's stdio is not available".into()));
        };
        let activity = Activity::new();
        let (violations_tx, violations) = mpsc::unbounded_channel();
        let transport = Lines::new(
            transport::outgoing(stdin),
            transport::incoming(stdout, activity.clone(), violations_tx, self.settings.max_line_bytes),
        );
        let (tx, inbound) = mpsc::unbounded_channel::<Inbound>();
        let tool_tx = tx.clone();
        let client = Client
            .v1()
            .name("mnote")
            .on_receive_notification(
                async move |n: SessionNotification, _cx: ConnectionTo<agent_client_protocol::Agent>| {
                    let _ = tx.send(Inbound::Update(Box::new(n)));
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |req: ToolsCallRequest,
                            responder: Responder<ToolsCallResponse>,
                            _cx: ConnectionTo<agent_client_protocol::Agent>| {
                    let call = Box::new(ToolCall { request: req, responder });
                    if let Err(mpsc::error::SendError(Inbound::ToolCall(call))) = tool_tx.send(Inbound::ToolCall(call)) {
                        return call.responder.respond_with_internal_error("the run has ended");
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |_req: RequestPermissionRequest,
                            responder: Responder<RequestPermissionResponse>,
                            _cx: ConnectionTo<agent_client_protocol::Agent>| {
                    // Runs act on nobody's behalf: nothing is ever permitted.
                    responder.respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled))
                },
                agent_client_protocol::on_receive_request!(),
            );
        let mut driver = Driver::new(env, inbound, violations, activity, self.settings.idle_timeout);
        let outcome = client
            .connect_with(transport, async |cx: ConnectionTo<agent_client_protocol::Agent>| {
                Ok(driver.converse(&cx, workdir, input).await)
            })
            .await;
        match outcome {
            Ok(r) => r,
            Err(e) => {
                // The connection failed under the conversation: keep what arrived before.
                driver.drain().await?;
                match driver.violations.try_recv() {
                    Ok(v) => Err(v.into()),
                    Err(_) => Err(Failure::Closed(e.message.chars().take(300).collect())),
                }
            }
        }
    }

    /// The run's error for `failure`, with what the process says about it.
    async fn explain(&self, failure: Failure, child: &mut Interactive, secrets: &[String]) -> AgentError {
        match failure {
            Failure::Cancelled => AgentError::Cancelled,
            Failure::Idle => AgentError::Timeout(format!(
                "the agent sent nothing for {} s",
                self.settings.idle_timeout.as_secs_f32().round() as u64
            )),
            Failure::Journal(e) => AgentError::Journal(e),
            Failure::Closed(detail) => match exit_report(child, EXIT_GRACE, secrets).await {
                Some(report) => AgentError::upstream("acp_failed", report),
                None => AgentError::upstream(
                    "acp_protocol_error",
                    format!("the agent closed its connection but kept running ({detail})"),
                ),
            },
            Failure::Protocol(m) => AgentError::upstream("acp_protocol_error", m),
            Failure::LineTooLong(m) => AgentError::upstream("acp_line_too_long", m),
            // The agent's own answer first (e.g. `-32000 Authentication required`); what its
            // process said on the way out, when it said anything.
            Failure::Agent(m) => {
                let m = redact(&m, secrets);
                match exit_details(child, Duration::from_millis(300), secrets).await {
                    Some((status, last)) if !status.success() || !last.is_empty() => {
                        AgentError::upstream("acp_failed", format!("{m}; {}", report_of(status, &last)))
                    }
                    _ => AgentError::upstream("acp_failed", m),
                }
            }
        }
    }
}

/// `"<exit status>; <last stderr lines>"` once the process has ended (within `grace`).
async fn exit_report(child: &mut Interactive, grace: Duration, secrets: &[String]) -> Option<String> {
    let (status, last) = exit_details(child, grace, secrets).await?;
    Some(report_of(status, &last))
}

/// The exit status and the last stderr lines (redacted) once the process has ended.
async fn exit_details(
    child: &mut Interactive,
    grace: Duration,
    secrets: &[String],
) -> Option<(std::process::ExitStatus, String)> {
    let status = child.exited_within(grace).await?;
    let tail = child.stderr_tail(STDERR_QUOTE_CHARS, EXIT_GRACE).await;
    let lines: Vec<&str> = tail.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    Some((status, redact(&lines[lines.len().saturating_sub(5)..].join(" | "), secrets)))
}

fn report_of(status: std::process::ExitStatus, last: &str) -> String {
    if last.is_empty() {
        format!("the agent process ended ({status}); it wrote nothing on stderr")
    } else {
        format!("the agent process ended ({status}); {last}")
    }
}

/// `text` without credentials, as the agent's stderr is quoted to the user: every occurrence
/// of a known secret (`secrets`: the server's and those passed to the agent, whatever their
/// length) goes, then every word that looks like one (the agent may hold a model API key we
/// do not know): an `sk-…` key or a long run of key characters mixing letters and digits
/// (tokens, not prose or paths).
fn redact(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), "[redacted]");
        }
    }
    redact_keyish(&text)
}

fn redact_keyish(text: &str) -> String {
    let looks_secret = |w: &str| {
        let w = w.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | ':' | '(' | ')' | '[' | ']'));
        let keyish = w.chars().all(|c| c.is_ascii_alphanumeric() || "-_.=+".contains(c));
        let mixed = w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_ascii_alphabetic());
        keyish && mixed && (w.len() >= 32 || (w.starts_with("sk-") && w.len() >= 12))
    };
    text.split_inclusive(char::is_whitespace)
        .map(|piece| {
            let word = piece.trim_end();
            // Punctuation after the key stays (`key sk-…: refused` → `key [redacted]: refused`).
            let key = word.trim_end_matches(['.', ',', ';', ':', ')', ']', '"', '\'']);
            if looks_secret(word) { format!("[redacted]{}", &piece[key.len()..]) } else { piece.to_string() }
        })
        .collect()
}

/// The session's working directory: empty, private to the run, removed with it.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create(run: uuid::Uuid) -> Result<Self, AgentError> {
        let path = std::env::temp_dir().join(format!("mnote-acp-{run}-{}", uuid::Uuid::new_v4().simple()));
        let mut b = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(&path).map_err(|e| AgentError::Internal(anyhow::anyhow!("the agent's working directory: {e}")))?;
        Ok(WorkDir(path))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl AgentRuntime for AcpRuntime {
    fn provider(&self) -> Provider {
        Provider::Acp
    }

    fn run<'a>(&'a self, input: &'a RunInput, env: &'a RunEnv) -> BoxFuture<'a, Result<RunOutput, AgentError>> {
        Box::pin(async move {
            let workdir = WorkDir::create(input.host_run_id)?;
            let mut child = self.spawn(&workdir.0)?;
            // The shim says how the agent is confined before the program runs: no
            // confinement (and no opt-out), no run.
            match sandbox::admit(self.settings.sandbox, child.confinement(CONFINEMENT_WAIT).await) {
                Ok(c @ sandbox::Confinement::Landlock { full: false, .. }) => {
                    tracing::warn!(confinement = %c, "ACP agent confined by an older Landlock: reading is, some writes not")
                }
                Ok(confinement) => tracing::debug!(%confinement, "ACP agent confined"),
                Err(e) => {
                    child.kill().await;
                    return Err(e);
                }
            }
            let result = match self.converse(&mut child, &workdir.0, input, env).await {
                Ok(done) => Ok(done),
                Err(failure) => {
                    // The run's MCP token is a secret too (an agent may echo its configuration).
                    let mut secrets = self.secrets.clone();
                    secrets.extend(env.mcp.as_ref().map(|m| m.token.expose().to_string()));
                    Err(self.explain(failure, &mut child, &secrets).await)
                }
            };
            // However the turn ended, the agent does not outlive it.
            child.kill().await;
            drop(workdir);
            let done = result?;
            let mut answer = env.tools.link_citations(&done.text).await;
            if let Some(note) = done.note {
                answer.push_str(&format!("\n\n_({note})_"));
            }
            Ok(RunOutput { answer, provider_run_id: Some(done.session_id), claim: super::verdict::Claim::None })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_stderr_keeps_prose_and_paths_but_not_keys() {
        let line = "openai.AuthenticationError: bad key sk-proj-abc123XYZ (token=9f8e7d6c5b4a39281706f5e4d3c2b1a0ffee) \
                    File \"/usr/lib/python3.11/site-packages/agent/main.py\", line 42";
        let out = redact(line, &[]);
        assert!(out.contains("openai.AuthenticationError: bad key [redacted] "), "{out}");
        assert!(!out.contains("sk-proj") && !out.contains("9f8e7d6c"), "{out}");
        assert!(out.contains("/usr/lib/python3.11/site-packages/agent/main.py"), "{out}");
        assert!(out.contains("line 42"), "{out}");
        let out = redact("with key sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c: connection refused", &[]);
        assert_eq!(out, "with key [redacted]: connection refused", "the punctuation after a key stays");
    }

    #[test]
    fn quoted_stderr_never_shows_a_known_secret_however_short() {
        // Short, or prose-like: the word heuristics alone let these through.
        let secrets = vec!["hunter2-pass".to_string(), "k9".to_string(), "plain words".to_string()];
        let line = "auth failed with key=hunter2-pass (k9); header: plain words; done";
        let out = redact(line, &secrets);
        assert_eq!(out, "auth failed with key=[redacted] ([redacted]); header: [redacted]; done");
        assert_eq!(redact(line, &[]), line, "nothing here looks like a key by itself");
    }
}
