//! The run journal (issue #13): idempotent creation under concurrent retries, resuming with
//! `afterSeq` and `Last-Event-ID` without duplicates or gaps, terminal reconciliation, lease
//! expiry → `interrupted` → resume as a child run, cancel, two app instances serving one
//! run's stream, appends surviving the database dropping every connection, and isolation of
//! runs between users and tenants.

use std::{net::SocketAddr, time::Duration};

use futures_util::StreamExt;
use mnote::{
    ai::AgentId,
    ai::RunPreferencesSnapshot,
    db::{Scope, TenantTx},
    journal::Receipt,
    journal::{
        ContextRefs, Event, EventSource, reconcile,
        sink::EventSink,
        store::{self, Created, NewRun},
    },
    state::AppState,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

/// A run created directly in the journal (no executor picks it up: its lease names a worker
/// that does not exist), for driving the journal by hand.
pub(crate) async fn manual_run(app: &TestApp, tenant: Uuid, user: Uuid, session: &str) -> Uuid {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::User(user)).await.unwrap();
    let request = format!("manual-{}", Uuid::new_v4().simple());
    let created = store::create(
        &mut tx,
        &NewRun {
            tenant_id: tenant,
            actor_id: user,
            request_id: &request,
            session_id: session,
            agent_id: AgentId::Hermes,
            provider: mnote::ai::Provider::Builtin,
            provider_note: None,
            prompt: "what is in my notes?",
            context_refs: &ContextRefs::default(),
            target_snapshot_hash: "t",
            capability_snapshot_hash: "c",
            preferences: &RunPreferencesSnapshot::empty(),
            parent_run_id: None,
            resume_request_id: None,
            lease_owner: "manual-worker",
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    match created {
        Created::New(r) => r.id,
        _ => panic!("a fresh request id created nothing"),
    }
}

pub(crate) async fn append(app: &TestApp, tenant: Uuid, run: Uuid, events: Vec<Event>) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let batch: Vec<_> = events.into_iter().map(|e| (EventSource::Agent(AgentId::Hermes), e)).collect();
    store::append(&mut tx, tenant, run, &batch).await.unwrap();
    tx.commit().await.unwrap();
}

pub(crate) async fn finish_completed(app: &TestApp, tenant: Uuid, run: Uuid, answer: &str) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let receipt = Receipt::empty();
    let done = store::finish(&mut tx, tenant, run, store::Ending::Completed { answer, receipt: &receipt }).await.unwrap();
    assert!(done);
    tx.commit().await.unwrap();
}

/// One statement on `run` as the tenant's background scope (RLS applies even to the owner).
pub(crate) async fn as_system(app: &TestApp, tenant: Uuid, sql: &str, run: Uuid) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let n = sqlx::query(sql).bind(run).execute(&mut *tx).await.unwrap().rows_affected();
    assert_eq!(n, 1, "{sql}");
    tx.commit().await.unwrap();
}

pub(crate) fn delta(t: &str) -> Event {
    Event::MessageDelta { text: t.into() }
}

pub(crate) fn seqs(page: &Value) -> Vec<i64> {
    page["items"].as_array().unwrap().iter().map(|e| e["seq"].as_i64().unwrap()).collect()
}

/// Poll the run until it is no longer live (bounded).
pub(crate) async fn settle(c: &Client, run: &str) -> Value {
    for _ in 0..400 {
        let (st, v) = c.get_json(&format!("/api/page-ai/runs/{run}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        if !matches!(v["status"].as_str(), Some("pending" | "running")) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} did not end");
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub(crate) struct Sse {
    pub(crate) id: i64,
    pub(crate) kind: String,
    pub(crate) data: Value,
}

/// An open SSE response, parsed incrementally.
pub(crate) struct SseReader {
    pub(crate) body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    pub(crate) buf: String,
}

impl SseReader {
    pub(crate) async fn open(c: &Client, path: &str, last_event_id: Option<i64>) -> SseReader {
        let mut req = c.req(reqwest::Method::GET, path).header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        SseReader { body: Box::pin(resp.bytes_stream()), buf: String::new() }
    }

    /// The next event (`None` when the stream ended). Comments (keep-alives) are skipped.
    pub(crate) async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut kind, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        kind = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if let Some(id) = id {
                    return Some(Sse { id, kind, data: serde_json::from_str(&data).unwrap() });
                }
                continue;
            }
            match tokio::time::timeout(Duration::from_secs(30), self.body.next()).await {
                Ok(Some(Ok(b))) => self.buf.push_str(&String::from_utf8_lossy(&b)),
                Ok(_) => return None,
                Err(_) => panic!("no SSE data for 30 s"),
            }
        }
    }
}

#[tokio::test]
pub(crate) async fn the_same_request_id_creates_one_run_even_when_retries_race() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let body = json!({"requestId": "req-race-1", "sessionId": "s1", "agentId": "hermes", "prompt": "hello there"});
    let tries = futures_util::future::join_all((0..8).map(|_| c.post_json("/api/page-ai/runs", body.clone()))).await;
    let created = tries.iter().filter(|(st, _)| *st == StatusCode::CREATED).count();
    let again = tries.iter().filter(|(st, _)| *st == StatusCode::OK).count();
    assert_eq!((created, again), (1, 7), "{tries:?}");
    let ids: std::collections::HashSet<&str> = tries.iter().map(|(_, v)| v["hostRunId"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let run = ids.into_iter().next().unwrap().to_string();
    let (_, v) = tries[0].clone();
    assert_eq!(v["schema"], "mnote.ai_run.v1");
    assert_eq!(v["provider"], "builtin", "nothing configured: {v}");
    assert_eq!(v["providerNote"], "not_configured");
    settle(&c, &run).await;
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=0")).await;
    let created_events = page["items"].as_array().unwrap().iter().filter(|e| e["kind"] == "run.created").count();
    assert_eq!(created_events, 1, "{page}");
    // A later retry: still the same run, still one run.created.
    let (st, v) = c.post_json("/api/page-ai/runs", body.clone()).await;
    assert_eq!((st, v["hostRunId"].as_str()), (StatusCode::OK, Some(run.as_str())));
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
    let n: i64 = sqlx::query_scalar("select count(*) from ai_run").fetch_one(&mut *tx).await.unwrap();
    assert_eq!(n, 1);
    drop(tx);

    // The same request id from another user of the tenant is a conflict, and reveals nothing.
    let other = app.add_user(s.tenant_id, "member@acme.test", "member").await;
    let m = app.api(s.tenant_id, other).await;
    let (st, v) = m.post_json("/api/page-ai/runs", body).await;
    assert_eq!((st, error_code(&v)), (StatusCode::CONFLICT, "conflict"), "{v}");
    assert!(v.get("hostRunId").is_none());
}

#[tokio::test]
pub(crate) async fn bad_run_requests_get_field_errors() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    for (body, field) in [
        (json!({"requestId": "", "sessionId": "s", "agentId": "hermes", "prompt": "x"}), "requestId"),
        (json!({"requestId": "r 1", "sessionId": "s", "agentId": "hermes", "prompt": "x"}), "requestId"),
        (json!({"requestId": "r1", "sessionId": "s", "agentId": "gpt-9", "prompt": "x"}), "agentId"),
        (json!({"requestId": "r1", "sessionId": "s", "agentId": "hermes", "prompt": "   "}), "prompt"),
        (
            json!({"requestId": "r1", "sessionId": "s", "agentId": "hermes", "prompt": "x", "contextRefs": {"kbIds": [Uuid::new_v4()]}}),
            "contextRefs.kbIds",
        ),
        (
            json!({"requestId": "r1", "sessionId": "s", "agentId": "hermes", "prompt": "x", "parentRunId": Uuid::new_v4()}),
            "resumeRequestId",
        ),
    ] {
        let (st, v) = c.post_json("/api/page-ai/runs", body.clone()).await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {v}");
        assert!(v["error"]["fields"].get(field).is_some(), "{body}: {v}");
    }
    let (st, v) = c.get_json(&format!("/api/page-ai/runs/{}", Uuid::new_v4())).await;
    assert_eq!((st, error_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (st, _) = c.get_json("/api/page-ai/runs/not-a-uuid").await;
    assert!(st.is_client_error());
}

#[tokio::test]
pub(crate) async fn events_resume_after_seq_and_last_event_id_without_duplicates_or_gaps() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let run = manual_run(&app, s.tenant_id, s.user_id, "s1").await;
    append(&app, s.tenant_id, run, (1..=5).map(|i| delta(&format!("part{i} "))).collect()).await;

    // JSON pages: strictly after the cursor, consecutive.
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=0")).await;
    assert_eq!(seqs(&page), vec![1, 2, 3, 4, 5, 6], "run.created + 5 deltas: {page}");
    assert_eq!(page["items"][0]["kind"], "run.created");
    assert_eq!(page["items"][0]["schema"], "mnote.ai_run_event.v1");
    assert_eq!(page["ended"], false);
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=4")).await;
    assert_eq!(seqs(&page), vec![5, 6]);
    assert_eq!(page["lastSeq"], 6);

    // SSE: read three, drop the connection, resume with Last-Event-ID.
    let path = format!("/api/page-ai/runs/{run}/events");
    let mut sse = SseReader::open(&c, &path, None).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(sse.next().await.unwrap());
    }
    drop(sse);
    let last = got.last().unwrap().id;
    append(&app, s.tenant_id, run, vec![delta("late ")]).await;
    let mut sse = SseReader::open(&c, &format!("{path}?afterSeq=1"), Some(last)).await; // the header wins
    // Live: appended while the stream is open.
    let writer = {
        let pool = app.pool.clone();
        let tenant = s.tenant_id;
        tokio::spawn(async move {
            let sink = EventSink::db(pool.clone(), tenant, run, EventSource::Agent(AgentId::Hermes));
            for i in 0..3 {
                sink.delta(&format!("live{i} ")).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            sink.flush().await.unwrap();
            let mut tx = TenantTx::begin(&pool, tenant, Scope::System).await.unwrap();
            let receipt = Receipt::empty();
            store::finish(&mut tx, tenant, run, store::Ending::Completed { answer: "done", receipt: &receipt }).await.unwrap();
            tx.commit().await.unwrap();
        })
    };
    while let Some(e) = sse.next().await {
        got.push(e);
    }
    writer.await.unwrap();
    let ids: Vec<i64> = got.iter().map(|e| e.id).collect();
    let expected: Vec<i64> = (1..=ids.len() as i64).collect();
    assert_eq!(ids, expected, "every seq once, in order");
    let last = got.last().unwrap();
    assert_eq!((last.kind.as_str(), &last.data["payload"]["answer"]), ("run.completed", &json!("done")));
    let text: String =
        got.iter().filter(|e| e.kind == "message.delta").map(|e| e.data["payload"]["text"].as_str().unwrap()).collect();
    assert!(text.starts_with("part1 part2 part3 part4 part5 late live0 "), "{text}");
    assert!(text.contains("live2"), "{text}");

    // After the end, a reconnect from the ending event's id (or past it, or `afterSeq` there)
    // is 204 No Content, which stops a standard EventSource client; from before it, the rest
    // of the events, then the end. The JSON page says ended.
    for (query, header) in [("", Some(last.id)), ("", Some(last.id + 5)), (&*format!("?afterSeq={}", last.id), None)] {
        let mut req = c.req(reqwest::Method::GET, &format!("{path}{query}")).header("accept", "text/event-stream");
        if let Some(id) = header {
            req = req.header("last-event-id", id.to_string());
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{query} {header:?}");
        assert!(r.bytes().await.unwrap().is_empty());
    }
    let mut sse = SseReader::open(&c, &path, Some(last.id - 1)).await;
    assert_eq!(sse.next().await.map(|e| e.id), Some(last.id));
    assert!(sse.next().await.is_none());
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq={}", last.id)).await;
    assert_eq!((seqs(&page).len(), &page["ended"], &page["status"]), (0, &json!(true), &json!("completed")));
}

/// The run's status changes to `failed` behind the journal's back (an older writer, a manual
/// fix): no event, no wake-up.
pub(crate) async fn fail_behind_the_journals_back(app: &TestApp, tenant: Uuid, run: Uuid) {
    as_system(
        app,
        tenant,
        "update ai_run set status = 'failed', error_code = 'llm_unavailable', error_message = 'gone' where id = $1",
        run,
    )
    .await;
}

#[tokio::test]
pub(crate) async fn a_terminal_status_without_its_event_gets_one_supplied() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let run = manual_run(&app, s.tenant_id, s.user_id, "s1").await;
    append(&app, s.tenant_id, run, vec![delta("partial")]).await;
    fail_behind_the_journals_back(&app, s.tenant_id, run).await;
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=0")).await;
    let items = page["items"].as_array().unwrap();
    let last = items.last().unwrap();
    assert_eq!(last["kind"], "run.failed", "{page}");
    assert_eq!(
        (last["seq"].as_i64(), &last["payload"]["code"], &last["payload"]["reconciled"]),
        (Some(3), &json!("llm_unavailable"), &json!(true))
    );
    assert_eq!(page["ended"], true);
    let mut sse = SseReader::open(&c, &format!("/api/page-ai/runs/{run}/events"), Some(2)).await;
    let e = sse.next().await.unwrap();
    assert_eq!((e.id, e.kind.as_str()), (3, "run.failed"));
    assert!(sse.next().await.is_none(), "the stream ends after the supplied ending");
    // Reconnecting from the supplied ending's id: 204, as after a stored ending.
    let r = c
        .req(reqwest::Method::GET, &format!("/api/page-ai/runs/{run}/events"))
        .header("accept", "text/event-stream")
        .header("last-event-id", "3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    // Nothing was stored: the journal still ends at seq 2.
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
    let n: i64 =
        sqlx::query_scalar("select max(seq) from ai_run_event where run_id = $1").bind(run).fetch_one(&mut *tx).await.unwrap();
    assert_eq!(n, 2);
    drop(tx);
}

/// An open, quiet stream re-reads by itself: an ending that reached the database without a
/// wake-up (no event, no NOTIFY) still arrives. The access re-checks (every 5 s here) wake
/// the stream more often than its 15-s idle re-read, and each wake-up used to put that re-read
/// off again, so such a stream never ended (seen as a browser run stuck at "running").
#[tokio::test]
pub(crate) async fn an_open_stream_gets_an_ending_that_came_without_a_wake_up() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let run = manual_run(&app, s.tenant_id, s.user_id, "s1").await;
    append(&app, s.tenant_id, run, vec![delta("partial")]).await;
    let mut sse = SseReader::open(&c, &format!("/api/page-ai/runs/{run}/events"), Some(2)).await;
    // Let the stream make its first read and go quiet (its re-checks keep running).
    tokio::time::sleep(Duration::from_secs(2)).await;
    fail_behind_the_journals_back(&app, s.tenant_id, run).await;
    let e = tokio::time::timeout(Duration::from_secs(90), sse.next())
        .await
        .expect("the quiet stream never re-read: the ending did not arrive")
        .expect("the stream ended without the ending");
    assert_eq!((e.id, e.kind.as_str()), (3, "run.failed"));
    assert!(sse.next().await.is_none(), "the stream ends after the ending");
}

#[tokio::test]
pub(crate) async fn a_lost_worker_interrupts_the_run_and_a_resume_continues_it_once() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let run = manual_run(&app, s.tenant_id, s.user_id, "sess-r").await;
    {
        let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
        assert!(store::claim(&mut tx, run, "manual-worker").await.unwrap());
        tx.commit().await.unwrap();
    }
    append(&app, s.tenant_id, run, vec![delta("The answer so far")]).await;
    // Still leased: the reconciler leaves it alone.
    assert!(reconcile::once(&app.pool).await.unwrap().is_empty());
    // The worker dies: its lease runs out.
    as_system(&app, s.tenant_id, "update ai_run set lease_expires_at = now() - interval '1 minute' where id = $1", run).await;
    assert_eq!(reconcile::once(&app.pool).await.unwrap(), vec![run]);
    assert!(reconcile::once(&app.pool).await.unwrap().is_empty(), "once only");
    let (_, v) = c.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((&v["status"], &v["statusReason"]), (&json!("interrupted"), &json!("worker_lost")), "{v}");
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=0")).await;
    assert_eq!(page["items"].as_array().unwrap().last().unwrap()["kind"], "run.interrupted");
    assert_eq!(page["ended"], true);

    // The session's active run is the interrupted one, offered for resuming.
    let (_, a) = c.get_json("/api/page-ai/sessions/sess-r/active-run").await;
    assert_eq!((&a["run"]["hostRunId"], &a["resumable"]), (&json!(run), &json!(true)), "{a}");

    // Resume: one child per resumeRequestId, even with a fresh requestId on the retry.
    let resume = |req: &str| {
        json!({"requestId": req, "sessionId": "sess-r", "agentId": "hermes", "prompt": "what is in my notes?",
               "parentRunId": run, "resumeRequestId": "resume-1"})
    };
    let (st, child) = c.post_json("/api/page-ai/runs", resume("req-child-1")).await;
    assert_eq!(st, StatusCode::CREATED, "{child}");
    assert_eq!(child["parentRunId"], json!(run));
    let (st, again) = c.post_json("/api/page-ai/runs", resume("req-child-2")).await;
    assert_eq!((st, &again["hostRunId"]), (StatusCode::OK, &child["hostRunId"]), "{again}");
    let child_id = child["hostRunId"].as_str().unwrap();
    let done = settle(&c, child_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    // The interrupted parent is no longer the session's active run.
    let (_, a) = c.get_json("/api/page-ai/sessions/sess-r/active-run").await;
    assert!(a["run"].is_null(), "{a}");
    let (_, h) = c.get_json("/api/page-ai/sessions/sess-r/runs").await;
    assert_eq!(h["items"].as_array().unwrap().len(), 2, "{h}");
    // A live parent cannot be resumed.
    let live = manual_run(&app, s.tenant_id, s.user_id, "sess-r").await;
    let (st, v) = c
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "req-x", "sessionId": "sess-r", "agentId": "hermes", "prompt": "q", "parentRunId": live, "resumeRequestId": "r2"}),
        )
        .await;
    assert_eq!((st, error_code(&v)), (StatusCode::CONFLICT, "conflict"), "{v}");
}

#[tokio::test]
pub(crate) async fn cancel_ends_a_waiting_run_at_once_and_asks_a_running_one_to_stop() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let pending = manual_run(&app, s.tenant_id, s.user_id, "s").await;
    let (st, v) = c.post_json(&format!("/api/page-ai/runs/{pending}/cancel"), json!({})).await;
    assert_eq!((st, &v["cancel"], &v["run"]["status"]), (StatusCode::OK, &json!("cancelled"), &json!("cancelled")), "{v}");
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{pending}/events?afterSeq=0")).await;
    assert_eq!(page["items"].as_array().unwrap().last().unwrap()["kind"], "run.cancelled");
    let (_, v) = c.post_json(&format!("/api/page-ai/runs/{pending}/cancel"), json!({})).await;
    assert_eq!(v["cancel"], "already_ended");

    // A running run: its worker is told through NOTIFY (any replica) and by its heartbeat.
    let running = manual_run(&app, s.tenant_id, s.user_id, "s").await;
    {
        let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
        assert!(store::claim(&mut tx, running, "manual-worker").await.unwrap());
        tx.commit().await.unwrap();
    }
    let state = AppState::new(app.pool.clone(), app.config.clone());
    let mut wake = state.run_events.subscribe();
    tokio::time::sleep(Duration::from_millis(300)).await; // the relay's LISTEN is up
    let (_, v) = c.post_json(&format!("/api/page-ai/runs/{running}/cancel"), json!({})).await;
    assert_eq!((&v["cancel"], &v["run"]["status"]), (&json!("requested"), &json!("running")), "{v}");
    let want = format!("{}:{running}:cancel", s.tenant_id);
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), wake.recv()).await.expect("a cancel notification").unwrap();
        if m == want {
            break;
        }
    }
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
    assert_eq!(store::heartbeat(&mut tx, running, "manual-worker").await.unwrap(), store::Beat::CancelRequested);
    assert_eq!(store::heartbeat(&mut tx, running, "someone-else").await.unwrap(), store::Beat::Lost);
    tx.commit().await.unwrap();
}

/// A second server process on the same database (another replica).
pub(crate) async fn second_instance(app: &TestApp) -> (String, AppState) {
    let state = AppState::new(app.pool.clone(), app.config.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = mnote::startup::build_router(state.clone());
    tokio::spawn(async move {
        axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
    });
    (format!("http://{addr}"), state)
}

#[tokio::test]
pub(crate) async fn a_run_written_through_one_instance_streams_from_another() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let (base_b, state_b) = second_instance(&app).await;
    let mut c = app.api(s.tenant_id, s.user_id).await;
    c.base = base_b;
    let mut wake = state_b.run_events.subscribe();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Created and written through instance A's API and pool.
    let a = app.api(s.tenant_id, s.user_id).await;
    let run = manual_run(&app, s.tenant_id, s.user_id, "s").await;
    // B's one listener relays A's appends (NOTIFY), which is what wakes B's streams.
    append(&app, s.tenant_id, run, vec![delta("one ")]).await;
    let want = format!("{}:{run}:2", s.tenant_id);
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), wake.recv()).await.expect("a notification on B").unwrap();
        if m == want {
            break;
        }
    }
    let mut sse = SseReader::open(&c, &format!("/api/page-ai/runs/{run}/events"), None).await;
    let mut got = vec![sse.next().await.unwrap(), sse.next().await.unwrap()];
    for i in 0..3 {
        append(&app, s.tenant_id, run, vec![delta(&format!("more{i} "))]).await;
        let e = sse.next().await.unwrap();
        assert_eq!(e.data["payload"]["text"], format!("more{i} "));
        got.push(e);
    }
    finish_completed(&app, s.tenant_id, run, "one more0 more1 more2").await;
    while let Some(e) = sse.next().await {
        got.push(e);
    }
    let ids: Vec<i64> = got.iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![1, 2, 3, 4, 5, 6]);
    // A's view agrees.
    let (_, v) = a.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((&v["status"], &v["lastSeq"]), (&json!("completed"), &json!(6)));
}

#[tokio::test]
pub(crate) async fn appends_survive_the_database_dropping_every_connection() {
    // A Postgres restart as the app sees it: every backend of its database is terminated
    // (57P01). The whole cluster is shared with the other tests running now, so it is not
    // restarted itself.
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let run = manual_run(&app, s.tenant_id, s.user_id, "s").await;
    let sink = EventSink::db(app.pool.clone(), s.tenant_id, run, EventSource::Agent(AgentId::Hermes));
    let mut acknowledged = Vec::new();
    for i in 0..30 {
        if i % 10 == 5 {
            let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url()).await.unwrap();
            let killed: Vec<bool> = sqlx::query_scalar(
                "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()",
            )
            .bind(&app.db_name)
            .fetch_all(&mut admin)
            .await
            .unwrap();
            assert!(!killed.is_empty());
        }
        let text = format!("t{i} ");
        sink.emit(EventSource::Agent(AgentId::Hermes), delta(&text)).await.unwrap();
        acknowledged.push(text);
    }
    let c = app.api(s.tenant_id, s.user_id).await;
    let (_, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=1")).await;
    let texts: Vec<String> =
        page["items"].as_array().unwrap().iter().map(|e| e["payload"]["text"].as_str().unwrap().to_string()).collect();
    assert_eq!(texts, acknowledged, "every acknowledged event is there, once, in order");
    assert_eq!(seqs(&page), (2..=31).collect::<Vec<i64>>());
}

#[tokio::test]
pub(crate) async fn runs_are_private_to_their_user_admins_and_other_tenants_see_nothing() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let alice = app.add_user(s.tenant_id, "alice@acme.test", "member").await;
    let bob = app.add_user(s.tenant_id, "bob@acme.test", "member").await;
    let other = app.bootstrap("other", "owner@other.test").await;
    let run = manual_run(&app, s.tenant_id, alice, "sa").await;
    let (a, b, owner, stranger) = (
        app.api(s.tenant_id, alice).await,
        app.api(s.tenant_id, bob).await,
        app.api(s.tenant_id, s.user_id).await,
        app.api(other.tenant_id, other.user_id).await,
    );
    let path = format!("/api/page-ai/runs/{run}");
    assert_eq!(a.get_json(&path).await.0, StatusCode::OK);
    // Not even the team's owner: a run quotes whatever its actor reads, private KBs included.
    for (who, c) in [("bob", &b), ("the team's owner", &owner), ("another tenant", &stranger)] {
        assert_eq!(c.get_json(&path).await.0, StatusCode::NOT_FOUND, "{who}");
        assert_eq!(c.get_json(&format!("{path}/events?afterSeq=0")).await.0, StatusCode::NOT_FOUND, "{who}");
        let r =
            c.req(reqwest::Method::GET, &format!("{path}/events")).header("accept", "text/event-stream").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{who}");
        assert_eq!(c.post_json(&format!("{path}/cancel"), json!({})).await.0, StatusCode::NOT_FOUND, "{who}");
        let (_, act) = c.get_json("/api/page-ai/sessions/sa/active-run").await;
        assert!(act["run"].is_null(), "{who}: {act}");
    }
    // Under RLS directly: Bob's transaction sees neither the run nor its events.
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::User(bob)).await.unwrap();
    let n: i64 = sqlx::query_scalar("select (select count(*) from ai_run) + (select count(*) from ai_run_event)")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(n, 0);
    // Nor can Bob write an event into Alice's run.
    let r = store::append(&mut tx, s.tenant_id, run, &[(EventSource::Mnote, delta("forged"))]).await;
    assert!(r.is_err(), "Bob appended to Alice's run");
    drop(tx);
}

/// A stored receipt, preference snapshot or event that does not read as its type is an error
/// with a code, never "no citations", "no preferences" or a skipped event.
#[tokio::test]
async fn an_unreadable_receipt_preferences_or_event_is_an_error_with_a_code() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let run = manual_run(&app, s.tenant_id, s.user_id, "s-unreadable").await;
    finish_completed(&app, s.tenant_id, run, "an answer").await;
    let (st, v) = c.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((st, v["receipt"]["schema"].as_str()), (StatusCode::OK, Some("mnote.agent_run_receipt.v1")), "{v}");
    let (st, page) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=0")).await;
    assert_eq!(st, StatusCode::OK);
    let kinds: Vec<&str> = page["items"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run.created", "run.completed"], "{page}");
    assert_eq!(page["items"][1]["payload"]["citationsTotal"], 0, "{page}");

    let corrupt = |sql: &'static str| {
        // As the tables' owner: the app role may not rewrite the journal.
        let pool = app.owner_pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("select set_config('app.tenant_id', $1, true), set_config('app.scope', 'system', true)")
                .bind(s.tenant_id.to_string())
                .execute(&mut *tx)
                .await
                .unwrap();
            let n = sqlx::query(sql).bind(run).execute(&mut *tx).await.unwrap().rows_affected();
            assert_eq!(n, 1, "{sql}");
            tx.commit().await.unwrap();
        }
    };
    corrupt("update ai_run set receipt = jsonb_set(receipt, '{total}', '\"two\"') where id = $1").await;
    let (st, v) = c.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((st, error_code(&v)), (StatusCode::INTERNAL_SERVER_ERROR, "stored_value_unreadable"), "{v}");
    corrupt("update ai_run set receipt = null where id = $1").await;
    let (st, v) = c.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((st, &v["receipt"]), (StatusCode::OK, &Value::Null), "{v}");
    assert_eq!(v["preferences"]["schema"], "mnote.ai_run_preferences.v1", "{v}");
    corrupt("update ai_run set preferences = '{}' where id = $1").await;
    let (st, v) = c.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((st, error_code(&v)), (StatusCode::INTERNAL_SERVER_ERROR, "stored_value_unreadable"), "{v}");
    corrupt(
        "update ai_run set preferences = '{\"schema\": \"mnote.ai_run_preferences.v1\", \"hash\": \"h\", \"values\": {}}'
         where id = $1",
    )
    .await;
    corrupt("update ai_run_event set payload = '{\"answer\": 1}' where run_id = $1 and kind = 'run.completed'").await;
    let (st, v) = c.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq=0")).await;
    assert_eq!((st, error_code(&v)), (StatusCode::INTERNAL_SERVER_ERROR, "stored_value_unreadable"), "{v}");
}
