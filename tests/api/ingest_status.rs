//! Ingest you can trust (#16): jobs of a dead worker process come back at once when workers
//! start, retry for failed and stuck sources, per-source progress, failures in plain words,
//! and a live stream that heals itself after the database dropped its connections.

use std::time::Duration;

use mnote::{
    db::{Scope, TenantTx},
    ingest::jobs::WorkerIdentity,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

struct Kb {
    app: TestApp,
    c: Client,
    tenant: Uuid,
    user: Uuid,
    kb: String,
    grant: String,
}

async fn kb() -> Kb {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await.with_csrf().await;
    std::fs::create_dir_all(app.docs.join("team")).unwrap();
    let (st, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, kb) = c.post_json("/api/kbs", json!({"name": "kb"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    Kb { app, c, tenant: s.tenant_id, user: s.user_id, kb, grant: g["id"].as_str().unwrap().to_string() }
}

async fn register(k: &Kb, rel: &str, content: &str) -> String {
    k.app.write_doc(&format!("team/{rel}"), content);
    let (st, s) = k.c.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"grantId": k.grant, "path": rel})).await;
    assert!(st.is_success(), "{st} {s}");
    s["id"].as_str().unwrap().to_string()
}

async fn source(k: &Kb, id: &str) -> Value {
    let (st, s) = k.c.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!(st, StatusCode::OK, "{s}");
    s
}

/// Run `sql` (binding the id) in the tenant as background work would (the tables are under
/// forced RLS, for their owner too).
async fn sys(k: &Kb, sql: &str, id: &str) {
    let mut tx = TenantTx::begin(&k.app.pool, k.tenant, Scope::System).await.unwrap();
    sqlx::query(sql).bind(id.parse::<Uuid>().unwrap()).execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
}

/// Pretend worker `worker` claimed the source's job (lease for an hour) and was parsing it.
async fn claimed_by(k: &Kb, source: &str, worker: &str, attempts: i32) {
    let mut tx = TenantTx::begin(&k.app.pool, k.tenant, Scope::System).await.unwrap();
    let id: Uuid = source.parse().unwrap();
    let n = sqlx::query(
        "update ingest_job set status = 'running', worker = $2, attempts = $3, lease_until = now() + interval '1 hour'
         where source_id = $1 and status in ('queued', 'running')",
    )
    .bind(id)
    .bind(worker)
    .bind(attempts)
    .execute(&mut *tx)
    .await
    .unwrap()
    .rows_affected();
    assert_eq!(n, 1, "the source has an open job");
    sqlx::query("update source set status = 'parsing', progress_phase = 'parsing', progress_started_at = now() where id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

/// The identity a process had, and that process gone (its PID is not reused this fast).
fn dead_worker() -> WorkerIdentity {
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let ident = WorkerIdentity::of_pid(child.id()).expect("the child runs");
    child.kill().unwrap();
    child.wait().unwrap();
    ident
}

async fn job_of(k: &Kb, source: &str) -> (String, Option<String>, i32) {
    let mut tx = TenantTx::begin(&k.app.pool, k.tenant, Scope::System).await.unwrap();
    let r =
        sqlx::query_as("select status, worker, attempts from ingest_job where source_id = $1 order by created_at desc limit 1")
            .bind(source.parse::<Uuid>().unwrap())
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    r
}

fn start_workers(k: &Kb) -> (tokio::sync::watch::Sender<bool>, Vec<tokio::task::JoinHandle<()>>) {
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let cfg = std::sync::Arc::new(k.app.config.clone());
    let w = mnote::ingest::pipeline::spawn_workers(k.app.pool.clone(), cfg, 1, None, k.app.vector_health.clone(), stop);
    (stop_tx, w)
}

#[tokio::test]
async fn a_restarted_server_takes_back_the_jobs_of_its_dead_worker_at_once_not_after_the_lease() {
    let k = kb().await;
    let lost = register(&k, "lost.md", "# Lost\n\nThe worker died while parsing this.\n").await;
    let busy = register(&k, "busy.md", "# Busy\n\nA live worker still parses this.\n").await;
    let dead = dead_worker();
    claimed_by(&k, &lost, &dead.name(0), 1).await;
    // A live process of this host (a second `mnote index`, say) keeps its job.
    let mut live_child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let live = WorkerIdentity::of_pid(live_child.id()).unwrap();
    claimed_by(&k, &busy, &live.name(0), 1).await;
    assert_eq!(source(&k, &lost).await["status"], "parsing");

    // "The server restarts": its workers start.
    let started = std::time::Instant::now();
    let (stop_tx, workers) = start_workers(&k);
    loop {
        if source(&k, &lost).await["status"] == "indexed" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "the dead worker's job was not taken back (lease: 1 hour)");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "{took:?}");
    let (status, _, attempts) = job_of(&k, &lost).await;
    assert_eq!((status.as_str(), attempts), ("done", 2), "the crash counted as an attempt");
    assert!(source(&k, &lost).await["progress"].is_null(), "progress cleared when done");

    // The live process's job is left alone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, worker, _) = job_of(&k, &busy).await;
    assert_eq!((status.as_str(), worker.as_deref()), ("running", Some(live.name(0).as_str())));
    stop_tx.send(true).unwrap();
    for w in workers {
        w.await.unwrap();
    }
    live_child.kill().unwrap();
    live_child.wait().unwrap();
    // Once that process is gone too, a reclaim pass releases its job.
    let me = WorkerIdentity::current();
    assert_eq!(mnote::ingest::jobs::reclaim_dead(&k.app.pool, &me).await.unwrap(), 1);
    let (status, worker, _) = job_of(&k, &busy).await;
    assert_eq!((status.as_str(), worker), ("queued", None));
    let s = source(&k, &busy).await;
    assert_eq!((s["status"].as_str(), s["progress"]["phase"].as_str()), (Some("pending"), Some("queued")), "{s}");
    eprintln!("dead worker's job indexed {took:?} after the workers started");
}

#[tokio::test]
async fn a_job_whose_worker_died_on_every_attempt_fails_with_worker_lost() {
    let k = kb().await;
    let id = register(&k, "killer.md", "# Killer\n").await;
    claimed_by(&k, &id, &dead_worker().name(1), mnote::sources::queue::MAX_ATTEMPTS).await;
    assert_eq!(mnote::ingest::jobs::reclaim_dead(&k.app.pool, &WorkerIdentity::current()).await.unwrap(), 1);
    let s = source(&k, &id).await;
    assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("failed"), Some("worker_lost")), "{s}");
    assert!(s["progress"].is_null());
    // It is offered for retry, which starts over with fresh attempts.
    let (st, r) = k.c.post_json(&format!("/api/sources/{id}/retry"), json!({})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{r}");
    assert_eq!((r["status"].as_str(), r["error"].is_null()), (Some("pending"), true));
    assert_eq!(r["progress"]["phase"], "queued");
    k.app.run_jobs().await;
    assert_eq!(source(&k, &id).await["status"], "indexed");
}

#[tokio::test]
async fn retry_parses_a_failed_source_again_and_refuses_while_one_runs() {
    let k = kb().await;
    let id = register(&k, "broken.pdf", "%PDF-1.4 this is not a PDF").await;
    let (_, s) = k.c.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!(s["progress"]["phase"], "queued", "registered: waiting, {s}");
    assert_eq!(s["progress"]["maxAttempts"], 3);
    k.app.run_jobs().await;
    let s = source(&k, &id).await;
    assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("failed"), Some("pdf_malformed")), "{s}");
    assert!(s["progress"].is_null());

    // A member may read but not retry.
    let member = k.app.add_user(k.tenant, "m@acme.test", "member").await;
    let m = k.app.api(k.tenant, member).await;
    let (st, _) = m.post_json(&format!("/api/sources/{id}/retry"), json!({})).await;
    assert_eq!(st, StatusCode::FORBIDDEN);

    let (st, r) = k.c.post_json(&format!("/api/sources/{id}/retry"), json!({})).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{r}");
    assert_eq!((r["status"].as_str(), r["error"].is_null()), (Some("pending"), true));
    let (status, _, attempts) = job_of(&k, &id).await;
    assert_eq!((status.as_str(), attempts), ("queued", 0));
    // Retrying again while it waits: still one job, run now.
    let (st, _) = k.c.post_json(&format!("/api/sources/{id}/retry"), json!({})).await;
    assert_eq!(st, StatusCode::ACCEPTED);
    let mut tx = TenantTx::begin(&k.app.pool, k.tenant, Scope::System).await.unwrap();
    let open: i64 =
        sqlx::query_scalar("select count(*) from ingest_job where source_id = $1 and status in ('queued', 'running')")
            .bind(id.parse::<Uuid>().unwrap())
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(open, 1);
    // While a live worker holds it: 409.
    claimed_by(&k, &id, &WorkerIdentity::current().name(9), 1).await;
    let (st, e) = k.c.post_json(&format!("/api/sources/{id}/retry"), json!({})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"), "{e}");
    let _ = k.user;
}

#[tokio::test]
async fn the_kb_page_says_why_a_source_failed_in_plain_words_with_the_code_kept_small() {
    let k = kb().await;
    let id = register(&k, "broken.pdf", "%PDF-1.4 this is not a PDF").await;
    k.app.run_jobs().await;
    let raw = source(&k, &id).await["error"]["message"].as_str().unwrap().to_string();
    let mut c = k.app.login("owner@acme.test").await;
    let (_, html) = c.page(&format!("/kbs/{}", k.kb)).await;
    let doc = scraper::Html::parse_document(&html);
    let line = doc.select(&scraper::Selector::parse(".error-line").unwrap()).next().expect("an error line");
    let text: String = line.text().collect::<String>().split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(text, "The PDF is damaged or is not a valid PDF. pdf_malformed");
    assert_eq!(line.value().attr("title"), Some(raw.as_str()), "the raw message only as a tooltip");
    assert!(html.contains("<code class=\"code\""));
    // No Retry for a damaged file (parsing the same bytes again ends the same way): the page
    // says so instead. The retry action itself still answers (below).
    assert!(!html.contains(&format!("action=\"/sources/{id}/retry\"")), "{html}");
    assert!(html.contains("Retrying cannot help"), "{html}");

    let zh = c.http.get(format!("{}/kbs/{}", k.app.base, k.kb)).header("accept-language", "zh-CN").send().await.unwrap();
    let zh = zh.text().await.unwrap();
    assert!(zh.contains("这个 PDF 已损坏，或不是有效的 PDF。"), "{zh}");
    // The retry form's action works.
    c.page(&format!("/kbs/{}", k.kb)).await;
    let r = c.post_form(&format!("/sources/{id}/retry"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(source(&k, &id).await["status"], "pending");
}

#[tokio::test]
async fn the_live_stream_survives_the_database_dropping_its_connections_and_heals_lost_notifications() {
    let k = kb().await;
    let id = register(&k, "a.md", "# a\n").await;
    let r = k.c.get(&format!("/kbs/{}/events", k.kb)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let mut stream = Box::pin(r.bytes_stream());
    let mut buf = String::new();
    let first = crate::ingest::next_sources_event(&mut stream, &mut buf, |_| true).await;
    assert_eq!(first["ids"], json!([id]));

    // Every backend of the app's database is terminated (what a Postgres restart looks like to
    // the app: the relay's LISTEN connection too), and the change is made with the trigger off,
    // so no notification exists at all: only the stream's own re-read can bring it.
    k.app.drop_connections_and_fail_silently(k.tenant, &id).await;
    let t0 = std::time::Instant::now();
    let healed = tokio::time::timeout(
        Duration::from_secs(30),
        crate::ingest::next_sources_event(&mut stream, &mut buf, |v| {
            v["cells"][0].as_str().unwrap_or("").contains("status failed")
        }),
    )
    .await
    .expect("the stream re-read the state after the connections were dropped");
    assert!(healed["cells"][0].as_str().unwrap().contains("The PDF is damaged"), "{healed}");
    assert!(t0.elapsed() < Duration::from_secs(12), "healed within the re-read interval: {:?}", t0.elapsed());

    // And the stream equals a reload: the page renders the same cell.
    let mut c = k.app.login("owner@acme.test").await;
    let (_, html) = c.page(&format!("/kbs/{}", k.kb)).await;
    let doc = scraper::Html::parse_document(&html);
    let cell = doc.select(&scraper::Selector::parse("td.status-cell").unwrap()).next().unwrap().inner_html();
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let live = scraper::Html::parse_fragment(healed["cells"][0].as_str().unwrap()).root_element().inner_html();
    // The CSRF token differs between sessions; everything else is the same.
    let strip = |s: &str| regex_lite_strip(&norm(s));
    assert_eq!(strip(&live), strip(&cell));
}

/// Remove the `value="…"` attributes (the hidden CSRF inputs are session-specific).
fn regex_lite_strip(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(" value=\"") {
        out.push_str(&rest[..i]);
        let start = i + " value=\"".len();
        let end = rest[start..].find('"').map(|e| start + e + 1).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn progress_shows_the_phase_and_the_attempt_while_a_job_runs() {
    let k = kb().await;
    let id = register(&k, "p.md", "# p\n").await;
    claimed_by(&k, &id, &WorkerIdentity::current().name(5), 2).await;
    sys(&k, "update source set progress_attempt = 2, progress_total = 12 where id = $1", &id).await;
    let s = source(&k, &id).await;
    let p = &s["progress"];
    assert_eq!((p["phase"].as_str(), p["attempt"].as_i64(), p["total"].as_i64()), (Some("parsing"), Some(2), Some(12)), "{s}");
    assert!(p["elapsedSecs"].as_i64().unwrap() >= 0 && p["startedAt"].is_string());
    let mut c = k.app.login("owner@acme.test").await;
    let (_, html) = c.page(&format!("/kbs/{}", k.kb)).await;
    let doc = scraper::Html::parse_document(&html);
    let line = doc.select(&scraper::Selector::parse(".progress-line").unwrap()).next().expect("a progress line");
    let text: String = line.text().collect::<String>().split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(text, "parsing · 12 pages · attempt 2 of 3 · under a minute");
    assert!(line.value().attr("data-since").is_some());
}

#[tokio::test]
async fn a_pdf_parse_reports_the_pages_done_of_total_while_it_runs() {
    let k = kb().await;
    // The source row keeps only its latest progress: log every one it goes through.
    sqlx::raw_sql(
        "create table progress_log (at timestamptz default clock_timestamp(), phase text, done int, total int);
         create function log_progress() returns trigger language plpgsql security definer as $$
         begin insert into progress_log (phase, done, total) values (new.progress_phase, new.progress_done, new.progress_total);
               return new; end $$;
         create trigger log_progress after update of progress_done on source for each row execute function log_progress();",
    )
    .execute(&k.app.owner_pool)
    .await
    .unwrap();
    let pdf = crate::fixtures::testdata("pdf/kz_bmc_infect_dis_2011_11_124.pdf");
    std::fs::copy(&pdf, k.app.docs.join("team/register.pdf")).unwrap();
    let (st, s) = k.c.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"grantId": k.grant, "path": "register.pdf"})).await;
    assert!(st.is_success(), "{st} {s}");
    let id = s["id"].as_str().unwrap().to_string();
    k.app.run_jobs().await;

    let log: Vec<(Option<String>, Option<i32>, Option<i32>)> =
        sqlx::query_as("select phase, done, total from progress_log order by at").fetch_all(&k.app.owner_pool).await.unwrap();
    let parsing: Vec<i32> =
        log.iter().filter(|(p, _, t)| p.as_deref() == Some("parsing") && *t == Some(7)).filter_map(|(_, d, _)| *d).collect();
    // The first page is reported at once, later ones at most about once a second.
    assert_eq!(parsing.first(), Some(&1), "{log:?}");
    assert!(parsing.windows(2).all(|w| w[0] < w[1]) && parsing.iter().all(|d| (1..=7).contains(d)), "{log:?}");
    assert!(log.iter().any(|r| r == &(Some("indexing".into()), Some(7), Some(7))), "{log:?}");
    let s = source(&k, &id).await;
    assert_eq!((s["status"].as_str(), s["pages"].as_i64()), (Some("indexed"), Some(7)), "{s}");
    assert!(s["progress"].is_null(), "no progress once indexed: {s}");

    // While parsing, the KB page says "page n of total" (and in Chinese).
    sys(&k, "update source set status = 'parsing', progress_phase = 'parsing', progress_done = 3, progress_total = 7, progress_started_at = now() where id = $1", &id).await;
    let mut c = k.app.login("owner@acme.test").await;
    let (_, html) = c.page(&format!("/kbs/{}", k.kb)).await;
    assert!(html.contains("<span class=\"pages\"> · page 3 of 7</span>"), "{html}");
    let zh = c.http.get(format!("{}/kbs/{}", k.app.base, k.kb)).header("accept-language", "zh-CN").send().await.unwrap();
    assert!(zh.text().await.unwrap().contains("第 3 页，共 7 页"));
}
