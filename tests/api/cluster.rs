//! App replicas (issue 29 §1): several real `mnote serve` processes on one database
//! ([`TestCluster`]), and what a user relies on holding across them: runs (stream, resume,
//! cancel on any replica; a killed replica's runs end `interrupted`), the ingest queue (each
//! job done once, a killed replica's job taken back), search (what one replica indexed is
//! found through another, never another tenant's), the sign-in rate limit and sessions, and
//! the KB page's live status. What is per process (the MCP rate limit, run concurrency) is
//! documented in `docs/SCALING.md`, not tested as if it were shared. No timing assertions:
//! every wait is a poll with a hang guard.

use std::{collections::BTreeSet, time::Duration};

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    cluster_harness::{SseStream, TestCluster, worker_pid},
    helpers::*,
};

const OWNER: &str = "owner@acme.test";
const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\n\
The robots charge overnight in the north hall. Each robot reports its battery level every minute.\n";

/// Poll `check` every 100 ms until it returns `Some`; the hang guard fails the test with
/// `what` and the replicas' logs.
async fn until<T, F, Fut>(cl: &TestCluster, what: &str, guard: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + guard;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("{what}: not within {guard:?} (hang guard)\n{}", cl.logs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Grant `folder` (under the docs root) to all members and make a team KB; `(kb, grant)`.
async fn kb_on(cl: &TestCluster, c: &Client, folder: &str, name: &str) -> (String, String) {
    std::fs::create_dir_all(cl.app.docs.join(folder)).unwrap();
    let (st, g) = c
        .post_json("/api/grants", json!({"path": cl.app.docs_path(folder), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = c.post_json("/api/kbs", json!({"name": name})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    (kb["id"].as_str().unwrap().to_string(), g["id"].as_str().unwrap().to_string())
}

/// Register `path` (a file or folder under the docs root) in the KB through `c`.
async fn register(cl: &TestCluster, c: &Client, kb: &str, rel: &str) -> Value {
    let (st, r) = c.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": cl.app.docs_path(rel)})).await;
    assert!(st.is_success(), "{st} {r}");
    r
}

/// The KB's sources (as `c` sees them).
async fn sources(c: &Client, kb: &str) -> Vec<Value> {
    let (st, list) = c.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    list["items"].as_array().unwrap().clone()
}

/// Wait until the KB has `n` sources and all are indexed (by whichever replicas' workers).
async fn all_indexed(cl: &TestCluster, c: &Client, kb: &str, n: usize, guard: Duration) -> Vec<Value> {
    until(cl, &format!("{n} sources indexed"), guard, move || async move {
        let items = sources(c, kb).await;
        for s in &items {
            assert_ne!(s["status"], "failed", "{s}");
        }
        (items.len() == n && items.iter().all(|s| s["status"] == "indexed")).then_some(items)
    })
    .await
}

/// Rows read as background work would (the tables are under forced RLS).
async fn system_rows<T>(cl: &TestCluster, tenant: Uuid, sql: &str, bind: Option<Uuid>) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    let mut tx = TenantTx::begin(&cl.app.pool, tenant, Scope::System).await.unwrap();
    let mut q = sqlx::query_as::<_, T>(sql);
    if let Some(b) = bind {
        q = q.bind(b);
    }
    let rows = q.fetch_all(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    rows
}

// ---------------------------------------------------------------------------------------
// Runs

/// Start a `hermes` run over `kb` with `prompt` through `c`; its id.
async fn start_run(c: &Client, kb: &str, prompt: &str) -> Uuid {
    let (st, run) = c
        .post_json(
            "/api/page-ai/runs",
            json!({
                "requestId": format!("req-{}", Uuid::new_v4()),
                "sessionId": "cluster-session",
                "agentId": "hermes",
                "prompt": prompt,
                "contextRefs": {"kbIds": [kb]},
            }),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    run["hostRunId"].as_str().unwrap().parse().unwrap()
}

/// The run's `(status, lease_owner)` in the database.
async fn run_row(cl: &TestCluster, tenant: Uuid, run: Uuid) -> (String, Option<String>) {
    system_rows::<(String, Option<String>)>(cl, tenant, "select status, lease_owner from ai_run where id = $1", Some(run))
        .await
        .remove(0)
}

/// Every journal sequence number of the run, in order, straight from the table.
async fn journal_seqs(cl: &TestCluster, tenant: Uuid, run: Uuid) -> Vec<i64> {
    system_rows::<(i64,)>(cl, tenant, "select seq from ai_run_event where run_id = $1 order by seq", Some(run))
        .await
        .into_iter()
        .map(|r| r.0)
        .collect()
}

fn seq_of(e: &crate::cluster_harness::SseEvent) -> i64 {
    e.id.as_deref().and_then(|i| i.parse().ok()).unwrap_or_else(|| panic!("event without a numeric id: {e:?}"))
}

/// A run started through replica A streams through B, resumes (`Last-Event-ID`) on C, is
/// cancelled through B and stops on A (its executor there writes the end); a run on a replica
/// that is then SIGKILLed ends `interrupted` (`worker_lost`) once its lease runs out, seen
/// live through another replica; both journals are gapless.
#[tokio::test]
async fn runs_stream_resume_and_cancel_across_replicas_and_a_killed_replicas_run_ends_interrupted() {
    let mock = crate::lightrag::mock_llm();
    let root = mock.trim_end_matches("/v1").to_string();
    // A short lease (heartbeat every 5 s) so the killed replica's run is noticed soon; the
    // model may be silent for long (`[[hang]]`) without failing the run.
    let mut cl = TestCluster::start(
        3,
        &[
            ("MNOTE_AGENT_ALLOWED_URLS", &root),
            ("MNOTE_RUN_LEASE_SECS", "15"),
            ("MNOTE_AGENT_IDLE_TIMEOUT_SECS", "600"),
            ("MNOTE_MAX_RUNS_PER_USER", "2"),
        ],
    )
    .await;
    let s = cl.app.bootstrap("acme", OWNER).await;
    let token = cl.app.token(s.tenant_id, s.user_id).await;
    let (a, b, c) = (cl.with_token(0, &token), cl.with_token(1, &token), cl.with_token(2, &token));
    cl.app.write_doc("acme/handbook.md", HANDBOOK);
    let (kb, _) = kb_on(&cl, &a, "acme", "Handbook").await;
    register(&cl, &b, &kb, "acme").await;
    all_indexed(&cl, &c, &kb, 1, Duration::from_secs(120)).await;
    // The agent's key is sealed by A and opened by whichever replica runs it.
    let (st, v) = a
        .send_json(
            "PUT",
            "/api/page-ai/agents/hermes/config",
            json!({"endpointUrl": mock, "model": "scripted", "apiKey": "sk-cluster"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");

    // 1. Started through A: A runs it (it holds the lease).
    let run = start_run(&a, &kb, "Where do the robots charge? [[hang]]").await;
    let path = format!("/api/page-ai/runs/{run}/events");
    let mut on_b = SseStream::open(&b, &path, None).await;
    let mut seen = Vec::new();
    loop {
        let e = on_b.next().await.expect("B's stream ended early");
        seen.push(seq_of(&e));
        if e.kind == "message.delta" {
            break;
        }
    }
    let (status, owner) = run_row(&cl, s.tenant_id, run).await;
    assert_eq!(status, "running");
    assert!(cl.replica(0).owns_lease(owner.as_deref().unwrap()), "the run is not A's: {owner:?}");
    drop(on_b);
    // Resumed on C after the last event B delivered: the rest, nothing twice.
    let last = seen.last().unwrap().to_string();
    let mut on_c = SseStream::open(&c, &path, Some(&last)).await;
    // Cancelled through B: A's executor is told (NOTIFY) and ends the run itself (a running
    // run is only asked to stop; `cancelled` is written by the process that runs it).
    let (st, v) = b.post_json(&format!("/api/page-ai/runs/{run}/cancel"), json!({})).await;
    assert_eq!((st, v["cancel"].as_str()), (StatusCode::OK, Some("requested")), "{v}");
    let mut kinds = Vec::new();
    while let Some(e) = on_c.next().await {
        seen.push(seq_of(&e));
        kinds.push(e.kind.clone());
        if e.kind == "run.cancelled" {
            break;
        }
    }
    assert_eq!(kinds.last().map(String::as_str), Some("run.cancelled"), "{kinds:?}\n{}", cl.logs());
    let n = *seen.last().unwrap();
    assert_eq!(seen, (1..=n).collect::<Vec<i64>>(), "B then C delivered every event once, in order");
    assert_eq!(journal_seqs(&cl, s.tenant_id, run).await, (1..=n).collect::<Vec<i64>>(), "nothing after the end");
    let (_, v) = c.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((&v["status"], &v["lastSeq"]), (&json!("cancelled"), &json!(n)), "{v}");
    assert_eq!(run_row(&cl, s.tenant_id, run).await, ("cancelled".to_string(), None), "A released it");

    // 2. A run on C, then C is killed (SIGKILL: no hand-over). Watched live through A.
    let run = start_run(&c, &kb, "How often do robots report their battery? [[hang]]").await;
    let path = format!("/api/page-ai/runs/{run}/events");
    let mut on_a = SseStream::open(&a, &path, None).await;
    let mut seen = Vec::new();
    loop {
        let e = on_a.next().await.expect("A's stream ended early");
        seen.push(seq_of(&e));
        if e.kind == "message.delta" {
            break;
        }
    }
    let (_, owner) = run_row(&cl, s.tenant_id, run).await;
    assert!(cl.replica(2).owns_lease(owner.as_deref().unwrap()), "the run is not C's: {owner:?}");
    // The per-member run limit (MNOTE_MAX_RUNS_PER_USER = 2) counts the runs of every replica:
    // one live run on C, one on A, and B refuses a third.
    let on_a_too = start_run(&a, &kb, "What does Acme build? [[hang]]").await;
    let (st, e) = b
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "req-third", "sessionId": "cluster-session", "agentId": "hermes", "prompt": "A third one"}),
        )
        .await;
    assert_eq!((st, error_code(&e)), (StatusCode::TOO_MANY_REQUESTS, "too_many_runs"), "{e}");
    cl.kill(2);
    let killed = std::time::Instant::now();
    let mut interrupted = None;
    while let Some(e) = on_a.next_within(Duration::from_secs(180)).await {
        seen.push(seq_of(&e));
        if e.kind == "run.interrupted" {
            interrupted = Some(e);
            break;
        }
    }
    let e = interrupted.unwrap_or_else(|| panic!("no run.interrupted on A\n{}", cl.logs()));
    eprintln!("the killed replica's run was interrupted {:?} after the kill (lease 15 s)", killed.elapsed());
    let payload: Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(payload["payload"]["reason"], "worker_lost", "{payload}");
    let n = *seen.last().unwrap();
    assert_eq!(seen, (1..=n).collect::<Vec<i64>>(), "A delivered every event once, in order");
    assert_eq!(journal_seqs(&cl, s.tenant_id, run).await, (1..=n).collect::<Vec<i64>>(), "gapless, nothing after the end");
    let (_, v) = b.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((&v["status"], &v["statusReason"]), (&json!("interrupted"), &json!("worker_lost")), "{v}");
    // The interrupted run no longer counts: B takes the third run now.
    let third = start_run(&b, &kb, "A third one [[hang]]").await;
    for r in [third, on_a_too] {
        let (st, v) = a.post_json(&format!("/api/page-ai/runs/{r}/cancel"), json!({})).await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
}

/// A replica stopped for a rolling update (SIGTERM) exits even while clients stream from it,
/// and hands its live runs over as `interrupted` at once (the lease here is 10 minutes: the
/// reconciler cannot be what ended them); a client watching on another replica sees the end.
#[tokio::test]
async fn a_replica_stopped_with_sigterm_exits_and_hands_its_runs_over_at_once() {
    let mock = crate::lightrag::mock_llm();
    let root = mock.trim_end_matches("/v1").to_string();
    let mut cl = TestCluster::start(
        2,
        &[
            ("MNOTE_AGENT_ALLOWED_URLS", &root),
            ("MNOTE_RUN_LEASE_SECS", "600"),
            ("MNOTE_AGENT_IDLE_TIMEOUT_SECS", "600"),
            ("MNOTE_INGEST_WORKERS", "0"),
        ],
    )
    .await;
    let s = cl.app.bootstrap("acme", OWNER).await;
    let token = cl.app.token(s.tenant_id, s.user_id).await;
    let (a, b) = (cl.with_token(0, &token), cl.with_token(1, &token));
    let (st, v) = a
        .send_json(
            "PUT",
            "/api/page-ai/agents/chat_only/config",
            json!({"endpointUrl": root, "model": "scripted", "apiKey": "sk-cluster"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, run) = b
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "req-rolling", "sessionId": "s", "agentId": "chat_only", "prompt": "Say something [[hang]]"}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let run: Uuid = run["hostRunId"].as_str().unwrap().parse().unwrap();
    let path = format!("/api/page-ai/runs/{run}/events");
    // One client streams from B itself, one from A.
    let mut on_b = SseStream::open(&b, &path, None).await;
    let mut on_a = SseStream::open(&a, &path, None).await;
    let mut seen = Vec::new();
    loop {
        let e = on_a.next().await.expect("A's stream ended early");
        seen.push(seq_of(&e));
        if e.kind == "message.delta" {
            break;
        }
    }
    while on_b.next().await.is_some_and(|e| e.kind != "message.delta") {}
    let (_, owner) = run_row(&cl, s.tenant_id, run).await;
    assert!(cl.replica(1).owns_lease(owner.as_deref().unwrap()), "the run is not B's: {owner:?}");

    let status = cl.terminate(1, Duration::from_secs(120)).await;
    assert!(status.is_some(), "B did not exit on SIGTERM while a client streamed from it\n{}", cl.logs());
    let mut end = None;
    while let Some(e) = on_a.next().await {
        seen.push(seq_of(&e));
        if e.kind.starts_with("run.") && e.kind != "run.started" {
            end = Some(e.kind);
            break;
        }
    }
    assert_eq!(end.as_deref(), Some("run.interrupted"), "{}", cl.logs());
    let n = *seen.last().unwrap();
    assert_eq!(seen, (1..=n).collect::<Vec<i64>>());
    assert_eq!(journal_seqs(&cl, s.tenant_id, run).await, (1..=n).collect::<Vec<i64>>());
    let (_, v) = a.get_json(&format!("/api/page-ai/runs/{run}")).await;
    assert_eq!((&v["status"], &v["statusReason"]), (&json!("interrupted"), &json!("worker_lost")), "{v}");
}

// ---------------------------------------------------------------------------------------
// Ingest

/// Many small files registered at once are ingested by the workers of all replicas, each
/// exactly once (`FOR UPDATE SKIP LOCKED`: one job per source, one attempt, one set of
/// blocks), and more than one replica did work.
#[tokio::test]
async fn ingest_jobs_are_spread_over_replicas_and_each_done_once() {
    let cl = TestCluster::start(3, &[]).await;
    let s = cl.app.bootstrap("acme", OWNER).await;
    let token = cl.app.token(s.tenant_id, s.user_id).await;
    let a = cl.with_token(0, &token);
    const FILES: usize = 36;
    for i in 0..FILES {
        cl.app.write_doc(
            &format!("bulk/note{i:02}.md"),
            &format!("# Note {i}\n\nThe warehouse note number {i} about robots.\n\n## Details\n\nMore text for note {i}.\n"),
        );
    }
    let (kb, _) = kb_on(&cl, &a, "bulk", "Bulk").await;
    register(&cl, &a, &kb, "bulk").await;
    let items = all_indexed(&cl, &cl.with_token(1, &token), &kb, FILES, Duration::from_secs(300)).await;

    let jobs: Vec<(Uuid, String, i32, Option<String>)> =
        system_rows(&cl, s.tenant_id, "select source_id, status, attempts, worker from ingest_job", None).await;
    assert_eq!(jobs.len(), FILES, "one job per source: {jobs:?}");
    let ids: BTreeSet<Uuid> = items.iter().map(|s| s["id"].as_str().unwrap().parse().unwrap()).collect();
    assert_eq!(jobs.iter().map(|j| j.0).collect::<BTreeSet<_>>(), ids);
    let mut by_replica = vec![0usize; cl.replicas.len()];
    for (source, status, attempts, worker) in &jobs {
        assert_eq!((status.as_str(), *attempts), ("done", 1), "{source}: {worker:?}");
        let w = worker.as_deref().unwrap();
        let i = cl.replicas.iter().position(|r| r.owns_worker(w)).unwrap_or_else(|| panic!("{w}: no replica's worker"));
        by_replica[i] += 1;
    }
    eprintln!("ingest jobs done per replica: {by_replica:?}");
    assert!(by_replica.iter().filter(|n| **n > 0).count() > 1, "one replica did all the work: {by_replica:?}");
    // One set of blocks per source: every source has the same blocks (the files have the
    // same shape), each ordinal once.
    let blocks: Vec<(Uuid, i64, i64)> = system_rows(
        &cl,
        s.tenant_id,
        "select source_id, count(*), count(distinct ordinal) from evidence_block group by source_id",
        None,
    )
    .await;
    assert_eq!(blocks.len(), FILES);
    let per_source = blocks[0].1;
    assert!(per_source > 0);
    for (source, n, distinct) in &blocks {
        assert_eq!((*n, *distinct), (per_source, per_source), "{source}");
    }
}

/// A replica killed (SIGKILL) while its worker parses a document loses no job: another
/// replica that was running all along takes the job back (same host: it sees the process is
/// gone) and completes it; the document is indexed once.
#[tokio::test]
async fn a_replica_killed_mid_parse_loses_no_job() {
    // Replica 0 serves the API and ingests nothing; replica 1 is the only worker at first.
    let mut cl = TestCluster::start(0, &[]).await;
    cl.add(&[("MNOTE_INGEST_WORKERS", "0")]).await;
    cl.add(&[]).await;
    let s = cl.app.bootstrap("acme", OWNER).await;
    let token = cl.app.token(s.tenant_id, s.user_id).await;
    let api = cl.with_token(0, &token);
    std::fs::create_dir_all(cl.app.docs.join("scans")).unwrap();
    // A scanned PDF: OCR page after page, a parse that lasts.
    std::fs::copy(crate::fixtures::testdata("pdf_scanned/ocr_multipage.pdf"), cl.app.docs.join("scans/multipage.pdf")).unwrap();
    let (kb, _) = kb_on(&cl, &api, "scans", "Scans").await;
    register(&cl, &api, &kb, "scans/multipage.pdf").await;
    let (r, tenant) = (&cl, s.tenant_id);
    let source: Uuid = until(r, "the worker of replica 1 parsing", Duration::from_secs(120), move || async move {
        let rows: Vec<(Uuid, String, Option<String>, Option<String>)> = system_rows(
            r,
            tenant,
            "select j.source_id, j.status, j.worker, s.progress_phase from ingest_job j join source s on s.id = j.source_id",
            None,
        )
        .await;
        rows.into_iter()
            .find(|(_, status, w, phase)| {
                status == "running"
                    && w.as_deref().is_some_and(|w| r.replica(1).owns_worker(w))
                    && phase.as_deref() == Some("parsing")
            })
            .map(|r| r.0)
    })
    .await;
    // A second worker replica starts now (replica 1 is alive: it leaves the job alone)...
    let late = cl.add(&[]).await;
    // ... and replica 1 dies mid-parse.
    cl.kill(1);
    let killed = std::time::Instant::now();
    let (status, worker): (String, Option<String>) =
        system_rows(&cl, s.tenant_id, "select status, worker from ingest_job where source_id = $1", Some(source)).await.remove(0);
    assert_eq!(status, "running", "the parse ended before the kill: the test proves nothing");
    assert!(worker.as_deref().is_some_and(|w| cl.replica(1).owns_worker(w)));

    let items = all_indexed(&cl, &api, &kb, 1, Duration::from_secs(600)).await;
    eprintln!("the killed replica's document was indexed by another {:?} after the kill", killed.elapsed());
    assert_eq!(items[0]["id"].as_str().unwrap().parse::<Uuid>().unwrap(), source);
    let jobs: Vec<(String, i32, Option<String>)> =
        system_rows(&cl, s.tenant_id, "select status, attempts, worker from ingest_job where source_id = $1", Some(source)).await;
    assert_eq!(jobs.len(), 1, "the same job, not a new one: {jobs:?}");
    let (status, attempts, worker) = &jobs[0];
    assert_eq!((status.as_str(), *attempts), ("done", 2), "the killed attempt counted: {jobs:?}");
    assert_eq!(worker.as_deref().and_then(worker_pid), Some(cl.replica(late).pid), "completed by the other replica");
    let blocks: Vec<(i64, i64)> = system_rows(
        &cl,
        s.tenant_id,
        "select count(*), count(distinct ordinal) from evidence_block where source_id = $1",
        Some(source),
    )
    .await;
    assert!(blocks[0].0 > 0 && blocks[0].0 == blocks[0].1, "one set of blocks: {blocks:?}");
}

/// An upload received by one replica (kept in the shared data directory) is parsed by another
/// replica's worker and downloaded and rendered through it, byte for byte.
#[tokio::test]
async fn an_upload_through_one_replica_is_parsed_and_served_by_another() {
    // A takes the upload and ingests nothing; B is the only worker.
    let mut cl = TestCluster::start(0, &[]).await;
    cl.add(&[("MNOTE_INGEST_WORKERS", "0")]).await;
    cl.add(&[]).await;
    let s = cl.app.bootstrap("acme", OWNER).await;
    let token = cl.app.token(s.tenant_id, s.user_id).await;
    let (a, b) = (cl.with_token(0, &token), cl.with_token(1, &token));
    let (st, kb) = a.post_json("/api/kbs", json!({"name": "Uploads"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb = kb["id"].as_str().unwrap().to_string();
    let pdf = std::fs::read(crate::fixtures::testdata("pdf/pypdf_multilang.pdf")).unwrap();
    let form =
        reqwest::multipart::Form::new().part("file", reqwest::multipart::Part::bytes(pdf.clone()).file_name("multilang.pdf"));
    let r = a.http.post(format!("{}/api/kbs/{kb}/uploads", a.base)).bearer_auth(&token).multipart(form).send().await.unwrap();
    let (st, up) = json_of(r).await;
    assert_eq!(st, StatusCode::CREATED, "{up}");
    let id = up["items"][0]["id"].as_str().unwrap().to_string();
    let items = all_indexed(&cl, &b, &kb, 1, Duration::from_secs(180)).await;
    assert_eq!(items[0]["id"].as_str(), Some(id.as_str()));
    let jobs: Vec<(Option<String>,)> = system_rows(&cl, s.tenant_id, "select worker from ingest_job", None).await;
    assert!(jobs.iter().all(|(w,)| w.as_deref().is_some_and(|w| cl.replica(1).owns_worker(w))), "{jobs:?}");

    let r = b
        .req(reqwest::Method::GET, &format!("/sources/{id}/download"))
        .header("accept-encoding", "identity")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.bytes().await.unwrap().as_ref(), pdf.as_slice(), "B serves the bytes A received");
    let r = b.get(&format!("/sources/{id}/pages/1.png?scale=1")).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert!(r.bytes().await.unwrap().starts_with(b"\x89PNG"), "a rendered page");
}

// ---------------------------------------------------------------------------------------
// Search

async fn search(c: &Client, query: &str, mode: &str) -> Vec<Value> {
    let (st, v) = c.post_json("/api/evidence/search", json!({"query": query, "mode": mode})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["results"].as_array().unwrap().clone()
}

fn result_paths(results: &[Value]) -> BTreeSet<String> {
    results.iter().map(|r| r["source"]["resourcePath"].as_str().unwrap().to_string()).collect()
}

/// Search on B sees what was indexed through A (lexical through B's in-memory mirror, and
/// vector/hybrid through B's query-vector cache), never another tenant's blocks, and never a
/// result from before the change: search on B, index a new file through A, search on B again.
#[tokio::test]
async fn search_on_one_replica_sees_what_another_indexed_and_never_another_tenants() {
    // Both replicas embed with the local model (A's workers embed the new blocks; B embeds
    // the query and caches its vector). B ingests nothing.
    let app = spawn_app_full(|_| {}, Some(minilm())).await;
    let mut cl = TestCluster::on(app, 0, &[("MNOTE_EMBEDDER", "local")]).await;
    cl.add(&[]).await;
    cl.add(&[("MNOTE_INGEST_WORKERS", "0")]).await;
    let acme = cl.app.bootstrap("acme", OWNER).await;
    let other = cl.app.bootstrap("other", "owner@other.test").await;
    let (acme_token, other_token) =
        (cl.app.token(acme.tenant_id, acme.user_id).await, cl.app.token(other.tenant_id, other.user_id).await);
    let (a, b) = (cl.with_token(0, &acme_token), cl.with_token(1, &acme_token));
    let (other_a, other_b) = (cl.with_token(0, &other_token), cl.with_token(1, &other_token));

    cl.app.write_doc("acme/handbook.md", HANDBOOK);
    // The other tenant's document holds the very words searched for below.
    cl.app.write_doc(
        "other/pump.md",
        "# Pump manual\n\nThe quasar pump hums in the basement.\n\nRobots charge overnight next to the quasar pump.\n",
    );
    let (kb, _) = kb_on(&cl, &a, "acme", "Handbook").await;
    register(&cl, &a, &kb, "acme/handbook.md").await;
    let (other_kb, _) = kb_on(&cl, &other_a, "other", "Pumps").await;
    register(&cl, &other_a, &other_kb, "other").await;
    all_indexed(&cl, &b, &kb, 1, Duration::from_secs(180)).await;
    all_indexed(&cl, &other_b, &other_kb, 1, Duration::from_secs(180)).await;
    // Results name their source by its path in the grant.
    let (handbook, pump, new) = ("handbook.md".to_string(), "pump.md".to_string(), "quasar.md".to_string());
    // Vectors: wait for A's workers to embed both tenants' blocks.
    let pending = "select count(*) from evidence_block b where not exists \
                   (select 1 from evidence_embedding e where e.tenant_id = b.tenant_id and e.block_id = b.id)";
    let r = &cl;
    for t in [acme.tenant_id, other.tenant_id] {
        until(r, "the blocks embedded", Duration::from_secs(180), move || async move {
            let n: Vec<(i64,)> = system_rows(r, t, pending, None).await;
            (n[0].0 == 0).then_some(())
        })
        .await;
    }

    // Before: B finds the handbook, not the other tenant's pump, and nothing about quasars
    // in acme (this builds B's mirror of the KB and caches B's query vector).
    for mode in ["lexical", "vector", "hybrid"] {
        let before = result_paths(&search(&b, "quasar pump robots charge", mode).await);
        assert!(!before.contains(&pump), "{mode}: another tenant's document: {before:?}");
        if mode != "vector" {
            assert!(before.contains(&handbook), "{mode}: {before:?}");
        }
    }
    assert!(search(&b, "quasar", "lexical").await.is_empty(), "only the other tenant has the word");

    // A new file indexed (and embedded) through A.
    cl.app.write_doc("acme/quasar.md", "# Quasar\n\nThe quasar pump charges the robots twice as fast.\n");
    register(&cl, &a, &kb, "acme/quasar.md").await;
    all_indexed(&cl, &b, &kb, 2, Duration::from_secs(180)).await;
    let t = acme.tenant_id;
    until(r, "the new blocks embedded", Duration::from_secs(180), move || async move {
        let n: Vec<(i64,)> = system_rows(r, t, pending, None).await;
        (n[0].0 == 0).then_some(())
    })
    .await;

    // After, on B: the same queries (the cached vector, the mirror of the old version) find it.
    let after = result_paths(&search(&b, "quasar", "lexical").await);
    assert_eq!(after, BTreeSet::from([new.clone()]), "B's lexical mirror is current");
    for mode in ["lexical", "vector", "hybrid"] {
        let after = result_paths(&search(&b, "quasar pump robots charge", mode).await);
        assert!(after.contains(&new), "{mode}: B did not find what A indexed: {after:?}");
        assert!(!after.contains(&pump), "{mode}: another tenant's document: {after:?}");
    }
    // And the other tenant, on either replica, sees only its own.
    for c in [&other_a, &other_b] {
        let theirs = result_paths(&search(c, "quasar pump robots charge", "hybrid").await);
        assert_eq!(theirs, BTreeSet::from([pump.clone()]), "{theirs:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Limits and sessions

/// The sign-in rate limit lives in the database: wrong passwords spread over two replicas
/// count together (each replica alone saw fewer than the limit), and then even the right
/// password is refused on either. A session made on one replica works on the other.
#[tokio::test]
async fn the_sign_in_limit_and_sessions_hold_across_replicas() {
    let cl = TestCluster::start(2, &[("MNOTE_LOGIN_MAX_FAILURES", "3"), ("MNOTE_INGEST_WORKERS", "0")]).await;
    cl.app.bootstrap("acme", OWNER).await;
    cl.app.add_user(cl.app.bootstrap("labs", "root@labs.test").await.tenant_id, "dev@labs.test", "member").await;

    // A session signed in on A is valid on B (sessions are rows in Postgres).
    let dev = cl.client(0);
    assert_eq!(dev.login("dev@labs.test", PASSWORD).await.status(), StatusCode::SEE_OTHER);
    let (st, me) = cl.moved(&dev, 1).get_json("/api/session").await;
    assert_eq!((st, me["user"]["email"].as_str()), (StatusCode::OK, Some("dev@labs.test")), "{me}");

    // Three wrong passwords: A, B, A. Neither replica saw three.
    for i in [0, 1, 0] {
        let r = cl.client(i).login(OWNER, "not the password").await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "replica {i}");
    }
    for i in [1, 0] {
        let r = cl.client(i).login(OWNER, PASSWORD).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "replica {i}: the right password after the limit");
    }
}

// ---------------------------------------------------------------------------------------
// Live status

/// The KB page's live status (`GET /kbs/{id}/events`) open on B shows a source registered
/// and indexed through A (B hears of it by Postgres `NOTIFY`, with its periodic re-read as the
/// backstop; the test asserts what the page shows, not which of the two brought it).
#[tokio::test]
async fn the_kb_pages_live_status_on_one_replica_shows_changes_made_through_another() {
    // A ingests; B only serves the page.
    let mut cl = TestCluster::start(0, &[]).await;
    cl.add(&[]).await;
    cl.add(&[("MNOTE_INGEST_WORKERS", "0")]).await;
    cl.app.bootstrap("acme", OWNER).await;
    let on_a = cl.client(0);
    assert_eq!(on_a.login(OWNER, PASSWORD).await.status(), StatusCode::SEE_OTHER);
    let on_a = on_a.with_csrf().await;
    let on_b = cl.moved(&on_a, 1);
    cl.app.write_doc("acme/first.md", "# First\n\nThe first note.\n");
    let (kb, _) = kb_on(&cl, &on_a, "acme", "Live").await;
    register(&cl, &on_a, &kb, "acme/first.md").await;
    all_indexed(&cl, &on_a, &kb, 1, Duration::from_secs(120)).await;

    let mut live = SseStream::open(&on_b, &format!("/kbs/{kb}/events"), None).await;
    let first = live.next().await.expect("a first snapshot");
    assert_eq!(first.kind, "sources");
    let snap: Value = serde_json::from_str(&first.data).unwrap();
    assert_eq!(snap["ids"].as_array().unwrap().len(), 1, "{snap}");

    // Through A: a new source, which A's worker indexes.
    cl.app.write_doc("acme/second.md", "# Second\n\nThe second note.\n");
    let created = register(&cl, &on_a, &kb, "acme/second.md").await;
    let id = created["id"].as_str().unwrap().to_string();
    let mut cells = Vec::new();
    loop {
        let e = live.next().await.unwrap_or_else(|| panic!("B's stream ended\n{}", cl.logs()));
        assert_eq!(e.kind, "sources");
        let snap: Value = serde_json::from_str(&e.data).unwrap();
        let Some(pos) = snap["ids"].as_array().unwrap().iter().position(|i| i.as_str() == Some(id.as_str())) else {
            continue;
        };
        let cell = snap["cells"][pos].as_str().unwrap().to_string();
        cells.push(cell.clone());
        if cell.contains(r#"class="status indexed""#) {
            break;
        }
    }
    eprintln!("B showed the new source in {} snapshots until it was indexed", cells.len());
}

/// A bad `MNOTE_RUN_LEASE_SECS` stops `mnote serve` at startup with the variable's name.
#[tokio::test]
async fn a_bad_run_lease_is_refused_at_startup() {
    let app = spawn_app().await;
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mnote"))
        .arg("serve")
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .env("MNOTE_GRANTABLE_ROOTS", &app.docs)
        .env("MNOTE_BIND", "127.0.0.1:0")
        .env("MNOTE_EMBEDDER", "none")
        .env("MNOTE_RUN_LEASE_SECS", "soon")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("mnote serve started with a bad lease (hang guard)")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("MNOTE_RUN_LEASE_SECS"), "{err}");
}
