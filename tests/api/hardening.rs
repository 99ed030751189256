//! Issue 31 items 4, 5 and 11: redirects never carry a request past an allow-list; an agent's
//! key does not follow an endpoint change; NUL bytes, a terminated database connection and
//! axum's own rejections answer our JSON errors; the MCP Host check and citation URLs; the
//! evidence ids a run's context may name.

use std::{
    str::FromStr,
    sync::{Arc, Mutex},
    time::Duration,
};

use mnote::db::{Scope, TenantTx};
use reqwest::{StatusCode, header};
use serde_json::{Value, json};
use sqlx::{Connection, postgres::PgConnectOptions};
use uuid::Uuid;

use crate::helpers::*;

/// Requests a listener received: `(method path, headers)`.
type Seen = Arc<Mutex<Vec<(String, Vec<(String, String)>)>>>;

/// A listener that records every request and answers like a healthy LightRAG / model
/// endpoint: the place a redirect points to, which must never be reached.
async fn elsewhere() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let s = s.clone();
        async move {
            let headers =
                req.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect::<Vec<_>>();
            s.lock().unwrap().push((format!("{} {}", req.method(), req.uri()), headers));
            axum::Json(json!({"status": "healthy", "core_version": "1.5.7-elsewhere", "api_version": "0344"}))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

/// An allow-listed endpoint that answers every request with `307` to the same path on `to`.
async fn redirecting(to: &str) -> String {
    let to = to.to_string();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let to = to.clone();
        async move {
            let target = format!("{to}{}", req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/"));
            (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target)], "moved")
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn finished_run(c: &Client, id: &str) -> Value {
    for _ in 0..1200 {
        let (st, run) = c.get_json(&format!("/api/page-ai/runs/{id}")).await;
        assert_eq!(st, StatusCode::OK, "{run}");
        if matches!(run["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} did not end");
}

#[tokio::test]
async fn redirects_from_allow_listed_endpoints_are_not_followed() {
    let (target, seen) = elsewhere().await;
    let trap = redirecting(&target).await;
    let t = trap.clone();
    let app = spawn_app_with(move |c| {
        c.rag.allowed_urls = vec![t.clone()];
        c.agents.allowed_urls = vec![t];
    })
    .await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "kb"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();

    // LightRAG: the binding is saved but its check fails with a code; the key goes nowhere.
    let (st, b) = api
        .send_json("PUT", &format!("/api/kbs/{kb}/knowledge-rag"), json!({"url": trap, "apiKey": "lr-key-must-stay-home"}))
        .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!((b["reachable"].as_bool(), b["error"]["code"].as_str()), (Some(false), Some("knowledge_rag_bad_response")), "{b}");
    assert!(b["error"]["message"].as_str().unwrap().contains("redirects are not followed"), "{b}");
    let (st, r) = api.post_json("/api/knowledge-rag/query", json!({"kbIds": [kb], "query": "anything"})).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(r["errors"][0]["code"], "knowledge_rag_bad_response", "{r}");

    // The model endpoint: the run fails with a code; the conversation goes nowhere.
    let (st, v) = api
        .send_json(
            "PUT",
            "/api/page-ai/agents/hermes/config",
            json!({"endpointUrl": format!("{trap}/v1"), "model": "scripted", "apiKey": "sk-must-stay-home"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, run) = api
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "redirect-1", "sessionId": "s1", "agentId": "hermes", "prompt": "the secret plan is in the prompt"}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let run = finished_run(&api, run["hostRunId"].as_str().unwrap()).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"]["code"], "llm_bad_response", "{run}");
    assert!(run["error"]["message"].as_str().unwrap().contains("redirects are not followed"), "{run}");

    let seen = seen.lock().unwrap().clone();
    assert!(seen.is_empty(), "the redirect target was called: {seen:?}");
}

#[tokio::test]
async fn changing_an_agents_endpoint_drops_its_api_key() {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec!["http://127.0.0.1:9/".into(), "http://127.0.0.2:9/".into()]).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let put = |body: Value| {
        let api = &api;
        async move { api.send_json("PUT", "/api/page-ai/agents/hermes/config", body).await }
    };
    let (st, v) = put(json!({"endpointUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKey": "sk-old"})).await;
    assert_eq!((st, v["hasApiKey"].as_bool()), (StatusCode::OK, Some(true)), "{v}");
    // Same endpoint, another model: the key stays.
    let (st, v) = put(json!({"endpointUrl": "http://127.0.0.1:9/v1", "model": "m2"})).await;
    assert_eq!((st, v["hasApiKey"].as_bool()), (StatusCode::OK, Some(true)), "{v}");
    // Another endpoint without a key: the old key is gone.
    let (st, v) = put(json!({"endpointUrl": "http://127.0.0.2:9/v1", "model": "m2"})).await;
    assert_eq!((st, v["hasApiKey"].as_bool()), (StatusCode::OK, Some(false)), "the key followed the endpoint: {v}");
    // Another endpoint with a key: that key.
    let (st, v) = put(json!({"endpointUrl": "http://127.0.0.1:9/v1", "model": "m2", "apiKey": "sk-new"})).await;
    assert_eq!((st, v["hasApiKey"].as_bool()), (StatusCode::OK, Some(true)), "{v}");

    // The same through the settings (preferences) API.
    let (st, e) = api
        .send_json("PATCH", "/api/page-ai/preferences", json!({"ai.agent.hermes.endpoint_url": "http://127.0.0.2:9/v1"}))
        .await;
    assert_eq!(st, StatusCode::OK, "{e}");
    let (_, v) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!((v["endpointUrl"].as_str(), v["hasApiKey"].as_bool()), (Some("http://127.0.0.2:9/v1"), Some(false)), "{v}");
    let (st, e) = api
        .send_json(
            "PATCH",
            "/api/page-ai/preferences",
            json!({"ai.agent.hermes.endpoint_url": "http://127.0.0.1:9/v1", "ai.agent.hermes.api_key": "sk-third"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{e}");
    let (_, v) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!(v["hasApiKey"], true, "{v}");
    let (st, e) = api
        .send_json("PATCH", "/api/page-ai/preferences", json!({"ai.agent.hermes.endpoint_url": "http://127.0.0.1:9/v1"}))
        .await;
    assert_eq!(st, StatusCode::OK, "{e}");
    let (_, v) = api.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!(v["hasApiKey"], true, "the same endpoint keeps its key: {v}");
}

#[tokio::test]
async fn nul_bytes_anywhere_in_the_api_are_invalid_input_never_500() {
    let app = spawn_app_with(|c| {
        c.agents.allowed_urls = vec!["http://127.0.0.1:9/".into()];
        c.rag.allowed_urls = vec!["http://127.0.0.1:9/".into()];
    })
    .await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    std::fs::create_dir_all(app.docs.join("team")).unwrap();
    app.write_doc("team/a.md", "# A\n\nSome text.\n");
    let kb = app.indexed_folder_kb(&api, "team", json!({"name": "kb"})).await;
    let nul = "a\u{0}b";
    let team = app.docs_path("team");
    let table: Vec<(&str, String, Value)> = vec![
        ("POST", "/api/kbs".into(), json!({"name": nul})),
        ("POST", "/api/kbs".into(), json!({"name": "fine", "description": nul})),
        ("PATCH", format!("/api/kbs/{kb}"), json!({"name": nul})),
        ("PATCH", format!("/api/kbs/{kb}"), json!({"description": nul})),
        ("POST", "/api/grants".into(), json!({"path": format!("{team}/{nul}"), "allMembers": true, "permission": "read_index"})),
        ("POST", format!("/api/kbs/{kb}/sources"), json!({"path": format!("{team}/{nul}.md")})),
        ("POST", "/api/tokens".into(), json!({"name": nul})),
        ("POST", "/api/members".into(), json!({"email": format!("{nul}@acme.test"), "role": "member"})),
        ("POST", "/api/evidence/search".into(), json!({"query": nul})),
        ("POST", "/api/page-ai/runs".into(), json!({"requestId": "r1", "sessionId": "s1", "agentId": "hermes", "prompt": nul})),
        (
            "PATCH",
            "/api/page-ai/preferences".into(),
            json!({"ai.agent.hermes.endpoint_url": format!("http://127.0.0.1:9/{nul}")}),
        ),
        ("PUT", "/api/page-ai/agents/hermes/config".into(), json!({"endpointUrl": "http://127.0.0.1:9/v1", "model": nul})),
        (
            "PUT",
            "/api/page-ai/agents/hermes/config".into(),
            json!({"endpointUrl": "http://127.0.0.1:9/v1", "model": "m", "apiKey": nul}),
        ),
        ("PATCH", "/api/page-ai/preferences".into(), json!({"ai.agent.hermes.default_model": nul})),
        ("PUT", format!("/api/kbs/{kb}/knowledge-rag"), json!({"url": "http://127.0.0.1:9/", "label": nul})),
        ("POST", "/api/knowledge-rag/query".into(), json!({"query": nul})),
        ("POST", "/api/knowledge-rag/open-reference".into(), json!({"filePath": nul, "quote": nul})),
    ];
    let mut failures = Vec::new();
    for (method, path, body) in &table {
        let (st, v) = api.send_json(method, path, body.clone()).await;
        if (st, error_code(&v)) != (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input") {
            failures.push(format!("{method} {path} {body}: {st} {v}"));
        }
    }
    // NUL in a query string or a path segment (no JSON body to check): the database's
    // refusal (SQLSTATE 22021) is invalid input too.
    for path in ["/api/search/documents?q=a%00b", "/api/page-ai/sessions/a%00b/runs", "/api/page-ai/sessions/a%00b/active-run"] {
        let (st, v) = api.get_json(path).await;
        if st.is_server_error() || (st.is_client_error() && error_code(&v) == "<no error code>") {
            failures.push(format!("GET {path}: {st} {v}"));
        }
    }
    assert!(failures.is_empty(), "{} of the requests did not answer invalid_input:\n{}", failures.len(), failures.join("\n"));
    // Nothing was stored.
    let (_, kbs) = api.get_json("/api/kbs").await;
    assert_eq!(kbs["items"].as_array().unwrap().len(), 1, "{kbs}");
}

#[tokio::test]
async fn a_terminated_database_connection_is_503_not_500() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let (st, _) = api.post_json("/api/kbs", json!({"name": "kb"})).await;
    assert_eq!(st, StatusCode::CREATED);
    // Hold a lock the request's query will wait for, then end its backend while it waits.
    let opts = PgConnectOptions::from_str(&admin_url()).unwrap().database(&app.db_name);
    let mut locker = sqlx::PgConnection::connect_with(&opts).await.unwrap();
    sqlx::query("begin").execute(&mut locker).await.unwrap();
    sqlx::query("lock table kb in access exclusive mode").execute(&mut locker).await.unwrap();
    let req = tokio::spawn({
        let api = api.req(reqwest::Method::GET, "/api/kbs");
        async move { json_of(api.send().await.unwrap()).await }
    });
    let mut admin = sqlx::PgConnection::connect_with(&opts).await.unwrap();
    let mut killed = 0;
    for _ in 0..200 {
        killed = sqlx::query_scalar::<_, i64>(
            "select count(*) from (select pg_terminate_backend(pid) from pg_stat_activity
             where datname = $1 and pid <> pg_backend_pid() and wait_event_type = 'Lock') t",
        )
        .bind(&app.db_name)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if killed > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(killed, 1, "the request never waited for the lock");
    sqlx::query("rollback").execute(&mut locker).await.unwrap();
    let (st, v) = req.await.unwrap();
    assert_eq!((st, error_code(&v)), (StatusCode::SERVICE_UNAVAILABLE, "upstream_unavailable"), "{v}");
    // And the next request is served again.
    let (st, v) = api.get_json("/api/kbs").await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

#[tokio::test]
async fn path_and_query_rejections_on_the_api_are_json_invalid_input() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let run = Uuid::new_v4();
    for (method, path) in [
        ("GET", "/api/kbs/not-a-uuid".to_string()),
        ("DELETE", "/api/sources/123".to_string()),
        ("POST", "/api/sources/xyz/restore".to_string()),
        ("GET", "/api/page-ai/runs/nope/events".to_string()),
        ("GET", format!("/api/page-ai/runs/{run}/events?afterSeq=abc")),
        ("GET", "/api/knowledge-rag/status?kbId=nope".to_string()),
        ("GET", "/api/search/documents?q=x&limit=-1".to_string()),
        ("GET", "/api/search/documents".to_string()),
    ] {
        let r = api.req(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), &path).send().await.unwrap();
        let ct = r.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let (st, v) = json_of(r).await;
        assert!(ct.starts_with("application/json"), "{method} {path}: {st} {ct} {v}");
        assert_eq!((st, error_code(&v)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{method} {path}: {v}");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty(), "{v}");
    }
}

#[tokio::test]
async fn mcp_refuses_foreign_hosts_and_citation_urls_never_echo_the_host() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("acme/notes.md", "# Notes\n\nScoped threads borrow data from the parent stack frame.\n");
    app.indexed_folder_kb(&api, "acme", json!({"name": "notes"})).await;
    let token = app.token(s.tenant_id, s.user_id).await;
    let port = app.base.rsplit(':').next().unwrap().to_string();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}"#;
    let search = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"evidence_search","arguments":{"query":"scoped threads","mode":"lexical"}}}"#;
    mnote::platform::http::install_tls_provider();
    let http = reqwest::Client::new();
    let post = |host: String, body: &'static str| {
        let (base, token, http) = (app.base.clone(), token.clone(), http.clone());
        async move {
            http.post(format!("{base}/mcp"))
                .header(header::HOST, host)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, text/event-stream")
                .bearer_auth(token)
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    for host in ["127.0.0.1:1".to_string(), "localhost:1".to_string(), "127.0.0.1".to_string(), "evil.example".to_string()] {
        let (st, v) = json_of(post(host.clone(), init).await).await;
        assert_eq!((st, error_code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "Host {host}: {v}");
    }
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let (st, v) = json_of(post(host.clone(), init).await).await;
        assert_eq!(st, StatusCode::OK, "Host {host}: {v}");
        let (st, v) = json_of(post(host.clone(), search).await).await;
        assert_eq!(st, StatusCode::OK, "Host {host}: {v}");
        let url = v["result"]["structuredContent"]["results"][0]["citationUrl"]
            .as_str()
            .unwrap_or_else(|| panic!("Host {host}: {v}"))
            .to_string();
        assert!(url.starts_with(&format!("{}/sources/", app.base)), "Host {host}: the citation URL {url} is not the server's");
    }
}

#[tokio::test]
async fn a_runs_context_refuses_evidence_ids_the_caller_cannot_see() {
    let app = spawn_app().await;
    let a = app.bootstrap("acme", "owner@acme.test").await;
    let owner = app.api(a.tenant_id, a.user_id).await;
    let member_id = app.add_user(a.tenant_id, "member@acme.test", "member").await;
    let member = app.api(a.tenant_id, member_id).await;
    app.write_doc("acme/open/open.md", "# Open\n\nEveryone may cite this.\n");
    app.write_doc("acme/private/secret.md", "# Secret\n\nOnly the owner may cite this.\n");
    let open_kb = app.indexed_folder_kb(&owner, "acme/open", json!({"name": "open"})).await;
    let private_kb = app.indexed_folder_kb(&owner, "acme/private", json!({"name": "private", "visibility": "private"})).await;
    let b = app.bootstrap("beta", "owner@beta.test").await;
    let beta = app.api(b.tenant_id, b.user_id).await;
    app.write_doc("beta/b.md", "# Beta\n\nAnother team's text.\n");
    app.indexed_folder_kb(&beta, "beta", json!({"name": "beta"})).await;

    let evidence_of = |tenant: Uuid, kb: Option<String>| {
        let pool = app.pool.clone();
        async move {
            let mut tx = TenantTx::begin(&pool, tenant, Scope::System).await.unwrap();
            let id: Uuid = sqlx::query_scalar("select e.id from evidence_block e join source s on s.id = e.source_id where $1::uuid is null or s.kb_id = $1::uuid limit 1")
                .bind(kb.map(|k| k.parse::<Uuid>().unwrap()))
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            id
        }
    };
    let open_ev = evidence_of(a.tenant_id, Some(open_kb)).await;
    let private_ev = evidence_of(a.tenant_id, Some(private_kb)).await;
    let beta_ev = evidence_of(b.tenant_id, None).await;
    for (n, (who, ids)) in
        [(&member, vec![beta_ev]), (&member, vec![open_ev, private_ev]), (&owner, vec![beta_ev])].into_iter().enumerate()
    {
        let (st, v) = ctx_run(who, n as u32, ids.clone()).await;
        assert_eq!((st, error_code(&v)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{ids:?}: {v}");
        assert!(v["error"]["fields"]["contextRefs.evidenceIds"].is_string(), "{v}");
    }
    // What the caller can see is accepted (duplicates included).
    let (st, v) = ctx_run(&member, 10, vec![open_ev, open_ev]).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, v) = ctx_run(&owner, 11, vec![open_ev, private_ev]).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
}

/// Start a builtin run with `evidenceIds` as its context.
async fn ctx_run(c: &Client, n: u32, ids: Vec<Uuid>) -> (StatusCode, Value) {
    c.post_json(
        "/api/page-ai/runs",
        json!({"requestId": format!("ctx-{n}"), "sessionId": "s", "agentId": "hermes", "prompt": "hi", "contextRefs": {"evidenceIds": ids}}),
    )
    .await
}
