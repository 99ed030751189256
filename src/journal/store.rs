//! The journal's SQL. Every function takes a tenant transaction (or its connection and
//! tenant): RLS decides what the caller sees (a member their own runs, admins the tenant's,
//! background work all); every statement also names the tenant (`tenant_id = $n`, issue 29).

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{
    ai::{AgentId, Provider, RunPreferencesSnapshot},
    db::TenantTx,
};

use super::{
    event::{
        ContextRefs, ErrorBody, Event, EventSource, RunCompleted, RunCreated, RunFailed, RunStatus, RunStopped, ToolCompleted,
    },
    receipt::Receipt,
};

/// Most events one read (a JSON page, an SSE read) returns.
pub const PAGE: i64 = 500;

/// How long a worker's lease lasts without a heartbeat by default.
pub const LEASE: std::time::Duration = crate::config::DEFAULT_RUN_LEASE;

/// How long a worker's lease lasts without a heartbeat in this process (MNOTE_RUN_LEASE_SECS).
pub fn lease() -> std::time::Duration {
    crate::config::run_lease()
}

#[derive(Debug, Clone)]
pub struct RunRow {
    pub tenant_id: Uuid,
    pub id: Uuid,
    pub actor_id: Uuid,
    pub request_id: String,
    pub session_id: String,
    pub agent_id: AgentId,
    pub provider: Provider,
    pub provider_run_id: Option<String>,
    pub provider_note: Option<String>,
    pub status: RunStatus,
    pub status_reason: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub prompt: String,
    /// Read as the type it was written from (`jsonb`).
    pub context_refs: sqlx::types::Json<ContextRefs>,
    pub target_snapshot_hash: String,
    pub capability_snapshot_hash: String,
    /// Read as the type it was written from (`jsonb`): one that does not parse is an error.
    pub preferences: sqlx::types::Json<RunPreferencesSnapshot>,
    pub parent_run_id: Option<Uuid>,
    pub resume_request_id: Option<String>,
    pub answer: Option<String>,
    /// Read as the type it was written from (`jsonb`): one that does not parse is an error.
    pub receipt: Option<sqlx::types::Json<Receipt>>,
    pub next_seq: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<chrono::DateTime<chrono::Utc>>,
    pub cancel_requested_at: Option<chrono::DateTime<chrono::Utc>>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub started_at: Option<chrono::DateTime<chrono::Utc>>,
    pub ended_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl RunRow {
    pub fn context(&self) -> ContextRefs {
        self.context_refs.0.clone()
    }

    pub fn last_seq(&self) -> i64 {
        self.next_seq - 1
    }

    /// `mnote.ai_run.v1`
    pub fn view(&self) -> RunView {
        RunView {
            schema: "mnote.ai_run.v1",
            host_run_id: self.id,
            request_id: self.request_id.clone(),
            agent_id: self.agent_id,
            provider: self.provider,
            provider_run_id: self.provider_run_id.clone(),
            provider_note: self.provider_note.clone(),
            session_id: self.session_id.clone(),
            actor_id: self.actor_id,
            tenant_id: self.tenant_id,
            status: self.status,
            status_reason: self.status_reason.clone(),
            error: self
                .error_code
                .as_ref()
                .map(|c| ErrorBody { code: c.clone(), message: self.error_message.clone().unwrap_or_default() }),
            prompt: self.prompt.clone(),
            context_refs: self.context(),
            target_snapshot_hash: self.target_snapshot_hash.clone(),
            capability_snapshot_hash: self.capability_snapshot_hash.clone(),
            preferences: self.preferences.0.clone(),
            parent_run_id: self.parent_run_id,
            resume_request_id: self.resume_request_id.clone(),
            answer: self.answer.clone(),
            receipt: self.receipt.as_ref().map(|r| r.0.clone()),
            last_seq: self.last_seq(),
            lease_expires_at: self.lease_expires_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
            started_at: self.started_at,
            ended_at: self.ended_at,
        }
    }
}

/// A run as the API returns it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub schema: &'static str,
    pub host_run_id: Uuid,
    pub request_id: String,
    pub agent_id: AgentId,
    pub provider: Provider,
    pub provider_run_id: Option<String>,
    pub provider_note: Option<String>,
    pub session_id: String,
    pub actor_id: Uuid,
    pub tenant_id: Uuid,
    pub status: RunStatus,
    pub status_reason: Option<String>,
    pub error: Option<ErrorBody>,
    pub prompt: String,
    pub context_refs: ContextRefs,
    pub target_snapshot_hash: String,
    pub capability_snapshot_hash: String,
    pub preferences: RunPreferencesSnapshot,
    pub parent_run_id: Option<Uuid>,
    pub resume_request_id: Option<String>,
    pub answer: Option<String>,
    pub receipt: Option<Receipt>,
    pub last_seq: i64,
    pub lease_expires_at: Option<chrono::DateTime<chrono::Utc>>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub started_at: Option<chrono::DateTime<chrono::Utc>>,
    pub ended_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// An event as stored: `kind` + `payload` read back as the typed [`Event`] (one that does
/// not parse is an error).
#[derive(Debug, Clone)]
pub struct EventRow {
    pub run_id: Uuid,
    pub seq: i64,
    pub source: String,
    pub event: sqlx::types::Json<Event>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// `mnote.ai_run_event.v1`: `kind` and `payload` are the typed [`Event`].
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub schema: &'static str,
    pub host_run_id: Uuid,
    pub seq: i64,
    pub source: String,
    #[serde(flatten)]
    pub event: Event,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl EventRow {
    pub fn view(&self) -> EventView {
        EventView {
            schema: "mnote.ai_run_event.v1",
            host_run_id: self.run_id,
            seq: self.seq,
            source: self.source.clone(),
            event: self.event.0.clone(),
            created_at: self.created_at,
        }
    }
}

/// A run to create.
pub struct NewRun<'a> {
    pub tenant_id: Uuid,
    pub actor_id: Uuid,
    pub request_id: &'a str,
    pub session_id: &'a str,
    pub agent_id: AgentId,
    pub provider: Provider,
    pub provider_note: Option<&'a str>,
    pub prompt: &'a str,
    pub context_refs: &'a ContextRefs,
    pub target_snapshot_hash: &'a str,
    pub capability_snapshot_hash: &'a str,
    pub preferences: &'a RunPreferencesSnapshot,
    pub parent_run_id: Option<Uuid>,
    pub resume_request_id: Option<&'a str>,
    /// The process that will run it (its lease starts now).
    pub lease_owner: &'a str,
}

/// What [`create`] did.
pub enum Created {
    New(RunRow),
    /// The same request again (same user): the run it created the first time.
    Existing(RunRow),
    /// The request id (or resume id) belongs to another user's run.
    Taken,
}

/// Create the run and its `run.created` event, or find the one this request created before.
/// Concurrent retries are decided by the unique constraints (`ON CONFLICT DO NOTHING`: the
/// loser waits for the winner's commit, then finds its row).
pub async fn create(conn: &mut PgConnection, new: &NewRun<'_>) -> sqlx::Result<Created> {
    let id = Uuid::new_v4();
    let lease = lease().as_secs_f64();
    let context_refs = sqlx::types::Json(new.context_refs);
    let inserted = sqlx::query_as!(
        RunRow,
        r#"insert into ai_run (tenant_id, id, actor_id, request_id, session_id, agent_id, provider, provider_note, status,
             prompt, context_refs, target_snapshot_hash, capability_snapshot_hash, preferences, parent_run_id,
             resume_request_id, lease_owner, lease_expires_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10, $11, $12, $13, $14, $15, $16,
             now() + make_interval(secs => $17))
         on conflict do nothing
         returning tenant_id, id, actor_id, request_id, session_id, agent_id as "agent_id: _", provider as "provider: _", provider_run_id, provider_note,
             status as "status: _", status_reason, error_code, error_message, prompt, context_refs as "context_refs: _", target_snapshot_hash,
             capability_snapshot_hash, preferences as "preferences: _", parent_run_id, resume_request_id, answer, receipt as "receipt: _", next_seq,
             lease_owner, lease_expires_at as "lease_expires_at: _", cancel_requested_at as "cancel_requested_at: _",
             created_at as "created_at: _", updated_at as "updated_at: _", started_at as "started_at: _",
             ended_at as "ended_at: _""#,
        new.tenant_id,
        id,
        new.actor_id,
        new.request_id,
        new.session_id,
        new.agent_id as _,
        new.provider as _,
        new.provider_note,
        new.prompt,
        context_refs as _,
        new.target_snapshot_hash,
        new.capability_snapshot_hash,
        sqlx::types::Json(new.preferences) as _,
        new.parent_run_id,
        new.resume_request_id,
        new.lease_owner,
        lease,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(run) = inserted {
        let created = Event::RunCreated(RunCreated {
            agent_id: run.agent_id,
            provider: run.provider,
            provider_note: run.provider_note.clone(),
            parent_run_id: run.parent_run_id,
            prompt: run.prompt.clone(),
        });
        append(conn, run.tenant_id, run.id, &[(EventSource::Mnote, created)]).await?;
        return Ok(Created::New(get_in(conn, run.tenant_id, run.id).await?.unwrap_or(run)));
    }
    // Which constraint held: the request id, or (for a resume) the parent's resume id. A
    // missing parent or resume id (null) matches no row: then only the request id counts.
    let existing = sqlx::query_as!(
        RunRow,
        r#"select tenant_id, id, actor_id, request_id, session_id, agent_id as "agent_id: _", provider as "provider: _", provider_run_id, provider_note,
             status as "status: _", status_reason, error_code, error_message, prompt, context_refs as "context_refs: _", target_snapshot_hash,
             capability_snapshot_hash, preferences as "preferences: _", parent_run_id, resume_request_id, answer, receipt as "receipt: _", next_seq,
             lease_owner, lease_expires_at as "lease_expires_at: _", cancel_requested_at as "cancel_requested_at: _",
             created_at as "created_at: _", updated_at as "updated_at: _", started_at as "started_at: _",
             ended_at as "ended_at: _"
         from ai_run where tenant_id = $4
             and ((parent_run_id = $1 and resume_request_id = $2) or request_id = $3)
         order by (request_id = $3) desc limit 1"#,
        new.parent_run_id,
        new.resume_request_id,
        new.request_id,
        new.tenant_id,
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match existing {
        Some(r) if r.actor_id == new.actor_id => Created::Existing(r),
        // Another user's run (an admin can see it; a member cannot, and gets here too).
        _ => Created::Taken,
    })
}

/// Runs `actor` has pending or running, other than the one of `request_id` (a retry of a
/// request is not a new run). Takes a transaction-scoped lock on the actor's runs first, so
/// concurrent creations count one after the other: call it in the transaction that creates.
pub async fn live_runs_of(tx: &mut TenantTx, actor: Uuid, request_id: &str) -> sqlx::Result<i64> {
    let tenant = tx.tenant_id();
    sqlx::query!("select pg_advisory_xact_lock(hashtextextended('mnote.ai_run:' || $1::uuid::text, 0))", actor)
        .execute(&mut **tx)
        .await?;
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from ai_run where tenant_id = $3 and actor_id = $1 and status in ('pending', 'running')
         and request_id <> $2"#,
        actor,
        request_id,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

/// Whether `actor` ever started a run in this tenant (the getting-started step).
pub async fn any_run_of(tx: &mut TenantTx, actor: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(r#"select exists(select 1 from ai_run where tenant_id = $1 and actor_id = $2) as "e!""#, tenant, actor)
        .fetch_one(&mut **tx)
        .await
}

pub async fn get(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<RunRow>> {
    let tenant = tx.tenant_id();
    get_in(tx, tenant, id).await
}

/// [`get`] on a connection of a transaction in `tenant`.
pub async fn get_in(conn: &mut PgConnection, tenant: Uuid, id: Uuid) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as!(
        RunRow,
        r#"select tenant_id, id, actor_id, request_id, session_id, agent_id as "agent_id: _", provider as "provider: _", provider_run_id, provider_note,
             status as "status: _", status_reason, error_code, error_message, prompt, context_refs as "context_refs: _", target_snapshot_hash,
             capability_snapshot_hash, preferences as "preferences: _", parent_run_id, resume_request_id, answer, receipt as "receipt: _", next_seq,
             lease_owner, lease_expires_at as "lease_expires_at: _", cancel_requested_at as "cancel_requested_at: _",
             created_at as "created_at: _", updated_at as "updated_at: _", started_at as "started_at: _",
             ended_at as "ended_at: _"
         from ai_run where tenant_id = $2 and id = $1"#,
        id,
        tenant,
    )
    .fetch_optional(conn)
    .await
}

/// The same, locked for update (status changes).
async fn get_locked(conn: &mut PgConnection, tenant: Uuid, id: Uuid) -> sqlx::Result<Option<RunRow>> {
    sqlx::query_as!(
        RunRow,
        r#"select tenant_id, id, actor_id, request_id, session_id, agent_id as "agent_id: _", provider as "provider: _", provider_run_id, provider_note,
             status as "status: _", status_reason, error_code, error_message, prompt, context_refs as "context_refs: _", target_snapshot_hash,
             capability_snapshot_hash, preferences as "preferences: _", parent_run_id, resume_request_id, answer, receipt as "receipt: _", next_seq,
             lease_owner, lease_expires_at as "lease_expires_at: _", cancel_requested_at as "cancel_requested_at: _",
             created_at as "created_at: _", updated_at as "updated_at: _", started_at as "started_at: _",
             ended_at as "ended_at: _"
         from ai_run where tenant_id = $2 and id = $1 for update"#,
        id,
        tenant,
    )
    .fetch_optional(conn)
    .await
}

/// Events with `seq > after`, oldest first.
pub async fn events_after(tx: &mut TenantTx, run: Uuid, after: i64, limit: i64) -> sqlx::Result<Vec<EventRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        EventRow,
        r#"select run_id, seq, source, jsonb_build_object('kind', kind, 'payload', payload) as "event!: _",
             created_at as "created_at: _" from ai_run_event
         where tenant_id = $4 and run_id = $1 and seq > $2 order by seq limit $3"#,
        run,
        after,
        limit,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// The seq of the run's ending event (terminal or `run.interrupted`), if it has one.
pub async fn ending_seq(tx: &mut TenantTx, run: Uuid) -> sqlx::Result<Option<i64>> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        "select min(seq) from ai_run_event where tenant_id = $2 and run_id = $1
         and kind in ('run.completed', 'run.failed', 'run.cancelled', 'run.interrupted')",
        run,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

/// Append events with the next seqs (taken under the run row's lock: no gaps, no duplicates)
/// and wake every listener (`NOTIFY mnote_run '<tenant>:<run>:<last seq>'`, delivered at commit).
pub async fn append(conn: &mut PgConnection, tenant: Uuid, run: Uuid, events: &[(EventSource, Event)]) -> sqlx::Result<i64> {
    append_where(conn, tenant, run, events, false).await
}

/// [`append`] only while the run is `running` (what a tool call over a run-scoped MCP token
/// writes: nothing lands after the run's ending event); `RowNotFound` once it is not.
pub async fn append_if_running(
    conn: &mut PgConnection,
    tenant: Uuid,
    run: Uuid,
    events: &[(EventSource, Event)],
) -> sqlx::Result<i64> {
    append_where(conn, tenant, run, events, true).await
}

async fn append_where(
    conn: &mut PgConnection,
    tenant: Uuid,
    run: Uuid,
    events: &[(EventSource, Event)],
    only_running: bool,
) -> sqlx::Result<i64> {
    if events.is_empty() {
        return Ok(0);
    }
    let n = events.len() as i64;
    let first = sqlx::query_scalar!(
        r#"update ai_run set next_seq = next_seq + $2 where tenant_id = $4 and id = $1 and (not $3 or status = 'running')
         returning next_seq - $2 as "first!""#,
        run,
        n,
        only_running,
        tenant,
    )
    .fetch_one(&mut *conn)
    .await?;
    let (mut seqs, mut kinds, mut sources, mut payloads) = (vec![], vec![], vec![], vec![]);
    for (i, (source, e)) in events.iter().enumerate() {
        let (kind, payload) = e.split();
        seqs.push(first + i as i64);
        kinds.push(kind);
        sources.push(source.as_str().to_string());
        payloads.push(payload);
    }
    sqlx::query!(
        "insert into ai_run_event (tenant_id, run_id, seq, kind, source, payload)
         select $1, $2, s, k, src, p from unnest($3::bigint[], $4::text[], $5::text[], $6::jsonb[]) as t(s, k, src, p)",
        tenant,
        run,
        &seqs,
        &kinds,
        &sources,
        &payloads,
    )
    .execute(&mut *conn)
    .await?;
    let last = first + n - 1;
    sqlx::query!("select pg_notify('mnote_run', $1)", format!("{tenant}:{run}:{last}")).execute(&mut *conn).await?;
    Ok(last)
}

/// Take the run for `owner`: `pending` → `running`, lease renewed. `false` when it is no
/// longer pending (cancelled meanwhile, or another worker has it).
pub async fn claim(tx: &mut TenantTx, run: Uuid, owner: &str) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    let n = sqlx::query!(
        "update ai_run set status = 'running', started_at = now(), lease_owner = $2,
             lease_expires_at = now() + make_interval(secs => $3)
         where tenant_id = $4 and id = $1 and status = 'pending'",
        run,
        owner,
        lease().as_secs_f64(),
        tenant,
    )
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    Held,
    CancelRequested,
    /// The lease is gone (expired and reconciled, or the run ended).
    Lost,
}

/// Renew `owner`'s lease on a live run (pending ones wait for a slot).
pub async fn heartbeat(tx: &mut TenantTx, run: Uuid, owner: &str) -> sqlx::Result<Beat> {
    let tenant = tx.tenant_id();
    let cancel_requested = sqlx::query_scalar!(
        r#"update ai_run set lease_expires_at = now() + make_interval(secs => $3)
         where tenant_id = $4 and id = $1 and lease_owner = $2 and status in ('pending', 'running')
         returning cancel_requested_at is not null as "cancel_requested!""#,
        run,
        owner,
        lease().as_secs_f64(),
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(match cancel_requested {
        Some(true) => Beat::CancelRequested,
        Some(false) => Beat::Held,
        None => Beat::Lost,
    })
}

pub async fn set_provider_run_id(tx: &mut TenantTx, run: Uuid, provider_run_id: &str) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!("update ai_run set provider_run_id = $2 where tenant_id = $3 and id = $1", run, provider_run_id, tenant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// How a run ended.
pub enum Ending<'a> {
    /// `run.completed` carries the receipt's totals and verdict.
    Completed {
        answer: &'a str,
        receipt: &'a Receipt,
    },
    Failed {
        code: &'a str,
        message: &'a str,
        answer: Option<&'a str>,
        receipt: Option<&'a Receipt>,
    },
    Cancelled {
        reason: &'a str,
        answer: Option<&'a str>,
        receipt: Option<&'a Receipt>,
    },
}

/// Set the terminal status and append the terminal event, in one transaction (the caller's).
/// `false` when the run had already ended (or was interrupted, for anything but a cancel).
pub async fn finish(conn: &mut PgConnection, tenant: Uuid, run: Uuid, ending: Ending<'_>) -> sqlx::Result<bool> {
    let Some(row) = get_locked(conn, tenant, run).await? else { return Ok(false) };
    // An interrupted run (its worker was declared lost) can still be cancelled, but a worker
    // that comes back late does not complete or fail it.
    let late_worker = row.status == RunStatus::Interrupted && !matches!(ending, Ending::Cancelled { .. });
    if row.status.is_terminal() || late_worker {
        return Ok(false);
    }
    let (status, code, message, answer, receipt, event) = match ending {
        Ending::Completed { answer, receipt } => (
            RunStatus::Completed,
            None,
            None,
            Some(answer),
            Some(receipt),
            Event::RunCompleted(RunCompleted::of(answer, receipt)),
        ),
        Ending::Failed { code, message, answer, receipt } => (
            RunStatus::Failed,
            Some(code),
            Some(message),
            answer,
            receipt,
            Event::RunFailed(RunFailed { code: code.into(), message: message.into(), reconciled: false }),
        ),
        Ending::Cancelled { reason, answer, receipt } => {
            (RunStatus::Cancelled, None, None, answer, receipt, Event::RunCancelled(RunStopped::new(reason)))
        }
    };
    let reason = match &event {
        Event::RunCancelled(s) => Some(s.reason.clone()),
        _ => None,
    };
    sqlx::query!(
        "update ai_run set status = $2, error_code = $3, error_message = $4, answer = coalesce($5, answer),
             receipt = coalesce($6, receipt), status_reason = coalesce($7, status_reason), ended_at = now(),
             lease_owner = null, lease_expires_at = null, mcp_token_hash = null
         where tenant_id = $8 and id = $1",
        run,
        status.as_str(),
        code,
        message,
        answer,
        receipt.map(sqlx::types::Json) as _,
        reason,
        tenant,
    )
    .execute(&mut *conn)
    .await?;
    append(conn, tenant, run, &[(EventSource::Mnote, event)]).await?;
    Ok(true)
}

/// Give the running `run` its run-scoped MCP token (its SHA-256 only); `false` when the run
/// is not running (any more). The run's end clears it ([`finish`], [`reconcile_expired`],
/// [`release_owned`]).
pub async fn set_mcp_token(tx: &mut TenantTx, run: Uuid, token_hash: &str) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    let r = sqlx::query!(
        "update ai_run set mcp_token_hash = $2 where tenant_id = $3 and id = $1 and status = 'running'",
        run,
        token_hash,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// The running run whose MCP token has this SHA-256 (in the transaction's tenant).
pub async fn run_of_mcp_token(tx: &mut TenantTx, token_hash: &str) -> sqlx::Result<Option<RunRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        RunRow,
        r#"select tenant_id, id, actor_id, request_id, session_id, agent_id as "agent_id: _", provider as "provider: _", provider_run_id, provider_note,
             status as "status: _", status_reason, error_code, error_message, prompt, context_refs as "context_refs: _", target_snapshot_hash,
             capability_snapshot_hash, preferences as "preferences: _", parent_run_id, resume_request_id, answer, receipt as "receipt: _", next_seq,
             lease_owner, lease_expires_at as "lease_expires_at: _", cancel_requested_at as "cancel_requested_at: _",
             created_at as "created_at: _", updated_at as "updated_at: _", started_at as "started_at: _",
             ended_at as "ended_at: _"
         from ai_run where tenant_id = $2 and mcp_token_hash = $1 and status = 'running'"#,
        token_hash,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// The results of the run's own tool calls as its journal holds them (`tool.completed`, source
/// `tool`), in order: whichever process served them (the run's executor, or `/mcp` with the
/// run's token on any replica).
pub async fn tool_results(tx: &mut TenantTx, run: Uuid) -> sqlx::Result<Vec<ToolCompleted>> {
    let tenant = tx.tenant_id();
    let payloads = sqlx::query_scalar!(
        "select payload from ai_run_event where tenant_id = $2 and run_id = $1 and kind = 'tool.completed'
         and source = 'tool' order by seq",
        run,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(payloads.into_iter().filter_map(|p| serde_json::from_value(p).ok()).collect())
}

/// What a cancel request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Not running anywhere (pending, interrupted): cancelled now.
    Cancelled,
    /// Running: its worker is told (`NOTIFY`) and cancels at once.
    Requested,
    AlreadyEnded,
}

pub async fn request_cancel(conn: &mut PgConnection, tenant: Uuid, run: Uuid) -> sqlx::Result<CancelOutcome> {
    let Some(row) = get_locked(conn, tenant, run).await? else { return Ok(CancelOutcome::AlreadyEnded) };
    match row.status {
        s if s.is_terminal() => Ok(CancelOutcome::AlreadyEnded),
        RunStatus::Running => {
            sqlx::query!(
                "update ai_run set cancel_requested_at = coalesce(cancel_requested_at, now()) where tenant_id = $2 and id = $1",
                run,
                tenant,
            )
            .execute(&mut *conn)
            .await?;
            sqlx::query!("select pg_notify('mnote_run', $1)", format!("{tenant}:{run}:cancel")).execute(&mut *conn).await?;
            Ok(CancelOutcome::Requested)
        }
        _ => {
            finish(conn, tenant, run, Ending::Cancelled { reason: "user", answer: None, receipt: None }).await?;
            Ok(CancelOutcome::Cancelled)
        }
    }
}

/// Live runs whose lease expired become `interrupted` (`worker_lost`) with a `run.interrupted`
/// event. Returns their ids.
pub async fn reconcile_expired(conn: &mut PgConnection, tenant: Uuid) -> sqlx::Result<Vec<Uuid>> {
    let ids = sqlx::query_scalar!(
        "update ai_run set status = 'interrupted', status_reason = 'worker_lost', lease_owner = null,
             lease_expires_at = null, mcp_token_hash = null
         where tenant_id = $1 and status in ('pending', 'running') and lease_expires_at < now() returning id",
        tenant,
    )
    .fetch_all(&mut *conn)
    .await?;
    for id in &ids {
        append(conn, tenant, *id, &[(EventSource::Mnote, Event::RunInterrupted(RunStopped::new("worker_lost")))]).await?;
    }
    Ok(ids)
}

/// Live runs held by `owner` (a process shutting down) become `interrupted` (`worker_lost`)
/// at once instead of when their leases run out.
pub async fn release_owned(conn: &mut PgConnection, tenant: Uuid, owner: &str) -> sqlx::Result<Vec<Uuid>> {
    let ids = sqlx::query_scalar!(
        "update ai_run set status = 'interrupted', status_reason = 'worker_lost', lease_owner = null,
             lease_expires_at = null, mcp_token_hash = null
         where tenant_id = $2 and status in ('pending', 'running') and lease_owner = $1 returning id",
        owner,
        tenant,
    )
    .fetch_all(&mut *conn)
    .await?;
    for id in &ids {
        append(conn, tenant, *id, &[(EventSource::Mnote, Event::RunInterrupted(RunStopped::new("worker_lost")))]).await?;
    }
    Ok(ids)
}

/// The newest run of `session` (of this actor) that has not ended: pending, running, or
/// interrupted without a resumed child.
pub async fn active_run(tx: &mut TenantTx, actor: Uuid, session: &str) -> sqlx::Result<Option<RunRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        RunRow,
        r#"select tenant_id, id, actor_id, request_id, session_id, agent_id as "agent_id: _", provider as "provider: _", provider_run_id, provider_note,
             status as "status: _", status_reason, error_code, error_message, prompt, context_refs as "context_refs: _", target_snapshot_hash,
             capability_snapshot_hash, preferences as "preferences: _", parent_run_id, resume_request_id, answer, receipt as "receipt: _", next_seq,
             lease_owner, lease_expires_at as "lease_expires_at: _", cancel_requested_at as "cancel_requested_at: _",
             created_at as "created_at: _", updated_at as "updated_at: _", started_at as "started_at: _",
             ended_at as "ended_at: _"
         from ai_run r where tenant_id = $3 and actor_id = $1 and session_id = $2
             and status in ('pending', 'running', 'interrupted')
             and not exists (select 1 from ai_run c where c.tenant_id = r.tenant_id and c.parent_run_id = r.id)
         order by created_at desc limit 1"#,
        actor,
        session,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// The question and final answer of each completed run of `session` (of this actor) created
/// before `before`, newest first: the earlier turns of a conversation.
pub async fn earlier_answers(
    tx: &mut TenantTx,
    actor: Uuid,
    session: &str,
    before: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> sqlx::Result<Vec<(String, String)>> {
    let tenant = tx.tenant_id();
    let rows = sqlx::query!(
        r#"select prompt, answer as "answer!" from ai_run
         where tenant_id = $5 and actor_id = $1 and session_id = $2 and created_at < $3
             and status = 'completed' and answer is not null
         order by created_at desc limit $4"#,
        actor,
        session,
        // chrono's timestamptz (the macros would check it against `time`'s)
        before as _,
        limit,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows.into_iter().map(|r| (r.prompt, r.answer)).collect())
}

/// A session's runs, newest first.
pub async fn session_runs(tx: &mut TenantTx, actor: Uuid, session: &str, limit: i64) -> sqlx::Result<Vec<RunRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        RunRow,
        r#"select tenant_id, id, actor_id, request_id, session_id, agent_id as "agent_id: _", provider as "provider: _", provider_run_id, provider_note,
             status as "status: _", status_reason, error_code, error_message, prompt, context_refs as "context_refs: _", target_snapshot_hash,
             capability_snapshot_hash, preferences as "preferences: _", parent_run_id, resume_request_id, answer, receipt as "receipt: _", next_seq,
             lease_owner, lease_expires_at as "lease_expires_at: _", cancel_requested_at as "cancel_requested_at: _",
             created_at as "created_at: _", updated_at as "updated_at: _", started_at as "started_at: _",
             ended_at as "ended_at: _"
         from ai_run where tenant_id = $4 and actor_id = $1 and session_id = $2
         order by created_at desc limit $3"#,
        actor,
        session,
        limit,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}
