//! Drives one run from `pending` to its end in this process: waits for a slot (renewing its
//! lease meanwhile), claims the run, resolves the agent's runtime, runs it with the journal
//! sink and the tool box, watches for cancellation (a `NOTIFY` from any replica, or the flag
//! its heartbeat reads), verifies the answer's citations, and writes the terminal status with
//! its terminal event in one transaction. A lost lease (the reconciler already marked the run
//! `interrupted`) stops the run without writing anything more.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{
    AgentError, McpAccess, Provider, RunEnv, RunInput, Turn, TurnRole, config,
    offer::{self, For},
    preferences::RunPreferences,
    tools::{ToolBox, ToolCallRecord},
    verdict::Claim,
    verify,
};
use crate::{
    auth::{Auth, Via, tokens},
    config::SecretString,
    db::{Scope, TenantTx},
    journal::{
        sink::{EventSink, retrying},
        store::{self, Beat, Ending, RunRow},
    },
    state::AppState,
};

/// How long a cancelled runtime gets to stop on its own before it is dropped (its child
/// process killed).
const CANCEL_GRACE: Duration = Duration::from_secs(3);

/// Execute `run` in the background.
pub fn spawn(state: AppState, tenant: Uuid, run: Uuid) {
    tokio::spawn(async move {
        if let Err(e) = execute(&state, tenant, run).await {
            tracing::error!(run = %run, "run executor: {e:#}");
        }
    });
}

/// Why the runtime was stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    Cancelled,
    LeaseLost,
}

async fn system_tx(state: &AppState, tenant: Uuid) -> sqlx::Result<TenantTx> {
    TenantTx::begin(&state.pool, tenant, Scope::System).await
}

async fn execute(state: &AppState, tenant: Uuid, run_id: Uuid) -> anyhow::Result<()> {
    let owner = state.instance_id.to_string();
    let stop = CancellationToken::new();
    let reason = Arc::new(std::sync::Mutex::new(None::<Stop>));
    let beats = tokio::spawn(heartbeat(state.clone(), tenant, run_id, owner.clone(), stop.clone(), reason.clone()));
    let _beats = AbortOnDrop(beats);
    let _slot = tokio::select! {
        p = state.run_slots.clone().acquire_owned() => p?,
        _ = stop.cancelled() => {
            let why = *reason.lock().unwrap_or_else(|e| e.into_inner());
            if why == Some(Stop::LeaseLost) {
                return Ok(()); // the reconciler owns the run now
            }
            return write_end(state, tenant, run_id, "", None, End::Cancelled).await;
        }
    };
    let Some((run, actor)) = claim_run(state, tenant, run_id, &owner).await? else { return Ok(()) };
    let agent = run.agent_id;
    // The preferences frozen at creation tune the runtime; the tenant's capability switches
    // are read now (a capability switched off since is not offered any more).
    let prefs = RunPreferences::from_snapshot(&run.preferences);
    let resolved = {
        let mut tx = actor.tx(state).await?;
        let r = config::resolve(&state.config, &mut tx, tenant, agent, &prefs.tuning(agent)).await;
        tx.commit().await?;
        match r {
            Ok(r) => r,
            Err(e) => return fail(state, &run, e.code(), &e.to_string()).await,
        }
    };
    let offer = match offer::offer(state, &actor, &run.context(), For::Run { agent, preferences: &prefs }).await {
        Ok(o) => o,
        Err(e) => return fail(state, &run, e.code(), "the run's tools could not be prepared; try again").await,
    };
    let (history, transcript) = transcript_of(state, &actor, &run).await?;
    let events = EventSink::db_limited(
        state.pool.clone(),
        tenant,
        run_id,
        agent.into(),
        crate::journal::sink::COALESCE,
        crate::journal::sink::Limits::of(&state.config.agents),
    );
    let tools = Arc::new(ToolBox::for_run(state.clone(), actor.clone(), run.context(), events.clone(), offer.0));
    // An ACP agent may take our tools over MCP: a token for this run only, while it runs.
    let mcp = if resolved.runtime.provider() == Provider::Acp && !tools.offered().is_empty() {
        match mint_mcp_access(state, tenant, run_id).await {
            Ok(access) => Some(access),
            Err(e) => {
                tracing::error!(run = %run_id, "the run's MCP token could not be stored: {e:#}");
                return fail(state, &run, "journal_unavailable", "the run could not be prepared; try again").await;
            }
        }
    } else {
        None
    };
    let env = RunEnv { events: events.clone(), tools: tools.clone(), cancel: stop.clone(), mcp };
    let input = RunInput {
        host_run_id: run_id,
        agent,
        prompt: run.prompt.clone(),
        context: run.context(),
        transcript,
        history,
        preferences: prefs.for_agent(agent),
    };

    let cancel_watch = tokio::spawn(watch_cancel(state.clone(), tenant, run_id, stop.clone(), reason.clone()));
    let _cancel_watch = AbortOnDrop(cancel_watch);
    let outcome = run_runtime(state, resolved.runtime.clone(), &input, &env, &stop).await;
    let stopped = *reason.lock().unwrap_or_else(|e| e.into_inner());
    if stopped == Some(Stop::LeaseLost) {
        return Ok(()); // the reconciler owns the run now
    }
    let _ = events.flush().await;
    let (answer, end) = match outcome {
        Ok(out) => {
            if let Some(p) = &out.provider_run_id {
                let mut tx = system_tx(state, tenant).await?;
                store::set_provider_run_id(&mut tx, run_id, p).await?;
                tx.commit().await?;
            }
            let end = if stopped == Some(Stop::Cancelled) { End::Cancelled } else { End::Completed(out.claim) };
            (out.answer, end)
        }
        Err(AgentError::Cancelled) => (events.streamed().await, End::Cancelled),
        Err(e) => {
            let (code, message) = (e.code(), e.to_string());
            tracing::warn!(run = %run_id, code, "run failed: {message}");
            (events.streamed().await, End::Failed { code, message })
        }
    };
    let calls = recorded_calls(state, tenant, run_id, tools.calls()).await;
    // A verdict only for a run that could search the evidence (a chat without documents is
    // neither answered nor not found); a run that did not complete claims nothing.
    let claim = tools.offers::<super::tools::Search>().then(|| match &end {
        End::Completed(c) => c.clone(),
        End::Cancelled | End::Failed { .. } => Claim::None,
    });
    let receipt = verify::check(state, &actor, tools.scope(), &answer, calls, claim).await;
    write_end(state, tenant, run_id, &answer, Some(&receipt), end).await
}

/// Claim the run and find its actor: `None` when it is not this process's to run (cancelled
/// before it started, or claimed elsewhere), or when its actor is no longer a member (then the
/// run has failed with `forbidden`).
async fn claim_run(state: &AppState, tenant: Uuid, run_id: Uuid, owner: &str) -> anyhow::Result<Option<(RunRow, Auth)>> {
    let mut tx = system_tx(state, tenant).await?;
    if !store::claim(&mut tx, run_id, owner).await? {
        return Ok(None);
    }
    let run = store::get(&mut tx, run_id).await?.ok_or_else(|| anyhow::anyhow!("run {run_id} vanished"))?;
    let member = crate::auth::directory::member(&mut tx, run.actor_id).await?;
    tx.commit().await?;
    let Some(member) = member else {
        fail(state, &run, "forbidden", "the user who started this run is no longer a member").await?;
        return Ok(None);
    };
    let actor = Auth { user_id: run.actor_id, tenant_id: tenant, role: member.role, email: member.email, via: Via::Session };
    Ok(Some((run, actor)))
}

/// Run the runtime until it answers, is cancelled (given [`CANCEL_GRACE`] to stop on its own)
/// or times out; an answer over the limit is a failure.
async fn run_runtime(
    state: &AppState,
    runtime: Arc<dyn super::AgentRuntime>,
    input: &RunInput,
    env: &RunEnv,
    stop: &CancellationToken,
) -> Result<super::RunOutput, AgentError> {
    let mut fut = runtime.run(input, env);
    let outcome = tokio::select! {
        r = &mut fut => r,
        _ = stop.cancelled() => {
            // The runtime sees the token too; give it a moment to stop cleanly.
            match tokio::time::timeout(CANCEL_GRACE, &mut fut).await {
                Ok(Ok(out)) => Ok(out),
                _ => Err(AgentError::Cancelled),
            }
        }
        _ = tokio::time::sleep(state.config.agents.run_timeout) => {
            Err(AgentError::Timeout(format!("the run took longer than {} s", state.config.agents.run_timeout.as_secs())))
        }
    };
    drop(fut);
    // The final answer (the streamed text with its citation links) is bounded too.
    let cap = state.config.agents.max_answer_bytes.saturating_mul(2);
    outcome.and_then(|out| {
        if out.answer.len() > cap {
            Err(AgentError::Journal(crate::journal::sink::JournalError::Limit {
                code: "answer_too_large",
                message: format!("the answer of {} bytes is over the limit", out.answer.len()),
            }))
        } else {
            Ok(out)
        }
    })
}

/// How a run ends: completed with what its agent claims, cancelled, or failed.
enum End {
    Completed(Claim),
    Cancelled,
    Failed { code: &'static str, message: String },
}

/// The one ending path: the terminal status and event in one transaction (retried across a
/// database restart), with the answer — for a run that did not complete, what it streamed,
/// when anything — and the receipt.
async fn write_end(
    state: &AppState,
    tenant: Uuid,
    run: Uuid,
    answer: &str,
    receipt: Option<&verify::Receipt>,
    end: End,
) -> anyhow::Result<()> {
    let partial = (!answer.is_empty()).then_some(answer);
    retrying(|| async {
        let ending = match (&end, receipt) {
            (End::Completed(_), Some(receipt)) => Ending::Completed { answer, receipt },
            (End::Completed(_), None) => {
                Ending::Failed { code: "internal", message: "the run completed without a receipt", answer: partial, receipt }
            }
            (End::Cancelled, _) => Ending::Cancelled { reason: "user", answer: partial, receipt },
            (End::Failed { code, message }, _) => Ending::Failed { code, message, answer: partial, receipt },
        };
        let mut tx = system_tx(state, tenant).await?;
        store::finish(&mut tx, tenant, run, ending).await?;
        tx.commit().await
    })
    .await?;
    Ok(())
}

/// A run-scoped MCP token for the running `run` (only its SHA-256 is stored, on the run's row;
/// the run's end clears it) and this server's own `/mcp` URL.
async fn mint_mcp_access(state: &AppState, tenant: Uuid, run: Uuid) -> anyhow::Result<McpAccess> {
    let token = tokens::generate_run(tenant);
    let hash = tokens::hash(&token);
    retrying(|| async {
        let mut tx = system_tx(state, tenant).await?;
        store::set_mcp_token(&mut tx, run, &hash).await?;
        tx.commit().await
    })
    .await?;
    Ok(McpAccess { url: format!("{}/mcp", state.config.local_base_url()), token: SecretString::new(token) })
}

/// The run's tool calls for its receipt: those its journal holds (served here or at `/mcp`
/// with the run's token, on any replica), then any served here whose `tool.completed` could
/// not be journaled.
async fn recorded_calls(state: &AppState, tenant: Uuid, run: Uuid, here: Vec<ToolCallRecord>) -> Vec<ToolCallRecord> {
    let journaled = async {
        let mut tx = system_tx(state, tenant).await?;
        let r = store::tool_results(&mut tx, run).await?;
        tx.commit().await?;
        Ok::<_, sqlx::Error>(r)
    }
    .await;
    let mut calls: Vec<ToolCallRecord> = match journaled {
        Ok(r) => r
            .into_iter()
            .map(|c| ToolCallRecord { call_id: c.call_id, name: c.name, ok: c.ok, count: c.count, evidence_ids: c.evidence_ids })
            .collect(),
        Err(e) => {
            tracing::warn!(run = %run, "the run's journaled tool calls could not be read: {e}");
            Vec::new()
        }
    };
    for c in here {
        if !calls.iter().any(|j| j.call_id == c.call_id) {
            calls.push(c);
        }
    }
    calls
}

/// A run that failed before its agent ran: no answer, no receipt.
async fn fail(state: &AppState, run: &RunRow, code: &'static str, message: &str) -> anyhow::Result<()> {
    write_end(state, run.tenant_id, run.id, "", None, End::Failed { code, message: message.to_string() }).await
}

/// Renew the lease every third of its length; a cancel request or a lost lease stops the run.
async fn heartbeat(
    state: AppState,
    tenant: Uuid,
    run: Uuid,
    owner: String,
    stop: CancellationToken,
    reason: Arc<std::sync::Mutex<Option<Stop>>>,
) {
    let mut tick = tokio::time::interval(store::lease() / 3);
    tick.tick().await;
    loop {
        tick.tick().await;
        let beat = async {
            let mut tx = system_tx(&state, tenant).await?;
            let b = store::heartbeat(&mut tx, run, &owner).await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(b)
        }
        .await;
        let why = match beat {
            Ok(Beat::Held) => continue,
            Ok(Beat::CancelRequested) => Stop::Cancelled,
            Ok(Beat::Lost) => Stop::LeaseLost,
            Err(e) => {
                tracing::warn!(run = %run, "lease renewal failed: {e}");
                continue;
            }
        };
        reason.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(why);
        stop.cancel();
        return;
    }
}

/// A `<tenant>:<run>:cancel` notification from any replica cancels the run at once.
async fn watch_cancel(
    state: AppState,
    tenant: Uuid,
    run: Uuid,
    stop: CancellationToken,
    reason: Arc<std::sync::Mutex<Option<Stop>>>,
) {
    let key = format!("{tenant}:{run}:cancel");
    let mut rx = state.run_events.subscribe();
    loop {
        match rx.recv().await {
            Ok(m) if m == key => break,
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => return,
        }
    }
    reason.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(Stop::Cancelled);
    stop.cancel();
}

/// The conversation a run continues, oldest first: the session's earlier completed turns
/// (bounded: `history`), and for a resumed run its ancestors' prompts and answers (a parent
/// that was interrupted contributes what it had streamed).
async fn transcript_of(state: &AppState, actor: &Auth, run: &RunRow) -> anyhow::Result<(Vec<Turn>, Vec<Turn>)> {
    let mut chain = Vec::new();
    let mut next = run.parent_run_id;
    let mut first = run.created_at;
    let mut tx = actor.tx(state).await?;
    while let Some(id) = next {
        if chain.len() >= 8 {
            break;
        }
        let Some(p) = store::get(&mut tx, id).await? else { break };
        first = first.min(p.created_at);
        let answer = match &p.answer {
            Some(a) => a.clone(),
            None => streamed_text(&mut tx, id).await?,
        };
        next = p.parent_run_id;
        chain.push((p.prompt.clone(), answer));
    }
    let earlier = store::earlier_answers(&mut tx, run.actor_id, &run.session_id, first, super::history::READ_LIMIT).await?;
    tx.commit().await?;
    let history = super::history::prior_turns(&earlier);
    let mut turns = Vec::new();
    for (prompt, answer) in chain.into_iter().rev() {
        turns.push(Turn { role: TurnRole::User, text: prompt });
        if !answer.is_empty() {
            turns.push(Turn { role: TurnRole::Assistant, text: answer });
        }
    }
    Ok((history, turns))
}

async fn streamed_text(tx: &mut TenantTx, run: Uuid) -> sqlx::Result<String> {
    let tenant = tx.tenant_id();
    let parts = sqlx::query_scalar!(
        r#"select payload->>'text' as "text!" from ai_run_event
         where tenant_id = $2 and run_id = $1 and kind = 'message.delta' order by seq"#,
        run,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(parts.concat())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
