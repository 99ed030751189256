//! Read replicas (`MNOTE_READ_DATABASE_URL`, `db::read`) on a real hot standby
//! (`standby::TestStandby`): searches are served by the standby, never older than the
//! tenant's last write, under the same RLS; a standby that dies under load fails no request and
//! `/readyz` says so; when it is back the reads return to it.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection;

use crate::{helpers::*, standby::TestStandby};

/// An app whose reads may go to `standby` (at most `max_lag` behind).
async fn app_on(standby: &TestStandby, max_lag: Duration) -> TestApp {
    let port = standby.port;
    spawn_app_with(move |c| {
        let mut u = reqwest::Url::parse(&c.database_url).unwrap();
        u.set_port(Some(port)).unwrap();
        c.read_database_url = Some(u.to_string());
        c.read_max_lag = max_lag;
    })
    .await
}

async fn readyz(app: &TestApp) -> (StatusCode, Value) {
    app.client().get_json("/readyz").await
}

/// Wait until `/readyz` says the standby serves reads (`true`) or not.
async fn until_serving(app: &TestApp, serving: bool, guard: Duration) -> Value {
    let start = Instant::now();
    loop {
        let (st, v) = readyz(app).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        if v["readReplica"]["serving"] == serving {
            return v;
        }
        assert!(start.elapsed() < guard, "the read replica's serving never became {serving}: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `db_reads_total{target=…,reason=…}` from `/metrics` (the recorder is process-wide: tests
/// compare before and after).
async fn reads(app: &TestApp, target: &str, reason: &str) -> f64 {
    let text = app.client().get("/metrics").await.text().await.unwrap();
    let label = |l: &str| l.contains(&format!("target=\"{target}\"")) && l.contains(&format!("reason=\"{reason}\""));
    text.lines()
        .filter(|l| l.starts_with("db_reads_total{") && label(l))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

struct Team {
    client: Client,
    kb: String,
}

/// Tenant `name` with one indexed Markdown file saying `words`.
async fn team(app: &TestApp, name: &str, words: &str) -> Team {
    let s = app.bootstrap(name, &format!("owner@{name}.test")).await;
    let client = app.api(s.tenant_id, s.user_id).await;
    app.write_doc(&format!("{name}/notes.md"), &format!("# Notes of {name}\n\n{words}\n"));
    let kb = app.indexed_folder_kb(&client, name, json!({"name": format!("{name} kb")})).await;
    Team { client, kb }
}

async fn search(c: &Client, q: &str) -> Vec<Value> {
    let (st, v) = c.post_json("/api/evidence/search", json!({"query": q, "mode": "lexical"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["results"].as_array().unwrap().clone()
}

/// Change a block's text behind the app's back (a superuser, no tenant transaction, so no
/// freshness record): what the standby has not replayed still shows the old text.
async fn rewrite_blocks(app: &TestApp, from: &str, to: &str) {
    let mut c = sqlx::postgres::PgConnection::connect(&role_url("postgres", &app.db_name)).await.unwrap();
    let n = sqlx::query("update evidence_block set text = replace(text, $1, $2) where text like '%' || $1 || '%'")
        .bind(from)
        .bind(to)
        .execute(&mut c)
        .await
        .unwrap()
        .rows_affected();
    assert!(n > 0, "no block says {from:?}");
}

#[tokio::test]
async fn searches_are_served_by_the_standby_never_older_than_the_tenants_last_write_and_under_rls() {
    let standby = TestStandby::start().await;
    let app = app_on(&standby, Duration::from_secs(120)).await;
    let a = team(&app, "rra", "The zeppelin hangar stores quartz lanterns.").await;
    let b = team(&app, "rrb", "Bravo keeps its own marmalade recipes.").await;
    let ready = until_serving(&app, true, Duration::from_secs(60)).await;
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["readReplica"]["status"], "up", "{ready}");
    // A token's first use in a minute touches its `last_used_at` (a write of its tenant, which
    // sends the tenant's next reads to the primary until replayed): done here, before replay
    // is paused, so the steps below (well within a minute) write only what they say.
    assert_eq!(search(&a.client, "zeppelin").await.len(), 1);
    assert_eq!(search(&b.client, "marmalade").await.len(), 1);
    standby.catch_up().await;

    // 1. Served by the standby: with its replay paused, a change made on the primary behind
    // the app's back is not seen; once replayed, it is.
    let mut su = standby.superuser().await;
    sqlx::query("select pg_wal_replay_pause()").execute(&mut su).await.unwrap();
    rewrite_blocks(&app, "quartz lanterns", "quartz lanterns (primary)").await;
    let before = reads(&app, "standby", "ok").await;
    let hits = search(&a.client, "zeppelin quartz").await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    let quote = hits[0]["quote"].as_str().unwrap();
    assert!(!quote.contains("(primary)"), "the search was not served by the paused standby: {quote}");
    assert!(reads(&app, "standby", "ok").await > before, "no read counted on the standby");
    // read/open of that block: the standby too.
    let id = hits[0]["evidenceId"].as_str().unwrap().to_string();
    let (st, r) = a.client.post_json("/api/evidence/read", json!({"evidenceId": id, "window": 0})).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert!(!r.to_string().contains("(primary)"), "{r}");

    // 2. RLS holds on the standby: the other tenant finds nothing of A's, and cannot read or
    // open A's block by id.
    let before = reads(&app, "standby", "ok").await;
    assert!(search(&b.client, "zeppelin quartz").await.is_empty());
    let (st, _) = b.client.post_json("/api/evidence/read", json!({"evidenceId": id})).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, _) = b.client.post_json("/api/evidence/open", json!({"evidenceId": id})).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(search(&b.client, "marmalade").await.len(), 1);
    assert!(reads(&app, "standby", "ok").await >= before + 4.0, "B's reads were not served by the standby");

    // 3. Freshness: still paused, A uploads a file and it is indexed; A's search right after
    // finds it (the standby has not replayed A's write: the read goes to the primary), while B
    // (no write) is still served by the standby.
    let not_fresh = reads(&app, "primary", "not_fresh").await;
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"# Late\n\nA walrus tunes the harpsichord.\n".to_vec()).file_name("late.md"),
    );
    let r = a
        .client
        .http
        .post(format!("{}/api/kbs/{}/uploads", app.base, a.kb))
        .bearer_auth(a.client.bearer.as_ref().unwrap())
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    app.run_jobs().await;
    let hits = search(&a.client, "walrus harpsichord").await;
    assert_eq!(hits.len(), 1, "the upload indexed just before was not found: {hits:?}");
    assert!(reads(&app, "primary", "not_fresh").await > not_fresh, "A's read was not sent to the primary");
    let hits = search(&a.client, "zeppelin quartz").await;
    assert!(hits[0]["quote"].as_str().unwrap().contains("(primary)"), "a read after A's write was served stale: {hits:?}");
    let before = reads(&app, "standby", "ok").await;
    assert_eq!(search(&b.client, "marmalade").await.len(), 1);
    assert!(reads(&app, "standby", "ok").await > before);

    // 4. Replayed: A's reads return to the standby, which now has both changes.
    sqlx::query("select pg_wal_replay_resume()").execute(&mut su).await.unwrap();
    assert_eq!(search(&a.client, "walrus harpsichord").await.len(), 1);
    // (That request may have touched the token's `last_used_at`: replayed too before counting.)
    standby.catch_up().await;
    let before = reads(&app, "standby", "ok").await;
    assert_eq!(search(&a.client, "walrus harpsichord").await.len(), 1);
    assert!(reads(&app, "standby", "ok").await > before, "A's reads did not return to the standby");
}

#[tokio::test]
async fn a_standby_killed_under_load_fails_no_read_and_reads_return_to_it() {
    let standby = TestStandby::start().await;
    let app = app_on(&standby, Duration::from_secs(3)).await;
    let a = team(&app, "rrk", "Kestrels nest above the granary roof.").await;
    until_serving(&app, true, Duration::from_secs(60)).await;
    let id = search(&a.client, "kestrels granary").await[0]["evidenceId"].as_str().unwrap().to_string();

    // Four clients search and read without pause until told to stop; every answer must be a
    // success with the block in it.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::<String>::new())));
    let mut load = Vec::new();
    for i in 0..4 {
        let (c, stop, done, failed, id) = (a.client.clone(), stop.clone(), done.clone(), failed.clone(), id.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let (path, body) = if i % 2 == 0 {
                    ("/api/evidence/search", json!({"query": "kestrels granary", "mode": "lexical"}))
                } else {
                    ("/api/evidence/read", json!({"evidenceId": id, "window": 1}))
                };
                let (st, v) = c.post_json(path, body).await;
                if st != StatusCode::OK || !v.to_string().contains("Kestrels") {
                    failed.lock().unwrap().push(format!("{path}: {st} {v}"));
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let on_standby = reads(&app, "standby", "ok").await;
    assert!(on_standby > 0.0);

    // Killed: reads go on, on the primary; /readyz stays 200, degraded, and names it.
    standby.kill();
    let killed_at = done.load(Ordering::Relaxed);
    let v = until_serving(&app, false, Duration::from_secs(10)).await;
    assert_eq!(v["status"], "degraded", "{v}");
    assert_eq!(v["readReplica"]["status"], "down", "{v}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(done.load(Ordering::Relaxed) > killed_at + 10, "the load stalled after the kill");
    let metrics = app.client().get("/metrics").await.text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "read_replica_serving 0"), "/metrics does not say it:\n{metrics}");

    // Back: the background check finds it (backoff at most 10 s) and the reads return.
    standby.run();
    let v = until_serving(&app, true, Duration::from_secs(40)).await;
    assert_eq!(v["status"], "ready", "{v}");
    let back = reads(&app, "standby", "ok").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(reads(&app, "standby", "ok").await > back, "the reads did not return to the standby");

    // Lagging past MNOTE_READ_MAX_LAG_MS (3 s here): replay paused while the primary writes.
    let mut su = standby.superuser().await;
    sqlx::query("select pg_wal_replay_pause()").execute(&mut su).await.unwrap();
    let lag_start = Instant::now();
    let v = loop {
        let mut c = sqlx::postgres::PgConnection::connect(&role_url("postgres", &app.db_name)).await.unwrap();
        sqlx::query("select pg_current_xact_id()").execute(&mut c).await.unwrap();
        let (_, v) = readyz(&app).await;
        if v["readReplica"]["status"] == "lagging" {
            break v;
        }
        assert!(lag_start.elapsed() < Duration::from_secs(30), "never reported lagging: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(v["status"], "degraded", "{v}");
    assert_eq!(v["readReplica"]["serving"], false, "{v}");
    sqlx::query("select pg_wal_replay_resume()").execute(&mut su).await.unwrap();
    until_serving(&app, true, Duration::from_secs(40)).await;

    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.unwrap();
    }
    let failed = failed.lock().unwrap();
    assert!(
        failed.is_empty(),
        "{} of {} reads failed: {:?}",
        failed.len(),
        done.load(Ordering::Relaxed),
        &failed[..failed.len().min(5)]
    );
}

/// Sets the flag when dropped (also when the test panics).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The copy of a standby does not depend on a quiet primary: while it is made, the primary
/// switches WAL segments and checkpoints without pause, and the standby still starts and
/// replays. With the slot made by `pg_basebackup -C` (only once the copy's WAL stream had
/// started) this failed 2 runs of 3 with "requested WAL segment … has already been removed",
/// the failure of `a_standby_killed_under_load_…` on a busy machine; with the slot made first,
/// 5 of 5 passed. Run by hand, alone (`./dev test --test api -- --ignored
/// read_replica::a_standby_copied`): the churn writes gigabytes of WAL into the cluster every
/// test shares, and the other tests' standbys, replaying all of it, fall behind their bounds.
#[tokio::test]
#[ignore = "floods the shared test cluster with WAL: run alone, by hand"]
async fn a_standby_copied_while_the_primary_recycles_its_wal_starts_and_replays() {
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let (started, churning) = std::sync::mpsc::channel();
    let churn = {
        let stop = stop.0.clone();
        // Its own thread and runtime: the copy below blocks this test's thread while it runs.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let mut c = sqlx::postgres::PgConnection::connect(&admin_url()).await.unwrap();
                let mut first = true;
                while !stop.load(Ordering::Relaxed) {
                    sqlx::query("select pg_switch_wal()").execute(&mut c).await.unwrap();
                    sqlx::query("checkpoint").execute(&mut c).await.unwrap();
                    if std::mem::take(&mut first) {
                        started.send(()).unwrap();
                    }
                }
            })
        })
    };
    churning.recv().expect("the WAL churn did not start");
    let standby = TestStandby::start().await;
    drop(stop);
    churn.join().unwrap();
    // It streams: a write on the primary after the churn reaches it.
    standby.catch_up().await;
    let mut su = standby.superuser().await;
    let in_recovery: bool = sqlx::query_scalar("select pg_is_in_recovery()").fetch_one(&mut su).await.unwrap();
    assert!(in_recovery, "the copy is not a standby");
}
