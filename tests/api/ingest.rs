//! The ingestion pipeline: supervised parsing, artifacts, evidence rows, failures.

use std::time::Duration;

use mnote::{
    db::{Scope, TenantTx},
    ingest::{
        jobs,
        pipeline::Outcome,
        worker::{Limits, parse_supervised},
    },
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

const GUIDE: &str = "# 第一章\n\n## 解除条件\n\n在 Rust 中，使用线程作用域可以借用栈上的数据。\n\n- 第一项 see [[Scoped Threads]]\n- 第二项 by @Alice\n";

struct Kb {
    client: Client,
    tenant: Uuid,
    kb: String,
}

async fn kb_with_grant(app: &TestApp) -> Kb {
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    std::fs::create_dir_all(app.docs.join("team")).unwrap();
    let (st, _) = client
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (_, kb) = client.post_json("/api/kbs", json!({"name": "kb"})).await;
    Kb { client, tenant: s.tenant_id, kb: kb["id"].as_str().unwrap().to_string() }
}

async fn register(k: &Kb, app: &TestApp, rel: &str) -> Value {
    let (st, s) = k.client.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": app.docs_path(rel)})).await;
    assert!(st.is_success(), "{st} {s}");
    s
}

/// (block_key, evidence id, text, locator) of a source, in document order.
async fn evidence(app: &TestApp, tenant: Uuid, source: &str) -> Vec<(String, Uuid, String, Value)> {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let rows: Vec<(String, Uuid, String, Value)> =
        sqlx::query_as("select block_key, id, text, locator from evidence_block where source_id = $1::uuid order by ordinal")
            .bind(source)
            .fetch_all(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    rows
}

#[tokio::test]
async fn a_markdown_file_becomes_located_evidence() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/guide.md", GUIDE);
    let src = register(&k, &app, "team/guide.md").await;
    let id = src["id"].as_str().unwrap().to_string();
    assert_eq!(src["status"], "pending");
    assert_eq!(app.run_jobs().await, vec![Outcome::Indexed { blocks: 5 }]);

    let (_, s) = k.client.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!((s["status"].as_str(), s["error"].is_null()), (Some("indexed"), true), "{s}");
    assert!(s["provider"].as_str().unwrap().starts_with("markdown"));
    assert_eq!(s["indexedHash"], s["sha256"]);

    let rows = evidence(&app, k.tenant, &id).await;
    let para = rows.iter().find(|r| r.2.contains("线程作用域")).expect("paragraph block");
    let loc = &para.3;
    assert_eq!(loc["schema"], "mnote.evidence_locator.v1");
    assert_eq!(loc["resourcePath"], "guide.md");
    assert_eq!(loc["resourceKind"], "markdown");
    assert_eq!(loc["sectionPath"], json!(["第一章", "解除条件"]));
    assert_eq!(loc["lineRange"], json!([5, 5]));
    assert_eq!(loc["quality"], "exact");
    assert_eq!(loc["sourceHash"], s["sha256"]);
    assert_eq!(loc["kbId"].as_str(), Some(k.kb.as_str()));

    // Edges: sections contain blocks, the wikilink and the mention are anchored at their blocks.
    let mut tx = TenantTx::begin(&app.pool, k.tenant, Scope::System).await.unwrap();
    let edges: Vec<(String, Option<String>, String)> = sqlx::query_as(
        "select e.kind, e.target_text, b.block_key from evidence_edge e
         join evidence_block b on b.tenant_id = e.tenant_id and b.id = e.source_block_id
         where e.source_id = $1::uuid and e.kind <> 'section_contains_block' order by e.kind",
    )
    .bind(&id)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    let n_contains: i64 = sqlx::query_scalar("select count(*) from evidence_edge where kind = 'section_contains_block'")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(n_contains >= 4);
    let kinds: Vec<(&str, Option<&str>)> = edges.iter().map(|e| (e.0.as_str(), e.1.as_deref())).collect();
    assert_eq!(kinds, vec![("block_mentions_entity", Some("Alice")), ("markdown_links_to", Some("Scoped Threads"))]);

    // The source map export.
    let (st, sm) = k.client.get_json(&format!("/api/sources/{id}/source-map.json")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(sm["schema"], "mnote.resource_source_map.v1");
    assert_eq!(sm["sourceHash"], s["sha256"]);
    assert_eq!(sm["blocks"].as_array().unwrap().len(), 5);

    // Unchanged file: not parsed again.
    register(&k, &app, "team/guide.md").await;
    assert_eq!(app.run_jobs().await, vec![], "same sha256: no job queued");
}

#[tokio::test]
async fn reindex_rebuilds_identical_rows_from_artifacts_only() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/a.md", GUIDE);
    app.write_doc("team/b.txt", "plain text\n\nsecond paragraph mentioning @Bob");
    let (_, r) = k.client.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": app.docs_path("team")})).await;
    assert_eq!(r["createdCount"], 2);
    app.run_jobs().await;
    let snapshot = |app: &TestApp| {
        let pool = app.pool.clone();
        let tenant = k.tenant;
        async move {
            let mut tx = TenantTx::begin(&pool, tenant, Scope::System).await.unwrap();
            let rows: Vec<(Uuid, String, Value)> =
                sqlx::query_as("select id, text, locator from evidence_block order by id").fetch_all(&mut *tx).await.unwrap();
            let edges: Vec<(Uuid, String, Uuid)> =
                sqlx::query_as("select id, kind, source_block_id from evidence_edge order by id")
                    .fetch_all(&mut *tx)
                    .await
                    .unwrap();
            let sections: Vec<(Uuid, Vec<String>)> =
                sqlx::query_as("select id, path from evidence_section order by id").fetch_all(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            (rows, edges, sections)
        }
    };
    let before = snapshot(&app).await;
    assert!(!before.0.is_empty() && !before.1.is_empty() && !before.2.is_empty());
    // Through the CLI, as an operator would.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnote"))
        .args(["reindex", "--tenant", "acme"])
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("of 2 sources"));
    assert_eq!(snapshot(&app).await, before);
    // Parsing the same bytes again gives the same artifact.
    let p = app.docs.join("team/a.md");
    let one = mnote::ingest::worker::parse_in_process(&p, "markdown").unwrap();
    let two = mnote::ingest::worker::parse_in_process(&p, "markdown").unwrap();
    assert_eq!(one, two);
}

#[tokio::test]
async fn a_changed_file_is_reparsed_and_a_failed_reparse_keeps_the_old_evidence() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/doc.md", "# Title\n\nfirst version");
    let id = register(&k, &app, "team/doc.md").await["id"].as_str().unwrap().to_string();
    app.run_jobs().await;
    let v1 = evidence(&app, k.tenant, &id).await;
    assert!(v1.iter().any(|r| r.2 == "first version"));

    app.write_doc("team/doc.md", "# Title\n\nsecond version");
    register(&k, &app, "team/doc.md").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Indexed { blocks: 2 }]);
    let v2 = evidence(&app, k.tenant, &id).await;
    assert!(v2.iter().any(|r| r.2 == "second version") && !v2.iter().any(|r| r.2 == "first version"));
    assert_ne!(v1[1].1, v2[1].1, "new content, new evidence ids");

    // Now the file becomes unparsable: the old evidence stays served, with the error shown.
    std::fs::write(app.docs.join("team/doc.md"), b"\xff\xfe not utf-8 \xc3\x28").unwrap();
    register(&k, &app, "team/doc.md").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::KeptOld { code: "text_encoding_invalid".into() }]);
    let (_, s) = k.client.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!(s["status"], "indexed");
    assert_eq!(s["error"]["code"], "text_encoding_invalid");
    assert_eq!(evidence(&app, k.tenant, &id).await, v2);

    // A new file that fails has status failed, a code, a message, and no evidence.
    std::fs::write(app.docs.join("team/bad.md"), b"\xff\xff\xff").unwrap();
    let bad = register(&k, &app, "team/bad.md").await["id"].as_str().unwrap().to_string();
    assert_eq!(app.run_jobs().await, vec![Outcome::Failed { code: "text_encoding_invalid".into() }]);
    let (_, s) = k.client.get_json(&format!("/api/sources/{bad}")).await;
    assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("failed"), Some("text_encoding_invalid")));
    assert!(s["error"]["message"].as_str().unwrap().len() > 5);
    assert!(evidence(&app, k.tenant, &bad).await.is_empty());

    // A deleted file goes stale.
    std::fs::remove_file(app.docs.join("team/doc.md")).unwrap();
    let mut tx = TenantTx::begin(&app.pool, k.tenant, Scope::System).await.unwrap();
    mnote::sources::queue::enqueue(&mut tx, k.tenant, id.parse().unwrap()).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(app.run_jobs().await, vec![Outcome::Stale { code: "file_missing" }]);
}

#[tokio::test]
async fn uploads_are_parsed_too() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(GUIDE.as_bytes().to_vec()).file_name("上传.md"));
    let r = k
        .client
        .http
        .post(format!("{}/api/kbs/{}/uploads", app.base, k.kb))
        .bearer_auth(k.client.bearer.as_ref().unwrap())
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(app.run_jobs().await, vec![Outcome::Indexed { blocks: 5 }]);
}

fn script(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[tokio::test]
async fn a_hanging_crashing_or_bloated_parser_only_fails_its_own_job() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("x.md");
    std::fs::write(&file, "# x").unwrap();
    let limits = Limits { timeout: Duration::from_secs(2), memory_bytes: 256 << 20, max_pages: 100, max_rows: 1000 };
    let hang = script(d.path(), "hang", "sleep 60");
    let e = parse_supervised(&hang, &file, "markdown", &limits).await.unwrap_err();
    assert_eq!(e.code, "parse_timeout");
    let crash = script(d.path(), "crash", "kill -SEGV $$");
    let e = parse_supervised(&crash, &file, "markdown", &limits).await.unwrap_err();
    assert_eq!(e.code, "worker_crashed", "{e}");
    let bloat = script(d.path(), "bloat", "exec python3 -c 'x = bytearray(2 * 1024**3)'");
    let e = parse_supervised(&bloat, &file, "markdown", &limits).await.unwrap_err();
    assert_eq!(e.code, "parse_out_of_memory", "{e}");
    // The real parser children (`mnote-parse`, and `mnote parse-file` when it is installed
    // alone) work under the same limits, with the same answers.
    for real in [env!("CARGO_BIN_EXE_mnote-parse"), env!("CARGO_BIN_EXE_mnote")] {
        let real = std::path::PathBuf::from(real);
        let art = parse_supervised(&real, &file, "markdown", &limits).await.unwrap();
        assert_eq!(art.source_map.blocks[0].text, "x");
        let e = parse_supervised(&real, &file, "keynote", &limits).await.unwrap_err();
        assert_eq!(e.code, "unsupported_kind");
    }
    // Beside the server binary, the lean one is chosen.
    let mnote = std::path::PathBuf::from(env!("CARGO_BIN_EXE_mnote"));
    assert_eq!(mnote::config::parser_exe_beside(&mnote), std::path::PathBuf::from(env!("CARGO_BIN_EXE_mnote-parse")));
    assert_eq!(mnote::config::parser_exe_beside(&d.path().join("mnote")), d.path().join("mnote"));
    // Arguments it does not take: a usage line and exit 2, no output.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnote-parse")).args(["serve", "--kind", "pdf"]).output().unwrap();
    assert_eq!((out.status.code(), out.stdout.is_empty()), (Some(2), true));
}

#[tokio::test]
async fn a_job_whose_worker_died_is_claimed_again_after_its_lease() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/a.md", "# a");
    register(&k, &app, "team/a.md").await;
    let mut cursor = 0;
    let (_, job) = jobs::claim(&app.pool, "doomed", Duration::from_millis(500), &mut cursor).await.unwrap().unwrap();
    // The worker "dies" here: nothing else can claim the job while its lease runs.
    assert!(jobs::claim(&app.pool, "other", Duration::from_secs(60), &mut cursor).await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (_, again) = jobs::claim(&app.pool, "other", Duration::from_secs(60), &mut cursor).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempts), (job.id, 2));
    assert_eq!(
        mnote::ingest::pipeline::process(&app.pool, &app.config, k.tenant, &again).await.unwrap(),
        Outcome::Indexed { blocks: 1 }
    );
}

#[tokio::test]
async fn mnote_index_registers_and_waits_with_progress() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/one.md", GUIDE);
    app.write_doc("team/sub/two.md", "# two\n\ntext");
    std::fs::write(app.docs.join("team/sub/broken.md"), b"\xff\xfe").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnote"))
        .args(["index", "--tenant", "acme", "--kb", "kb"])
        .arg(app.docs.join("team"))
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .env("MNOTE_GRANTABLE_ROOTS", &app.docs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("3 files: 1 failed, 2 indexed"), "{stdout}");
    assert!(stdout.contains("sub/broken.md: text_encoding_invalid"), "{stdout}");
    let (_, list) = k.client.get_json(&format!("/api/kbs/{}/sources", k.kb)).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
    // A path outside every grant is a usage error: non-zero exit, nothing registered.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnote"))
        .args(["index", "--tenant", "acme", "--kb", "kb", "/etc/hostname"])
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("path_outside_grant"));
}

/// Read SSE `data:` payloads of `event: sources` until `pred` holds for one.
pub async fn next_sources_event(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buf: &mut String,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    use futures_util::StreamExt;
    loop {
        while let Some(end) = buf.find("\n\n") {
            let frame = buf[..end].to_string();
            buf.drain(..end + 2);
            if frame.lines().any(|l| l == "event: sources") {
                let data: String = frame.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                let v: Value = serde_json::from_str(&data).unwrap();
                if pred(&v) {
                    return v;
                }
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next()).await.expect("an event").unwrap().unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test]
async fn the_kb_page_gets_live_status_over_server_sent_events() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/a.md", "# a");
    let id = register(&k, &app, "team/a.md").await["id"].as_str().unwrap().to_string();
    let r = k.client.get(&format!("/kbs/{}/events", k.kb)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut stream = Box::pin(r.bytes_stream());
    let mut buf = String::new();
    // Each event is the whole state: the ids in page order and each row's status cell as
    // the page renders it.
    let first = next_sources_event(&mut stream, &mut buf, |_| true).await;
    assert_eq!(first["ids"][0].as_str(), Some(id.as_str()));
    let cell = first["cells"][0].as_str().unwrap();
    assert!(cell.contains("class=\"status pending\""), "{cell}");
    assert!(cell.contains("data-phase=\"queued\""), "queued, with its progress: {cell}");
    app.run_jobs().await;
    let done = next_sources_event(&mut stream, &mut buf, |v| v["cells"][0].as_str().unwrap().contains("status indexed")).await;
    let cell = done["cells"][0].as_str().unwrap();
    assert!(!cell.contains("error-line") && !cell.contains("progress-line"), "{cell}");
    // Another tenant cannot subscribe to this KB.
    let other = app.bootstrap("other", "o@other.test").await;
    let c = app.api(other.tenant_id, other.user_id).await;
    assert_eq!(c.get(&format!("/kbs/{}/events", k.kb)).await.status(), StatusCode::NOT_FOUND);
}

async fn rescan(app: &TestApp, tenant: Uuid) -> mnote::ingest::watch::Report {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let r = mnote::ingest::watch::rescan_tenant(&mut tx, tenant).await.unwrap();
    tx.commit().await.unwrap();
    r
}

#[tokio::test]
async fn rescans_follow_new_changed_deleted_and_restored_files() {
    use mnote::ingest::watch::Report;
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/notes/a.md", "# a");
    let (st, _) = k
        .client
        .post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": app.docs_path("team/notes"), "include": ["**/*.md"]}))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    app.run_jobs().await;
    assert_eq!(rescan(&app, k.tenant).await, Report::default(), "nothing changed");

    app.write_doc("team/notes/b.md", "# b");
    app.write_doc("team/notes/ignored.txt", "not matching the include glob");
    assert_eq!(rescan(&app, k.tenant).await, Report { registered: 1, queued: 0, stale: 0 });
    assert_eq!(app.run_jobs().await, vec![Outcome::Indexed { blocks: 1 }]);

    app.write_doc("team/notes/a.md", "# a, edited");
    assert_eq!(rescan(&app, k.tenant).await, Report { registered: 0, queued: 1, stale: 0 });
    assert_eq!(app.run_jobs().await, vec![Outcome::Indexed { blocks: 1 }]);

    let saved = std::fs::read(app.docs.join("team/notes/a.md")).unwrap();
    std::fs::remove_file(app.docs.join("team/notes/a.md")).unwrap();
    assert_eq!(rescan(&app, k.tenant).await, Report { registered: 0, queued: 0, stale: 1 });
    let (_, list) = k.client.get_json(&format!("/api/kbs/{}/sources", k.kb)).await;
    let a = list["items"].as_array().unwrap().iter().find(|s| s["resourcePath"] == "notes/a.md").unwrap().clone();
    assert_eq!((a["status"].as_str(), a["error"]["code"].as_str()), (Some("stale"), Some("file_missing")));
    assert_eq!(rescan(&app, k.tenant).await, Report::default(), "stale stays stale without churn");

    std::fs::write(app.docs.join("team/notes/a.md"), saved).unwrap();
    assert_eq!(rescan(&app, k.tenant).await, Report { registered: 0, queued: 1, stale: 0 });
    assert_eq!(app.run_jobs().await, vec![Outcome::Unchanged], "same bytes: evidence reused");
    let (_, s) = k.client.get_json(&format!("/api/sources/{}", a["id"].as_str().unwrap())).await;
    assert_eq!((s["status"].as_str(), s["error"].is_null()), (Some("indexed"), true));
}

#[tokio::test]
async fn the_watcher_notices_a_new_file_without_waiting_for_the_rescan() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/w/a.md", "# a");
    k.client.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": app.docs_path("team/w")})).await;
    app.run_jobs().await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = mnote::ingest::watch::spawn(app.pool.clone(), std::sync::Arc::new(app.config.clone()), stop_rx);
    tokio::time::sleep(Duration::from_millis(800)).await; // first tick: roots are watched
    app.write_doc("team/w/new.md", "# new");
    let mut found = false;
    for _ in 0..60 {
        let (_, list) = k.client.get_json(&format!("/api/kbs/{}/sources", k.kb)).await;
        if list["items"].as_array().unwrap().iter().any(|s| s["resourcePath"] == "w/new.md") {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    assert!(found, "the watcher did not register new.md (rescan interval is 300 s in tests)");
}

#[tokio::test]
async fn a_docx_file_becomes_paragraph_evidence() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let src = crate::fixtures::testdata("docx/d2p_zen_of_python.docx");
    std::fs::copy(&src, app.docs.join("team/zen.docx")).unwrap();
    let id = register(&k, &app, "team/zen.docx").await["id"].as_str().unwrap().to_string();
    let out = app.run_jobs().await;
    assert!(matches!(out[..], [Outcome::Indexed { blocks }] if blocks > 5), "{out:?}");
    let rows = evidence(&app, k.tenant, &id).await;
    let b = rows.iter().find(|r| r.2 == "Beautiful is better than ugly.").expect("Zen line as a block");
    assert_eq!(b.3["resourceKind"], "docx");
    assert!(b.3["paragraphOrdinal"].as_u64().unwrap() >= 1);
    assert_eq!(b.3["textFingerprint"].as_str().unwrap().len(), 16);
    assert!(b.3["paraIdStart"].is_null(), "LibreOffice/python-docx files carry no paraIds");
    // A corrupt DOCX fails with its code.
    std::fs::write(app.docs.join("team/broken.docx"), b"PK\x03\x04 truncated").unwrap();
    register(&k, &app, "team/broken.docx").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Failed { code: "docx_malformed".into() }]);
}

use crate::fixtures::testdata as shared;

#[tokio::test]
async fn pdfs_scans_and_images_become_located_evidence() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    for (from, to) in [
        ("pdf/pypdf_multilang.pdf", "team/multilang.pdf"),
        ("pdf_scanned/ocr_c02-22.pdf", "team/scan.pdf"),
        ("images/ocr_crom.png", "team/photo.png"),
    ] {
        std::fs::copy(shared(from), app.docs.join(to)).unwrap();
    }
    std::fs::write(app.docs.join("team/broken.pdf"), b"%PDF-1.7 garbage").unwrap();
    std::fs::write(app.docs.join("team/broken.png"), b"\x89PNG\r\n\x1a\n garbage").unwrap();
    let (_, r) = k.client.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": app.docs_path("team")})).await;
    assert_eq!(r["createdCount"], 5);
    app.run_jobs().await;
    let (_, list) = k.client.get_json(&format!("/api/kbs/{}/sources", k.kb)).await;
    let by_path = |p: &str| list["items"].as_array().unwrap().iter().find(|s| s["resourcePath"] == p).unwrap().clone();
    assert_eq!(by_path("broken.pdf")["error"]["code"], "pdf_malformed");
    assert_eq!(by_path("broken.png")["error"]["code"], "image_unreadable");
    for (path, kind) in [("multilang.pdf", "pdf"), ("scan.pdf", "pdf"), ("photo.png", "image")] {
        let s = by_path(path);
        assert_eq!(s["status"], "indexed", "{path}: {s}");
        let rows = evidence(&app, k.tenant, s["id"].as_str().unwrap()).await;
        assert!(!rows.is_empty(), "{path}: no evidence");
        for (_, _, text, loc) in &rows {
            assert_eq!(loc["resourceKind"], kind);
            assert!(loc["page"].as_u64().unwrap() >= 1);
            let bbox: Vec<f64> = serde_json::from_value(loc["bbox"].clone()).unwrap();
            let size: Vec<f64> = serde_json::from_value(loc["pageSize"].clone()).unwrap();
            assert!(bbox[0] < bbox[2] && bbox[1] < bbox[3], "{path} {text}: {bbox:?}");
            assert!(bbox[2] <= size[0] + 1.0 && bbox[3] <= size[1] + 1.0, "{path} {text}: {bbox:?} outside {size:?}");
        }
        assert_eq!(s["pages"].as_u64(), Some(1), "{path}");
    }
    let scan = evidence(&app, k.tenant, by_path("scan.pdf")["id"].as_str().unwrap()).await;
    assert!(scan.iter().map(|r| r.2.as_str()).collect::<String>().contains("tip-toeing along a path"), "OCR text of the scan");
}

#[tokio::test]
async fn limits_and_special_files() {
    let d = tempfile::tempdir().unwrap();
    // Page limit, enforced inside the parser child.
    let pdf = shared("pdf/kz_bmc_infect_dis_2011_11_124.pdf"); // 7 pages
    let real = std::path::PathBuf::from(env!("CARGO_BIN_EXE_mnote"));
    let limits = Limits { timeout: Duration::from_secs(120), memory_bytes: 4 << 30, max_pages: 5, max_rows: 1000 };
    let e = parse_supervised(&real, &pdf, "pdf", &limits).await.unwrap_err();
    assert_eq!(e.code, "too_many_pages", "{e}");
    let _ = d;

    // A FIFO and a link to a device inside a granted directory are never registered or opened.
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/ok.md", "# ok");
    let fifo = app.docs.join("team/pipe.md");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    symlink(std::path::Path::new("/dev/zero"), &app.docs.join("team/zero.md"));
    let (st, r) = k.client.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": app.docs_path("team")})).await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    let paths: Vec<&str> = r["items"].as_array().unwrap().iter().map(|s| s["resourcePath"].as_str().unwrap()).collect();
    assert_eq!(paths, vec!["ok.md"]);
    assert_eq!(r["skippedCount"], 2);
    let (st, e) = k.client.post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": fifo.to_str().unwrap()})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    // Odd file names are fine.
    app.write_doc("team/we ird 名字 #1 (copy).md", "# odd");
    let (st, s) = k
        .client
        .post_json(&format!("/api/kbs/{}/sources", k.kb), json!({"path": app.docs_path("team/we ird 名字 #1 (copy).md")}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{s}");
    assert_eq!(s["resourcePath"], "we ird 名字 #1 (copy).md");
    app.run_jobs().await;
}
