//! Evidence search through the HTTP API: Chinese/English matching, every mode, filters,
//! RLS/visibility/grant scoping, stale exclusion, degraded fallbacks, read/open tools, the
//! document search and rebuild equality of the search columns.

use std::io::{Cursor, Write};

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

const SCOPED_ZH: &str =
    "# 并发\n\n## 作用域线程\n\n在 Rust 中，使用线程作用域可以借用栈上的数据。\n\n另一段话讲的是通道和消息传递。\n";
const SCOPED_EN: &str = "# Concurrency notes\n\nScoped threads let a closure borrow data from the parent stack frame.\n\n\
Channels send messages between threads; see [[Ownership]] and ask @Alice.\n\nA paragraph about gardening tomatoes in summer.\n";
const OWNERSHIP: &str =
    "# Ownership\n\nEvery value has a single owner; moving it transfers ownership.\n\nAsk @Alice about lifetimes.\n";

/// A minimal DOCX (document.xml only) with one paragraph per string.
pub(crate) fn docx(paragraphs: &[&str]) -> Vec<u8> {
    let body: String = paragraphs.iter().map(|p| format!("<w:p><w:r><w:t>{p}</w:t></w:r></w:p>")).collect();
    let doc = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}<w:sectPr/></w:body></w:document>"#
    );
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in [("[Content_Types].xml", "<Types/>"), ("word/document.xml", doc.as_str())] {
        w.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
        w.write_all(data.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

pub(crate) struct Team {
    pub(crate) client: Client,
    pub(crate) tenant: Uuid,
    user: Uuid,
    kb: String,
    grant: String,
}

/// Tenant `name` with a granted `team/` directory, a team KB holding it, parsed.
pub(crate) async fn team(app: &TestApp, name: &str, files: &[(&str, &[u8])]) -> Team {
    let s = app.bootstrap(name, &format!("owner@{name}.test")).await;
    let client = app.api(s.tenant_id, s.user_id).await;
    let dir = app.docs.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (rel, bytes) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    let (st, g) = client
        .post_json("/api/grants", json!({"path": app.docs_path(name), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, kb) = client.post_json("/api/kbs", json!({"name": format!("{name} kb")})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = client.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path(name)})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    let (_, list) = client.get_json(&format!("/api/kbs/{kb}/sources")).await;
    for src in list["items"].as_array().unwrap() {
        assert_eq!(src["status"], "indexed", "{src}");
    }
    Team { client, tenant: s.tenant_id, user: s.user_id, kb, grant: g["id"].as_str().unwrap().to_string() }
}

pub(crate) async fn search(c: &Client, body: Value) -> Value {
    let (st, v) = c.post_json("/api/evidence/search", body).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["schema"], "mnote.evidence_search_response.v1");
    assert_eq!(v["ok"], true);
    v
}

pub(crate) fn results(v: &Value) -> &Vec<Value> {
    v["results"].as_array().unwrap()
}

/// Distinct resource paths of the results, in rank order.
fn paths(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in results(v) {
        let p = r["source"]["resourcePath"].as_str().unwrap().to_string();
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The highlighted substrings of a result (code-point ranges of its quote).
fn marked(r: &Value) -> Vec<String> {
    let chars: Vec<char> = r["quote"].as_str().unwrap().chars().collect();
    r["highlights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| chars[h[0].as_u64().unwrap() as usize..h[1].as_u64().unwrap() as usize].iter().collect())
        .collect()
}

#[tokio::test]
async fn chinese_and_english_queries_match_segmented_and_stemmed_text_in_markdown_and_docx() {
    let app = spawn_app().await;
    let report = docx(&["第三章 线程", "在 Rust 中，使用线程作用域可以借用栈上的数据。", "无关的段落。"]);
    let t =
        team(&app, "acme", &[("zh.md", SCOPED_ZH.as_bytes()), ("en.md", SCOPED_EN.as_bytes()), ("report.docx", &report)]).await;

    for q in ["线程作用域", "作用域 线程"] {
        let v = search(&t.client, json!({"query": q, "mode": "lexical"})).await;
        let found = paths(&v);
        assert!(found.contains(&"zh.md".to_string()) && found.contains(&"report.docx".to_string()), "{q}: {found:?}");
        let top = results(&v)
            .iter()
            .find(|r| r["quote"].as_str().unwrap().contains("使用线程作用域可以借用栈上的数据"))
            .expect("the sentence");
        assert!(marked(top).iter().any(|m| m.contains("作用域")), "{:?}", marked(top));
        // Located evidence: a locator and the one server-built URL.
        assert_eq!(top["source"]["schema"], "mnote.evidence_locator.v1");
        let url = top["openAction"]["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!(
                "/sources/{}/view?evidence={}",
                top["source"]["sourceId"].as_str().unwrap(),
                top["evidenceId"].as_str().unwrap()
            )),
            "{url}"
        );
        assert_eq!(top["openAction"]["type"], "mnote.open_resource_locator");
        assert!(top["citationMarkdown"].as_str().unwrap().ends_with(&format!("]({url})")));
    }
    // The Markdown hit carries its heading path and line range.
    let v = search(&t.client, json!({"query": "线程作用域", "mode": "lexical", "kinds": ["markdown"]})).await;
    let md =
        results(&v).iter().find(|r| r["source"]["blockId"] != "b1" && r["quote"].as_str().unwrap().contains("借用")).unwrap();
    assert_eq!(md["source"]["sectionPath"], json!(["并发", "作用域线程"]));
    assert_eq!(md["source"]["lineRange"], json!([5, 5]));
    assert_eq!(md["citationMarkdown"].as_str().unwrap().split(']').next().unwrap(), "[zh.md · §作用域线程");

    // English: stemming both ways.
    let v = search(&t.client, json!({"query": "borrowing", "mode": "lexical"})).await;
    assert_eq!(paths(&v)[0], "en.md");
    assert_eq!(marked(&results(&v)[0]), ["borrow"]);
    let v = search(&t.client, json!({"query": "threads borrowed", "mode": "lexical"})).await;
    assert!(results(&v)[0]["quote"].as_str().unwrap().starts_with("Scoped threads"));
    // Nothing for words that are not there; stop words alone match nothing.
    assert!(results(&search(&t.client, json!({"query": "kubernetes", "mode": "lexical"})).await).is_empty());
    assert!(results(&search(&t.client, json!({"query": "the of and", "mode": "lexical"})).await).is_empty());
}

#[tokio::test]
async fn every_mode_returns_located_evidence_and_hybrid_fuses_in_sql() {
    let app = spawn_app_full(|_| {}, Some(minilm())).await;
    let t = team(
        &app,
        "acme",
        &[("en.md", SCOPED_EN.as_bytes()), ("Ownership.md", OWNERSHIP.as_bytes()), ("zh.md", SCOPED_ZH.as_bytes())],
    )
    .await;
    let embedded = app.run_embeddings().await;
    assert!(embedded >= 8, "{embedded} blocks embedded");
    assert_eq!(app.run_embeddings().await, 0, "the backlog is drained");

    // Vector: a paraphrase with no shared content word finds the scoped-threads paragraph.
    let v = search(&t.client, json!({"query": "lend stack variables to spawned workers", "mode": "vector", "topK": 3})).await;
    assert_eq!(v["mode"], "vector");
    assert!(v.get("degraded").is_none(), "{v}");
    assert!(results(&v)[0]["quote"].as_str().unwrap().starts_with("Scoped threads"), "{v}");

    // Hybrid: both lists fused; a lexical-only word still ranks its block first.
    let v = search(&t.client, json!({"query": "tomatoes gardening", "mode": "hybrid", "topK": 5})).await;
    assert_eq!(v["fusion"]["vectorWeight"], 1.0);
    assert!(results(&v)[0]["quote"].as_str().unwrap().contains("tomatoes"));
    assert!(results(&v).len() <= 5);
    // A Chinese query with the English-only model: the vector side is left out, said so.
    let v = search(&t.client, json!({"query": "线程作用域", "mode": "hybrid"})).await;
    assert_eq!(v["fusion"]["vectorWeight"], 0.0);
    assert_eq!(v["fusion"]["note"], "query_language_not_covered_by_embedder");
    assert_eq!(paths(&v)[0], "zh.md");

    // Graph: from the hit on "Channels … [[Ownership]] … @Alice" to the linked document and
    // to the other block mentioning @Alice.
    let v = search(&t.client, json!({"query": "channels messages", "mode": "graph", "topK": 20})).await;
    let r = results(&v);
    assert!(r[0]["quote"].as_str().unwrap().starts_with("Channels"), "{v}");
    let via: Vec<(&str, &str)> =
        r.iter().filter_map(|x| Some((x["graph"]["edgeKind"].as_str()?, x["source"]["resourcePath"].as_str()?))).collect();
    assert!(via.contains(&("markdown_links_to", "Ownership.md")), "{via:?}");
    assert!(
        r.iter().any(|x| x["graph"]["edgeKind"] == "block_mentions_entity" && x["quote"].as_str().unwrap().contains("lifetimes")),
        "{v}"
    );
    for x in r {
        assert_eq!(x["source"]["schema"], "mnote.evidence_locator.v1");
        if let Some(hop) = x["graph"]["hop"].as_u64() {
            assert!((1..=2).contains(&hop));
        }
    }

    // Every vector row carries its model; a different model's rows are never used.
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    let models: Vec<String> =
        sqlx::query_scalar("select distinct model from evidence_embedding").fetch_all(&mut *tx).await.unwrap();
    assert_eq!(models, ["sentence-transformers/all-MiniLM-L6-v2"]);
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn without_an_embedder_vector_and_hybrid_degrade_to_lexical_and_say_so() {
    let app = spawn_app().await;
    let t = team(&app, "acme", &[("en.md", SCOPED_EN.as_bytes())]).await;
    for mode in ["vector", "hybrid"] {
        let v = search(&t.client, json!({"query": "borrow", "mode": mode})).await;
        assert_eq!(v["mode"], mode);
        assert_eq!(v["degraded"], true);
        assert_eq!(v["degradedReason"], "embedder_unavailable");
        assert!(results(&v)[0]["quote"].as_str().unwrap().starts_with("Scoped threads"));
    }
    let v = search(&t.client, json!({"query": "borrow", "mode": "lexical"})).await;
    assert!(v.get("degraded").is_none());
}

/// A vector statement whose backend dies (here: a policy on `evidence_embedding` that
/// terminates its own connection, the way a pgvector build that does not suit the CPU kills
/// it) degrades the service instead of crash-looping it: hybrid search answers lexically,
/// the backlog backs off and then pauses, `/readyz` says so, and everything heals by itself.
#[tokio::test]
async fn a_dying_vector_backend_degrades_search_pauses_the_backlog_and_recovers() {
    use mnote::search::{
        vector_health::{CODE, PAUSE_AFTER},
        vectors,
    };
    let app = spawn_app_full(
        |c| {
            c.vector_retry_min = std::time::Duration::from_millis(40);
            c.vector_retry_max = std::time::Duration::from_millis(320);
        },
        Some(minilm()),
    )
    .await;
    let e = app.embedder.clone().unwrap();
    let health = app.vector_health.clone();
    let t = team(&app, "acme", &[("en.md", SCOPED_EN.as_bytes())]).await;
    assert!(vectors::guarded_round(&app.pool, &e, &health).await.unwrap().unwrap() > 0);
    let v = search(&t.client, json!({"query": "borrow", "mode": "hybrid"})).await;
    assert!(v.get("degraded").is_none(), "{v}");
    let (st, r) = app.client().get_json("/readyz").await;
    assert_eq!((st, r["status"].as_str(), r["vector"]["status"].as_str()), (StatusCode::OK, Some("ready"), Some("ok")), "{r}");

    // From now on every statement that reads or writes a vector loses its connection (57P01).
    for sql in [
        "create function mnote_t_die() returns boolean language plpgsql as $$
         begin perform pg_terminate_backend(pg_backend_pid()); perform pg_sleep(30); return true; end $$",
        "create policy mnote_t_die on evidence_embedding as restrictive for all using (mnote_t_die()) with check (mnote_t_die())",
    ] {
        sqlx::query(sql).execute(&app.owner_pool).await.unwrap();
    }

    // The search whose vector statement dies is answered lexically, and says why.
    let v = search(&t.client, json!({"query": "borrow", "mode": "hybrid"})).await;
    assert_eq!((v["degraded"].as_bool(), v["degradedReason"].as_str()), (Some(true), Some(CODE)), "{v}");
    assert!(results(&v)[0]["quote"].as_str().unwrap().starts_with("Scoped threads"), "{v}");
    assert!(!health.is_healthy());
    // Later searches skip the vector side while it is unhealthy; lexical is untouched.
    let v = search(&t.client, json!({"query": "borrow", "mode": "vector"})).await;
    assert_eq!(v["degradedReason"], CODE, "{v}");
    assert!(!results(&v).is_empty());
    assert!(search(&t.client, json!({"query": "borrow", "mode": "lexical"})).await.get("degraded").is_none());
    let (st, r) = app.client().get_json("/readyz").await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!((r["status"].as_str(), r["database"].as_str()), (Some("degraded"), Some("ok")), "{r}");
    assert_eq!((r["vector"]["status"].as_str(), r["vector"]["code"].as_str()), (Some("backing_off"), Some(CODE)), "{r}");

    // New blocks wait for vectors; the backlog's attempts fail, back off, and then pause.
    app.write_doc("acme/more.md", "# More\n\nScoped threads can borrow locals from the stack.\n");
    let (st, r) = t.client.post_json(&format!("/api/kbs/{}/sources", t.kb), json!({"path": app.docs_path("acme/more.md")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    let mut attempts = 0;
    while health.report().failures < PAUSE_AFTER {
        assert!(attempts < 2000, "the backlog never paused: {:?}", health.report());
        attempts += 1;
        // Never an error: a dead backend is recorded, not returned.
        assert_eq!(vectors::guarded_round(&app.pool, &e, &health).await.unwrap(), None);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let report = health.report();
    assert_eq!((report.status, report.code), ("paused", Some(CODE)), "{report:?}");
    assert!(attempts > PAUSE_AFTER as usize, "attempts were spaced out by the backoff, not made back to back ({attempts})");
    let (_, r) = app.client().get_json("/readyz").await;
    assert_eq!(r["vector"]["status"], "paused", "{r}");

    // The database is healthy again: the next due attempt writes the vectors and heals.
    sqlx::query("drop policy mnote_t_die on evidence_embedding").execute(&app.owner_pool).await.unwrap();
    let mut embedded = None;
    for _ in 0..2000 {
        embedded = vectors::guarded_round(&app.pool, &e, &health).await.unwrap();
        if embedded.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(embedded.unwrap() > 0, "the new document's blocks got vectors");
    assert!(health.is_healthy());
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    assert_eq!(vectors::pending_count(&mut tx, &vectors::Space::of(e.as_ref())).await.unwrap(), 0);
    tx.commit().await.unwrap();
    let (_, r) = app.client().get_json("/readyz").await;
    assert_eq!((r["status"].as_str(), r["vector"]["status"].as_str()), (Some("ready"), Some("ok")), "{r}");
    let v = search(&t.client, json!({"query": "borrow locals", "mode": "hybrid"})).await;
    assert!(v.get("degraded").is_none(), "{v}");
    assert_eq!(v["fusion"]["vectorWeight"], 1.0);
}

#[tokio::test]
async fn bad_requests_get_stable_codes() {
    let app = spawn_app().await;
    let t = team(&app, "acme", &[("en.md", SCOPED_EN.as_bytes())]).await;
    for body in [
        json!({"query": "", "mode": "lexical"}),
        json!({"query": "x", "topK": 0}),
        json!({"query": "x", "topK": 101}),
        json!({"query": "x", "mode": "fuzzy"}),
        json!({"query": "x", "kinds": ["exe"]}),
        json!({"query": "x", "unknownField": 1}),
        json!({"nope": true}),
    ] {
        let (st, e) = t.client.post_json("/api/evidence/search", body.clone()).await;
        assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{body}: {e}");
    }
    // A bearer token that is not (or no longer) valid.
    let mut anon = app.client();
    anon.bearer = Some(format!("mnote_{}_forged", t.tenant.simple()));
    let (st, e) = anon.post_json("/api/evidence/search", json!({"query": "x"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNAUTHORIZED, "unauthorized"));
}

#[tokio::test]
async fn filters_narrow_results_and_ocr_text_can_be_left_out() {
    let app = spawn_app().await;
    let report = docx(&["Borrow checker report for the scoped threads design."]);
    let image = std::fs::read(crate::fixtures::testdata("images/ocr_crom.png")).unwrap();
    let t =
        team(&app, "acme", &[("notes/en.md", SCOPED_EN.as_bytes()), ("reports/report.docx", &report), ("scans/en.png", &image)])
            .await;
    let all = search(&t.client, json!({"query": "borrow threads", "mode": "lexical"})).await;
    assert_eq!(paths(&all).len(), 2, "{all}");
    let v = search(&t.client, json!({"query": "borrow threads", "mode": "lexical", "kinds": ["docx"]})).await;
    assert_eq!(paths(&v), ["reports/report.docx"]);
    let v = search(&t.client, json!({"query": "borrow threads", "mode": "lexical", "pathPrefix": "notes/"})).await;
    assert_eq!(paths(&v), ["notes/en.md"]);
    let v = search(&t.client, json!({"query": "borrow threads", "mode": "lexical", "kbIds": [Uuid::new_v4()]})).await;
    assert!(results(&v).is_empty());
    let v = search(&t.client, json!({"query": "borrow threads", "mode": "lexical", "kbIds": [t.kb]})).await;
    assert_eq!(paths(&v).len(), 2);
    let v = search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 1})).await;
    assert_eq!(results(&v).len(), 1);

    // The OCR'd image: a word from it is found with includeOcr (default), not without.
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    let ocr_text: String = sqlx::query_scalar("select text from evidence_block where is_ocr order by length(text) desc limit 1")
        .fetch_one(&mut *tx)
        .await
        .expect("the image has OCR blocks");
    tx.commit().await.unwrap();
    let word = ocr_text
        .split_whitespace()
        .find(|w| w.len() >= 5 && w.chars().all(char::is_alphabetic))
        .expect("an OCR word")
        .to_string();
    let v = search(&t.client, json!({"query": word, "mode": "lexical"})).await;
    assert!(paths(&v).contains(&"scans/en.png".to_string()), "{word}: {v}");
    let v = search(&t.client, json!({"query": word, "mode": "lexical", "includeOcr": false})).await;
    assert!(!paths(&v).contains(&"scans/en.png".to_string()), "{word}: {v}");

    // The compatibility document search: OCR only on request, with its boundary.
    let (st, d) = t.client.get_json(&format!("/api/search/documents?q={word}")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(d["boundary"]["kind"], "ordinary_local_search");
    assert!(d["results"].as_array().unwrap().iter().all(|r| r["path"] != "scans/en.png"), "{d}");
    let (_, d) = t.client.get_json(&format!("/api/search/documents?q={word}&includeOcr=true")).await;
    assert_eq!(d["boundary"]["kind"], "ordinary_local_search_with_knowledge_ocr");
    let hit = d["results"].as_array().unwrap().iter().find(|r| r["path"] == "scans/en.png").expect("the image").clone();
    assert_eq!(hit["matchSource"], "ocr");
    let (_, d) = t.client.get_json("/api/search/documents?q=borrow%20threads").await;
    let docs = d["results"].as_array().unwrap();
    assert_eq!(docs.len(), 2, "grouped by document: {d}");
    let md = docs.iter().find(|r| r["path"] == "notes/en.md").unwrap();
    assert_eq!(md["matchSource"], "markdown");
    assert_eq!(docs.iter().find(|r| r["path"] == "reports/report.docx").unwrap()["matchSource"], "resource");
}

#[tokio::test]
async fn results_respect_tenants_private_kbs_revoked_grants_and_stale_files() {
    let app = spawn_app().await;
    let a = team(&app, "alpha", &[("en.md", SCOPED_EN.as_bytes()), ("gone.md", b"# Gone\n\nborrow me before I vanish\n")]).await;
    let b = team(&app, "beta", &[("other.md", b"# Other\n\nnothing in common\n")]).await;
    let q = json!({"query": "borrow", "mode": "lexical"});
    assert_eq!(paths(&search(&a.client, q.clone()).await).len(), 2);

    // Another tenant: nothing, even naming A's KB.
    assert!(results(&search(&b.client, q.clone()).await).is_empty());
    assert!(results(&search(&b.client, json!({"query": "borrow", "kbIds": [a.kb], "mode": "lexical"})).await).is_empty());
    let hit = results(&search(&a.client, q.clone()).await)[0].clone();
    for tool in ["/api/evidence/read", "/api/evidence/open"] {
        let (st, e) = b.client.post_json(tool, json!({"evidenceId": hit["evidenceId"]})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "{tool}");
        let (st, _) = b.client.post_json(tool, json!({"locator": hit["source"]})).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{tool} by locator");
    }

    // A private KB: a member of the tenant who is not in it sees nothing.
    let outsider = app.add_user(a.tenant, "outsider@alpha.test", "member").await;
    let co = app.api(a.tenant, outsider).await;
    assert_eq!(paths(&search(&co, q.clone()).await).len(), 2, "team KB: visible");
    let (st, _) = a.client.send_json("PATCH", &format!("/api/kbs/{}", a.kb), json!({"visibility": "private"})).await;
    assert_eq!(st, StatusCode::OK);
    assert!(results(&search(&co, q.clone()).await).is_empty());
    assert!(results(&search(&co, json!({"query": "borrow", "mode": "graph", "kbIds": [a.kb]})).await).is_empty());
    let (st, _) = co.post_json("/api/evidence/read", json!({"evidenceId": hit["evidenceId"]})).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, d) = co.get_json("/api/search/documents?q=borrow&includeOcr=true").await;
    assert!(d["results"].as_array().unwrap().is_empty());
    assert_eq!(paths(&search(&a.client, q.clone()).await).len(), 2, "the owner still sees it");

    // A deleted file: stale, left out; flagged when asked for.
    std::fs::remove_file(app.docs.join("alpha/gone.md")).unwrap();
    let mut tx = TenantTx::begin(&app.pool, a.tenant, Scope::System).await.unwrap();
    mnote::ingest::watch::rescan_tenant(&mut tx, a.tenant).await.unwrap();
    tx.commit().await.unwrap();
    app.run_jobs().await;
    assert_eq!(paths(&search(&a.client, q.clone()).await), ["en.md"]);
    let v = search(&a.client, json!({"query": "borrow", "mode": "lexical", "includeStale": true})).await;
    let gone = results(&v).iter().find(|r| r["source"]["resourcePath"] == "gone.md").expect("flagged stale").clone();
    assert_eq!(gone["stale"], true);
    let (st, o) = a.client.post_json("/api/evidence/open", json!({"evidenceId": gone["evidenceId"]})).await;
    assert_eq!((st, o["stale"].as_bool()), (StatusCode::OK, Some(true)));

    // A revoked grant: nothing from it, whatever the filters say.
    let (st, _) = a.client.delete_json(&format!("/api/grants/{}", a.grant)).await;
    assert_eq!(st, StatusCode::OK);
    for body in [
        q.clone(),
        json!({"query": "borrow", "mode": "lexical", "includeStale": true, "kbIds": [a.kb]}),
        json!({"query": "borrow", "mode": "graph", "includeStale": true}),
    ] {
        assert!(results(&search(&a.client, body.clone()).await).is_empty(), "{body}");
    }
    let _ = (a.user, b.tenant, b.user, b.kb, b.grant);
}

#[tokio::test]
async fn read_and_open_give_context_and_the_same_url_as_search() {
    let app = spawn_app().await;
    let t = team(&app, "acme", &[("zh.md", SCOPED_ZH.as_bytes())]).await;
    let v = search(&t.client, json!({"query": "线程作用域", "mode": "lexical"})).await;
    let hit = results(&v).iter().find(|r| r["quote"].as_str().unwrap().contains("借用")).unwrap().clone();

    let (st, r) = t.client.post_json("/api/evidence/read", json!({"evidenceId": hit["evidenceId"], "window": 1})).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(r["schema"], "mnote.evidence_read_response.v1");
    assert_eq!(r["anchor"]["evidenceId"], hit["evidenceId"]);
    assert!(r["anchor"]["text"].as_str().unwrap().contains("线程作用域"));
    assert_eq!(r["previous"].as_array().unwrap().len(), 1);
    assert_eq!(r["previous"][0]["text"], "作用域线程", "the heading before it");
    assert_eq!(r["next"][0]["text"], "另一段话讲的是通道和消息传递。");
    assert_eq!(r["sectionPath"], json!(["并发", "作用域线程"]));
    assert!(r["sectionBlocks"].as_array().unwrap().iter().any(|b| b["text"] == "另一段话讲的是通道和消息传递。"));
    assert_eq!((r["sourceTitle"].as_str(), r["resourceKind"].as_str()), (Some("zh.md"), Some("markdown")));
    let (st, e) = t.client.post_json("/api/evidence/read", json!({"evidenceId": hit["evidenceId"], "window": 99})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));

    // open: by id and by locator, the same URL the search gave.
    for body in [json!({"evidenceId": hit["evidenceId"]}), json!({"locator": hit["source"]})] {
        let (st, o) = t.client.post_json("/api/evidence/open", body.clone()).await;
        assert_eq!(st, StatusCode::OK, "{o}");
        assert_eq!(o["schema"], "mnote.evidence_open_response.v1");
        assert_eq!(o["openAction"], hit["openAction"], "{body}");
        assert_eq!(o["citationMarkdown"], hit["citationMarkdown"]);
    }
    // A locator whose block id moved (file edited) is found by its text fingerprint.
    let mut moved = hit["source"].clone();
    moved["blockId"] = json!("b999");
    let (_, o) = t.client.post_json("/api/evidence/open", json!({"locator": moved})).await;
    assert_eq!(o["openAction"], hit["openAction"]);
    for (body, code) in [
        (json!({}), StatusCode::UNPROCESSABLE_ENTITY),
        (json!({"locator": {"sourceId": "nope"}}), StatusCode::UNPROCESSABLE_ENTITY),
        (json!({"evidenceId": Uuid::new_v4()}), StatusCode::NOT_FOUND),
    ] {
        let (st, _) = t.client.post_json("/api/evidence/open", body.clone()).await;
        assert_eq!(st, code, "{body}");
    }
}

async fn snapshot(app: &TestApp, tenant: Uuid) -> (Vec<(Uuid, String, i32)>, Vec<(String, i32)>, (i64, i64)) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let blocks =
        sqlx::query_as("select id, lex::text, lex_len from evidence_block order by id").fetch_all(&mut *tx).await.unwrap();
    let terms =
        sqlx::query_as("select term, df from evidence_term_stat where df > 0 order by term").fetch_all(&mut *tx).await.unwrap();
    let kb = sqlx::query_as("select coalesce(sum(blocks), 0)::int8, coalesce(sum(total_len), 0)::int8 from evidence_kb_stat")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    (blocks, terms, kb)
}

#[tokio::test]
async fn bm25_statistics_follow_the_blocks_and_rebuild_identically() {
    let app = spawn_app().await;
    let t = team(&app, "acme", &[("zh.md", SCOPED_ZH.as_bytes()), ("en.md", SCOPED_EN.as_bytes())]).await;
    let before = snapshot(&app, t.tenant).await;
    let (blocks, terms, (n, total)) = &before;
    assert_eq!(*n as usize, blocks.len());
    assert_eq!(*total, blocks.iter().map(|b| b.2 as i64).sum::<i64>());
    let df = |term: &str| terms.iter().find(|t| t.0 == term).map(|t| t.1);
    assert_eq!(df("borrow"), Some(1));
    assert!(df("作用域").is_some());

    // Rebuild from artifacts only: same rows, same statistics.
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    mnote::ingest::index::rebuild_all(&mut tx, t.tenant).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(snapshot(&app, t.tenant).await, before);

    // Deleting (and purging) a source takes its terms out of the statistics.
    let (_, list) = t.client.get_json(&format!("/api/kbs/{}/sources", t.kb)).await;
    let en = list["items"].as_array().unwrap().iter().find(|s| s["resourcePath"] == "en.md").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(t.client.delete(&format!("/api/sources/{en}")).await, StatusCode::NO_CONTENT);
    // Removal is a soft delete: the source leaves search at once; its rows (and their
    // statistics) go when the purge takes it after the grace period.
    assert!(results(&search(&t.client, json!({"query": "borrow", "mode": "lexical"})).await).is_empty());
    mnote::sources::purge::run_once(&app.pool, std::time::Duration::ZERO).await.unwrap();
    let (blocks, terms, (n, _)) = snapshot(&app, t.tenant).await;
    assert_eq!(n as usize, blocks.len());
    assert!(!terms.iter().any(|t| t.0 == "borrow"), "df of a deleted block's term drops to 0");
    // An edited file replaces its terms.
    std::fs::write(app.docs.join("acme/zh.md"), "# 并发\n\n通道传递消息。\n").unwrap();
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    mnote::ingest::watch::rescan_tenant(&mut tx, t.tenant).await.unwrap();
    tx.commit().await.unwrap();
    app.run_jobs().await;
    let (blocks, terms, (n, _)) = snapshot(&app, t.tenant).await;
    assert_eq!(n as usize, blocks.len());
    assert!(!terms.iter().any(|t| t.0 == "作用域"));
    assert!(results(&search(&t.client, json!({"query": "线程作用域", "mode": "lexical"})).await).is_empty());
    assert_eq!(paths(&search(&t.client, json!({"query": "通道", "mode": "lexical"})).await), ["zh.md"]);
}

/// The in-memory BM25 mirror and the SQL ranking give the same ranking (ids in order, scores
/// to float precision) for every filter; a stale mirror is never used; the background mode
/// answers from SQL while it rebuilds; filters that remove many top hits make it look deeper.
#[tokio::test]
async fn the_lexical_mirror_ranks_exactly_like_sql_and_is_never_used_stale() {
    use mnote::search::{
        memindex::MemIndex,
        query::{self, Engine, Mode, SearchRequest},
    };
    let app = spawn_app().await;
    let many_stale: String = (0..12).map(|i| format!("Borrow borrow note {i}.\n\n")).collect();
    let t = team(
        &app,
        "mirror",
        &[
            ("a/zh.md", SCOPED_ZH.as_bytes()),
            ("a/en.md", SCOPED_EN.as_bytes()),
            ("b/own.md", OWNERSHIP.as_bytes()),
            ("b/notes.docx", &docx(&["Scoped threads borrow from the stack.", "Ownership moves values between threads."])),
            ("b/stale.md", format!("# Stale\n\n{many_stale}").as_bytes()),
        ],
    )
    .await;
    // A second KB over part of the same files: idf then comes from both KBs together.
    let (_, kb2) = t.client.post_json("/api/kbs", json!({"name": "second"})).await;
    let kb2 = kb2["id"].as_str().unwrap().to_string();
    let (st, r) = t.client.post_json(&format!("/api/kbs/{kb2}/sources"), json!({"path": app.docs_path("mirror/b")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;

    let sql = Engine::new(None, None);
    let mem = MemIndex::new(app.pool.clone());
    let inline = Engine::new(None, None).with_mem(mem.clone(), true);
    let run = |engine: Engine, req: SearchRequest| {
        let pool = app.pool.clone();
        let (tenant, user) = (t.tenant, t.user);
        async move {
            let mut tx = TenantTx::begin(&pool, tenant, Scope::User(user)).await.unwrap();
            let r = query::run(&mut tx, &engine, &req, 50).await.unwrap();
            tx.commit().await.unwrap();
            r.results.into_iter().map(|h| (h.evidence_id, h.score, h.resource_path)).collect::<Vec<_>>()
        }
    };
    let kb1: Uuid = t.kb.parse().unwrap();
    let kb2_id: Uuid = kb2.parse().unwrap();
    let mut compared = 0;
    for q in [
        "线程作用域",
        "作用域 线程",
        "borrow threads",
        "ownership Alice",
        "scoped threads borrow data from the stack",
        "nothing matches xyzzy",
    ] {
        for (kbs, kinds, prefix, ocr) in [
            (None, None, None, None),
            (Some(vec![kb2_id]), None, None, None),
            (Some(vec![kb1]), Some(vec!["docx".to_string()]), None, None),
            (None, None, Some("b/".to_string()), Some(false)),
        ] {
            let mut req = SearchRequest::new(q, Mode::Lexical);
            req.kb_ids = kbs;
            req.kinds = kinds;
            req.path_prefix = prefix;
            req.include_ocr = ocr;
            let a = run(sql.clone(), req.clone()).await;
            let b = run(inline.clone(), req.clone()).await;
            let ids = |v: &[(Uuid, f64, String)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
            assert_eq!(ids(&a), ids(&b), "{q} {req:?}");
            for (x, y) in a.iter().zip(&b) {
                assert!((x.1 - y.1).abs() <= 1e-5 * x.1.abs().max(1.0), "{q}: {} vs {}", x.1, y.1);
            }
            compared += a.len();
        }
    }
    assert!(compared > 20, "the comparison saw results ({compared})");

    // A stale file's many strong hits are dropped after ranking; the mirror asks for more
    // until the live hit is found.
    std::fs::remove_file(app.docs.join("mirror/b/stale.md")).unwrap();
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    mnote::ingest::watch::rescan_tenant(&mut tx, t.tenant).await.unwrap();
    tx.commit().await.unwrap();
    app.run_jobs().await;
    let mut req = SearchRequest::new("borrow", Mode::Lexical);
    req.top_k = Some(2);
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::User(t.user)).await.unwrap();
    let r = query::search(&mut tx, &inline, &req).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(r.results.len(), 2);
    assert!(r.results.iter().all(|h| h.resource_path != "b/stale.md"), "stale hits are never served");

    // Background mode: a query after a change is answered from SQL (the new text is found at
    // once) and a rebuild at the new version follows.
    let bg_mem = MemIndex::new(app.pool.clone());
    let bg = Engine::new(None, None).with_mem(bg_mem.clone(), false);
    run(bg.clone(), SearchRequest::new("borrow", Mode::Lexical)).await;
    let built = |m: &std::sync::Arc<MemIndex>| m.get(kb1).map(|i| i.version.generation);
    let mut waited = 0;
    while built(&bg_mem).is_none() {
        assert!(waited < 200, "the background build finished");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    let before = built(&bg_mem).unwrap();
    std::fs::write(app.docs.join("mirror/a/new.md"), "# New\n\nA zeppelin floats above the harbour.\n").unwrap();
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    mnote::ingest::watch::rescan_tenant(&mut tx, t.tenant).await.unwrap();
    tx.commit().await.unwrap();
    app.run_jobs().await;
    let hits = run(bg.clone(), SearchRequest::new("zeppelin", Mode::Lexical)).await;
    assert_eq!(hits.iter().map(|h| h.2.as_str()).collect::<Vec<_>>(), ["a/new.md"], "found before any rebuild");
    let mut waited = 0;
    while built(&bg_mem).is_none_or(|g| g == before) {
        assert!(waited < 200, "a rebuild at the new version followed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        run(bg.clone(), SearchRequest::new("zeppelin", Mode::Lexical)).await;
        waited += 1;
    }
    assert_eq!(run(bg, SearchRequest::new("zeppelin", Mode::Lexical)).await.len(), 1);
}

/// `# title` then `## sub` sections with paragraphs, as a DOCX with outline levels.
fn docx_outline(items: &[(Option<u8>, &str)]) -> Vec<u8> {
    let body: String = items
        .iter()
        .map(|(level, text)| match level {
            Some(l) => format!("<w:p><w:pPr><w:outlineLvl w:val=\"{}\"/></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>", l - 1),
            None => format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"),
        })
        .collect();
    let doc = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}<w:sectPr/></w:body></w:document>"#
    );
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in [("[Content_Types].xml", "<Types/>"), ("word/document.xml", doc.as_str())] {
        w.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
        w.write_all(data.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// The demo's Chinese document (Markdown) and the same outline as a DOCX: headings under a
/// title that holds the query words used to be the top hits (short, matched through their
/// section path); now the passages that use the words come first and those headings do not
/// match at all.
#[tokio::test]
async fn headings_match_by_their_own_text_and_passages_using_the_words_rank_first() {
    let app = spawn_app().await;
    let guide = include_str!("../../scripts/demo-docs/线程作用域.md");
    let report = docx_outline(&[
        (Some(1), "线程作用域（scoped threads）"),
        (None, "Rust 1.63 在标准库中加入了 std::thread::scope。使用线程作用域可以借用栈上的数据。"),
        (Some(2), "基本用法"),
        (None, "在闭包里启动任务，然后借用数据。"),
        (Some(2), "注意事项"),
        (None, "不需要 Arc 就能在多个线程之间共享只读数据。"),
        (None, "借用规则照常适用：可变借用只能有一个。"),
    ]);
    let t = team(&app, "acme", &[("线程作用域.md", guide.as_bytes()), ("线程作用域.docx", &report)]).await;
    for mode in ["lexical", "hybrid", "graph"] {
        let v = search(&t.client, json!({"query": "线程作用域", "mode": mode, "topK": 20})).await;
        // Graph mode may add a seed's section heading as a neighbour (it says so): the matches
        // are the results without a graph step.
        let quotes: Vec<&str> =
            results(&v).iter().filter(|r| r["graph"].is_null()).map(|r| r["quote"].as_str().unwrap()).collect();
        assert!(quotes.len() >= 2, "{mode}: {quotes:?}");
        for heading in ["基本用法", "注意事项"] {
            assert!(!quotes.contains(&heading), "{mode}: the heading {heading} matched through its path: {quotes:?}");
        }
        for (i, q) in quotes.iter().take(2).enumerate() {
            assert!(q.contains("线程作用域"), "{mode}: result {i} does not use the words: {quotes:?}");
        }
    }
    // A paragraph is still found by the heading it sits under (the path counts once).
    let v = search(&t.client, json!({"query": "注意事项", "mode": "lexical", "topK": 20})).await;
    let quotes: Vec<&str> = results(&v).iter().map(|r| r["quote"].as_str().unwrap()).collect();
    assert!(quotes.contains(&"注意事项"), "{quotes:?}");
    assert!(quotes.iter().any(|q| q.contains("不需要 Arc")), "paragraphs under the heading: {quotes:?}");
    // The heading itself first: the passages under it use none of the words (found through
    // their path only), so they do not take its place.
    assert_eq!(results(&v)[0]["quote"], "注意事项", "the heading itself first: {quotes:?}");

    // `mnote reindex` applies the rule to existing rows (and ranks the same again).
    let ids = |v: &Value| results(v).iter().map(|r| r["evidenceId"].clone()).collect::<Vec<_>>();
    let before = ids(&search(&t.client, json!({"query": "线程作用域", "mode": "lexical", "topK": 20})).await);
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    let (sources, blocks) = mnote::ingest::index::rebuild_all(&mut tx, t.tenant).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(sources, 2);
    assert!(blocks > 8);
    let after = ids(&search(&t.client, json!({"query": "线程作用域", "mode": "lexical", "topK": 20})).await);
    assert_eq!(before, after, "a rebuild ranks the same");
}

/// Graph mode returns only the lexical matches and what is connected to them: not a long
/// section's every block at one shared score, not repeated boilerplate, nothing at all for a
/// query nothing matches.
#[tokio::test]
async fn graph_mode_does_not_pad_with_unrelated_blocks() {
    let app = spawn_app().await;
    let mut handbook = String::from("# Handbook\n\nScoped threads borrow data from the stack.\n\nAll rights reserved.\n\n");
    for i in 0..12 {
        handbook.push_str(&format!("Unrelated paragraph number {i} about gardening tomatoes.\n\nAll rights reserved.\n\n"));
    }
    let t = team(&app, "acme", &[("handbook.md", handbook.as_bytes()), ("own.md", OWNERSHIP.as_bytes())]).await;

    let v = search(&t.client, json!({"query": "borrow stack", "mode": "graph", "topK": 20})).await;
    let rs = results(&v);
    let quotes: Vec<&str> = rs.iter().map(|r| r["quote"].as_str().unwrap()).collect();
    assert_eq!(quotes[0], "Scoped threads borrow data from the stack.", "{quotes:?}");
    assert!(!quotes.iter().any(|q| q.contains("All rights reserved")), "boilerplate is no neighbour: {quotes:?}");
    assert!(quotes.iter().filter(|q| q.contains("gardening")).count() <= 1, "only the adjacent block: {quotes:?}");
    assert!(rs.len() <= 3, "{quotes:?}");
    for r in &rs[1..] {
        assert!(r["graph"]["hop"].as_u64().is_some(), "a neighbour says how it was reached: {r}");
        assert!(r["score"].as_f64().unwrap() < rs[0]["score"].as_f64().unwrap());
    }
    let seed = rs[0]["evidenceId"].clone();
    assert!(rs[1..].iter().all(|r| r["graph"]["fromEvidenceId"] == seed), "{quotes:?}");

    for mode in ["graph", "lexical", "hybrid", "vector"] {
        let v = search(&t.client, json!({"query": "xyzzyplugh", "mode": mode})).await;
        assert!(results(&v).is_empty(), "{mode}: {v}");
    }
}

/// Paging: `groupBy: "document"` pages through documents (best block first), each with its
/// best `perGroup` blocks, a true total and `nextOffset`; flat paging cuts the same ranking;
/// `sourceIds` lists one document's matches; an unpaged request is answered as before.
#[tokio::test]
async fn paged_search_groups_by_document_and_counts_every_match() {
    let app = spawn_app().await;
    let many = |n: usize, word: &str| -> String {
        let mut s = format!("# {word} notes\n\n");
        for i in 0..n {
            s.push_str(&format!("Paragraph {i} mentions the {word} once among other words to make it longer.\n\n"));
        }
        s
    };
    let (a, b, c) = (
        many(5, "borrow"),
        "# B\n\nWe borrow twice: borrow it.\n\nNo match here.\n\nAnd borrow again.\n",
        "# C\n\nOne borrow.\n",
    );
    let zebra = many(230, "zebra");
    let t =
        team(&app, "acme", &[("a.md", a.as_bytes()), ("b.md", b.as_bytes()), ("c.md", c.as_bytes()), ("z.md", zebra.as_bytes())])
            .await;

    // Unpaged: no paging fields.
    let v = search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 50})).await;
    assert!(v.get("total").is_none() && v.get("groups").is_none(), "{v}");
    let flat: Vec<Value> = results(&v).clone();
    // a.md: heading "borrow notes" + 5 paragraphs; b.md: 2 blocks; c.md: 1.
    assert_eq!(flat.len(), 9, "{:?}", paths(&v));

    let p1 =
        search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 2, "groupBy": "document", "perGroup": 2})).await;
    assert_eq!(p1["total"], 9, "{p1}");
    assert_eq!(p1["totalDocuments"], 3);
    assert!(p1.get("totalIsLowerBound").is_none());
    assert_eq!(p1["offset"], 0);
    assert_eq!(p1["nextOffset"], 2);
    let groups = p1["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let order = paths(&v);
    let mut shown = 0;
    for (g, path) in groups.iter().zip(&order) {
        assert_eq!(g["resourcePath"], *path, "documents in the order of their best block");
        assert_eq!(g["kbId"], t.kb.as_str());
        assert!(g["modifiedAt"].as_str().is_some(), "{g}");
        let [s, e] = [g["resultRange"][0].as_u64().unwrap() as usize, g["resultRange"][1].as_u64().unwrap() as usize];
        assert_eq!(s, shown);
        let in_doc: Vec<&Value> = flat.iter().filter(|r| r["source"]["resourcePath"] == *path).collect();
        assert_eq!(g["total"], in_doc.len());
        assert_eq!(e - s, in_doc.len().min(2));
        for (r, want) in results(&p1)[s..e].iter().zip(&in_doc) {
            assert_eq!(r["evidenceId"], want["evidenceId"], "a document's best blocks, in rank order");
        }
        shown = e;
    }
    assert_eq!(results(&p1).len(), shown);

    let p2 =
        search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 2, "groupBy": "document", "offset": 2})).await;
    assert_eq!(p2["groups"].as_array().unwrap().len(), 1);
    assert_eq!(p2["groups"][0]["resourcePath"], order[2].as_str());
    assert!(p2.get("nextOffset").is_none(), "{p2}");

    // Flat pages cut the same ranking.
    let f = search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 3, "offset": 3})).await;
    let ids: Vec<&Value> = results(&f).iter().map(|r| &r["evidenceId"]).collect();
    let want: Vec<&Value> = flat[3..6].iter().map(|r| &r["evidenceId"]).collect();
    assert_eq!(ids, want);
    assert_eq!(f["total"], 9);
    assert_eq!(f["nextOffset"], 6);

    // One document's matches.
    let src = flat.iter().find(|r| r["source"]["resourcePath"] == "b.md").unwrap()["source"]["sourceId"].clone();
    let one = search(&t.client, json!({"query": "borrow", "mode": "lexical", "sourceIds": [src], "offset": 0})).await;
    assert_eq!(one["total"], 2);
    assert!(results(&one).iter().all(|r| r["source"]["resourcePath"] == "b.md"));

    // More matches than are ranked for paging: lexical still counts them all.
    let z = search(&t.client, json!({"query": "zebra", "mode": "lexical", "groupBy": "document"})).await;
    assert_eq!(z["total"], 231, "{}", z["total"]);
    assert!(z.get("totalIsLowerBound").is_none());
    assert_eq!(z["groups"][0]["total"], z["depth"]);

    // Graph and the degraded modes page too.
    for mode in ["graph", "hybrid", "vector"] {
        let v = search(&t.client, json!({"query": "borrow", "mode": mode, "groupBy": "document", "topK": 10})).await;
        assert_eq!(v["totalDocuments"], 3, "{mode}: {v}");
        assert!(v["total"].as_u64().unwrap() >= 9, "{mode}");
    }

    for bad in [
        json!({"query": "borrow", "perGroup": 0, "groupBy": "document"}),
        json!({"query": "borrow", "offset": 20000}),
        json!({"query": "borrow", "groupBy": "folder"}),
    ] {
        let (st, e) = t.client.post_json("/api/evidence/search", bad.clone()).await;
        assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{bad}: {e}");
    }
}

/// Issue 26 (item 9): a block that is only a heading never comes before its own body, and a
/// passage repeated word for word (a copied file) comes after the other results.
#[tokio::test]
async fn headings_follow_their_body_and_repeated_passages_come_last() {
    let app = spawn_app().await;
    let notes =
        "# Release checklist\n\n## Release checklist steps\n\nTag the release checklist commit, then publish the notes.\n";
    let copy = "# Copy\n\nTag the release checklist commit, then publish the notes.\n";
    let other = "# Other\n\nThe release checklist lives in the wiki as well.\n";
    let t =
        team(&app, "acme", &[("notes.md", notes.as_bytes()), ("copy.md", copy.as_bytes()), ("other.md", other.as_bytes())]).await;
    let v = search(&t.client, json!({"query": "release checklist steps", "mode": "lexical", "topK": 10})).await;
    let quotes: Vec<(&str, &str)> =
        results(&v).iter().map(|r| (r["source"]["resourcePath"].as_str().unwrap(), r["quote"].as_str().unwrap())).collect();
    let at = |path: &str, text: &str| {
        quotes.iter().position(|(p, q)| *p == path && q.contains(text)).unwrap_or_else(|| panic!("{path} {text}: {quotes:?}"))
    };
    let body = at("notes.md", "Tag the release checklist commit");
    let heading = at("notes.md", "Release checklist steps");
    assert!(body < heading, "the body before its heading: {quotes:?}");
    let repeat = at("copy.md", "Tag the release checklist commit");
    assert!(repeat > at("other.md", "lives in the wiki"), "the word-for-word repeat comes last: {quotes:?}");
    assert_eq!(repeat, quotes.len() - 1, "{quotes:?}");
}
