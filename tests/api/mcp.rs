//! The MCP endpoint with the real rmcp client against the real server: initialize, list the
//! tools, search in Chinese and English and follow the returned citation URL into the viewer
//! (same token), read/open/outline/list, resources; tenant isolation, revoked tokens, cookies without
//! a bearer, tool errors with our codes, the rate limit and the size limit, JSON errors, and the
//! knowledge-RAG tools only once a KB is bound.

use std::time::Duration;

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, JsonObject, ReadResourceRequestParams, ResourceContents},
    service::RunningService,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use scraper::{Html, Selector};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

const SCOPED_ZH: &str =
    "# 并发\n\n## 作用域线程\n\n在 Rust 中，使用线程作用域可以借用栈上的数据。\n\n另一段话讲的是通道和消息传递。\n";
const SCOPED_EN: &str = "# Concurrency notes\n\nScoped threads let a closure borrow data from the parent stack frame.\n\n\
Channels send messages between threads.\n\nA paragraph about gardening tomatoes in summer.\n";

type Mcp = RunningService<RoleClient, ()>;

struct Team {
    client: Client,
    tenant: Uuid,
    user: Uuid,
    kb: String,
}

/// Tenant `name`: a granted `<name>/` directory with the two notes in a team KB, indexed.
async fn team(app: &TestApp, name: &str) -> Team {
    let s = app.bootstrap(name, &format!("owner@{name}.test")).await;
    let client = app.api(s.tenant_id, s.user_id).await;
    app.write_doc(&format!("{name}/zh.md"), SCOPED_ZH);
    app.write_doc(&format!("{name}/en.md"), SCOPED_EN);
    let kb = app.indexed_folder_kb(&client, name, json!({"name": format!("{name} notes"), "description": "team notes"})).await;
    let (_, list) = client.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 2, "{list}");
    for src in list["items"].as_array().unwrap() {
        assert_eq!(src["status"], "indexed", "{src}");
    }
    Team { client, tenant: s.tenant_id, user: s.user_id, kb }
}

async fn connect(app: &TestApp, token: &str) -> Result<Mcp, String> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", app.base)).auth_header(token.to_string());
    let transport = StreamableHttpClientTransport::from_config(config);
    tokio::time::timeout(Duration::from_secs(20), ().serve(transport))
        .await
        .map_err(|_| "initialize timed out".to_string())?
        .map_err(|e| e.to_string())
}

async fn call(mcp: &Mcp, name: &str, args: Value) -> CallToolResult {
    let args: JsonObject = match args {
        Value::Object(o) => o,
        other => panic!("arguments must be an object: {other}"),
    };
    mcp.call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A successful call's structured content (and its text, which must carry the citations).
fn ok(r: &CallToolResult) -> (Value, String) {
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let content = r.structured_content.clone().expect("structured content");
    (content, text_of(r))
}

fn text_of(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

/// A failed call's stable code.
fn error_code(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let code = r.structured_content.as_ref().and_then(|s| s["error"]["code"].as_str()).unwrap_or_default().to_string();
    assert!(text_of(r).contains(&code), "the text names the code too: {r:?}");
    code
}

async fn tool_names(mcp: &Mcp) -> Vec<String> {
    mcp.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect()
}

/// Every located result: quote, locator, absolute citationUrl under `base`, and
/// citationMarkdown linking exactly that URL.
fn assert_located(r: &Value, base: &str) -> String {
    let url = r["citationUrl"].as_str().unwrap_or_else(|| panic!("citationUrl: {r}"));
    assert!(url.starts_with(&format!("{base}/sources/")) && url.ends_with("#hl"), "{url}");
    let md = r["citationMarkdown"].as_str().unwrap();
    assert!(md.ends_with(&format!("]({url})")), "{md} links {url}");
    assert_eq!(r["locator"]["schema"], "mnote.evidence_locator.v1", "{r}");
    assert!(r["locator"]["resourcePath"].is_string() && r["locator"]["charRange"].is_array(), "{r}");
    url.to_string()
}

/// Follow a citation URL with a bearer token: the viewer page's highlighted block.
async fn highlighted(app: &TestApp, token: &str, url: &str) -> String {
    let path = url.strip_prefix(&app.base).unwrap().split('#').next().unwrap().to_string();
    let r = app.client().http.get(format!("{}{path}", app.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    let html = Html::parse_document(&r.text().await.unwrap());
    let hl = html.select(&Selector::parse("#hl").unwrap()).next().unwrap_or_else(|| panic!("no #hl in {path}"));
    hl.text().collect::<String>()
}

/// The viewer's highlighted block is the cited passage: it holds the start of its quote.
fn assert_highlights(hl: &str, result: &Value) {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace() && *c != '…').collect::<String>();
    let quote: String = squeeze(result["quote"].as_str().unwrap()).chars().take(12).collect();
    assert!(!quote.is_empty() && squeeze(hl).contains(&quote), "#hl {hl:?} does not hold {quote:?}");
}

async fn mcp_post(app: &TestApp, token: Option<&str>, body: &str) -> reqwest::Response {
    let mut r = app
        .client()
        .http
        .post(format!("{}/mcp", app.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    r.send().await.unwrap()
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}"#;

#[tokio::test]
async fn an_mcp_client_searches_in_both_languages_and_its_citations_open_the_highlighted_block() {
    let app = spawn_app().await;
    let t = team(&app, "acme").await;
    let token = app.token(t.tenant, t.user).await;
    let mcp = connect(&app, &token).await.unwrap();

    let info = mcp.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().map(|s| s.name.as_str()), Some("mnote"));
    assert!(info.capabilities.tools.is_some() && info.capabilities.resources.is_some());
    assert!(info.instructions.as_deref().unwrap_or_default().contains("citationMarkdown"));

    let tools = mcp.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        ["evidence_search", "evidence_read", "evidence_open", "evidence_outline", "list_knowledge_bases"],
        "no KB is bound"
    );
    for tool in &tools {
        assert!(tool.output_schema.is_some(), "{}: output schema", tool.name);
        let d = tool.description.as_deref().unwrap_or_default();
        assert!(d.contains("citationMarkdown") && d.contains("never"), "{}: {d}", tool.name);
    }
    let search = &tools[0];
    assert_eq!(search.input_schema["required"], json!(["query"]));
    assert_eq!(search.input_schema["additionalProperties"], json!(false));

    // Chinese: segmented, the passage under 作用域线程; its URL opens the viewer on it.
    let (zh, text) = ok(&call(&mcp, "evidence_search", json!({"query": "线程作用域", "topK": 3})).await);
    let top = &zh["results"][0];
    assert!(top["quote"].as_str().unwrap().contains("作用域"), "{zh}");
    assert_eq!(top["sourceTitle"], "zh.md");
    assert!(top["locator"]["lineRange"].is_array(), "{top}");
    let url = assert_located(top, &app.base);
    assert!(text.contains(top["citationMarkdown"].as_str().unwrap()), "the text carries the citation: {text}");
    assert_highlights(&highlighted(&app, &token, &url).await, top);

    // English: stemmed.
    let (en, _) =
        ok(&call(&mcp, "evidence_search", json!({"query": "borrowing from the parent stack", "mode": "lexical"})).await);
    let top = &en["results"][0];
    assert_eq!(top["sourceTitle"], "en.md", "{en}");
    let url = assert_located(top, &app.base);
    assert!(top["quote"].as_str().unwrap().contains("borrow data from the parent stack"), "{top}");
    assert_highlights(&highlighted(&app, &token, &url).await, top);

    // The same evidence as the HTTP API, in the same order.
    let (_, api) = t.client.post_json("/api/evidence/search", json!({"query": "线程作用域", "topK": 3})).await;
    let ids = |v: &Value| v["results"].as_array().unwrap().iter().map(|r| r["evidenceId"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&zh), ids(&api));

    // read and open: located too.
    let id = top["evidenceId"].as_str().unwrap();
    let (read, text) = ok(&call(&mcp, "evidence_read", json!({"evidenceId": id, "window": 1})).await);
    assert_eq!(read["sourceTitle"], "en.md");
    let blocks = read["blocks"].as_array().unwrap();
    assert!(blocks.iter().any(|b| b["anchor"] == true && b["evidenceId"] == id), "{read}");
    for b in blocks {
        assert_located(b, &app.base);
    }
    assert!(text.contains("en.md"), "{text}");
    let (open, _) = ok(&call(&mcp, "evidence_open", json!({"evidenceId": id})).await);
    assert_eq!(open["blockFound"], true);
    assert!(open["quote"].as_str().unwrap().contains("Scoped threads"), "{open}");
    assert_eq!(assert_located(&open, &app.base), url);

    // outline: the document's headings, by the sourceId of a result, each with its first passage.
    let (outline, text) = ok(&call(&mcp, "evidence_outline", json!({"sourceId": top["sourceId"]})).await);
    assert_eq!((outline["title"].as_str(), outline["kind"].as_str()), (Some("en.md"), Some("markdown")), "{outline}");
    let section = &outline["sections"][0];
    assert_eq!(section["title"], "Concurrency notes", "{outline}");
    let first = section["firstEvidenceId"].as_str().unwrap();
    assert!(text.starts_with("Outline of en.md (1 section):\n- Concurrency notes (L1"), "{text}");
    assert!(text.contains(first), "{text}");
    let (first_read, _) = ok(&call(&mcp, "evidence_read", json!({"evidenceId": first, "window": 0})).await);
    assert_eq!(first_read["blocks"][0]["text"], "Concurrency notes", "{first_read}");

    // The knowledge bases and their resources.
    let (kbs, text) = ok(&call(&mcp, "list_knowledge_bases", json!({})).await);
    let kb = &kbs["knowledgeBases"][0];
    assert_eq!(
        (kb["id"].as_str(), kb["name"].as_str(), kb["sourceCount"].as_i64()),
        (Some(t.kb.as_str()), Some("acme notes"), Some(2))
    );
    assert_eq!(kb["knowledgeRag"], false);
    assert!(text.contains("acme notes"), "{text}");
    let resources = mcp.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, format!("mnote://kb/{}", t.kb));
    let r = mcp.read_resource(ReadResourceRequestParams::new(resources[0].uri.clone())).await.unwrap();
    let ResourceContents::TextResourceContents { text, mime_type, .. } = &r.contents[0] else { panic!("text resource: {r:?}") };
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    let listing: Value = serde_json::from_str(text).unwrap();
    let mut titles: Vec<&str> = listing["sources"].as_array().unwrap().iter().map(|s| s["title"].as_str().unwrap()).collect();
    titles.sort();
    assert_eq!(titles, ["en.md", "zh.md"]);
    assert!(listing["sources"][0]["url"].as_str().unwrap().starts_with(&format!("{}/sources/", app.base)));
    assert!(mcp.read_resource(ReadResourceRequestParams::new(format!("mnote://kb/{}", Uuid::new_v4()))).await.is_err());
    mcp.cancel().await.ok();
}

#[tokio::test]
async fn another_tenants_token_sees_none_of_the_evidence_and_citations_use_the_public_url() {
    let app = spawn_app_with(|c| c.public_url = Some("https://mnote.example.org".into())).await;
    let a = team(&app, "acme").await;
    let b = app.bootstrap("beta", "owner@beta.test").await;
    let token_a = app.token(a.tenant, a.user).await;
    let token_b = app.token(b.tenant_id, b.user_id).await;

    // Tenant A: citations under MNOTE_PUBLIC_URL (the request came to 127.0.0.1).
    let mcp_a = connect(&app, &token_a).await.unwrap();
    let (hits, _) = ok(&call(&mcp_a, "evidence_search", json!({"query": "线程作用域"})).await);
    let top = &hits["results"][0];
    assert_located(top, "https://mnote.example.org");
    let evidence = top["evidenceId"].as_str().unwrap().to_string();

    // Tenant B: nothing of A's, by search, by id, by KB or resource.
    let mcp_b = connect(&app, &token_b).await.unwrap();
    for q in ["线程作用域", "scoped threads borrow", "tomatoes"] {
        let (v, text) = ok(&call(&mcp_b, "evidence_search", json!({"query": q})).await);
        assert_eq!(v["results"], json!([]), "{q}: {v}");
        assert!(text.starts_with("No passages found."), "{text}");
    }
    assert_eq!(error_code(&call(&mcp_b, "evidence_open", json!({"evidenceId": evidence})).await), "not_found");
    assert_eq!(error_code(&call(&mcp_b, "evidence_read", json!({"evidenceId": evidence})).await), "not_found");
    let (kbs, _) = ok(&call(&mcp_b, "list_knowledge_bases", json!({})).await);
    assert_eq!(kbs["knowledgeBases"], json!([]));
    assert!(mcp_b.list_all_resources().await.unwrap().is_empty());
    assert!(mcp_b.read_resource(ReadResourceRequestParams::new(format!("mnote://kb/{}", a.kb))).await.is_err());

    // A token naming tenant A with B's secret finds nothing either.
    let forged = format!("mnote_{}_{}", a.tenant.simple(), token_b.rsplit('_').next().unwrap());
    assert_eq!(mcp_post(&app, Some(&forged), INIT).await.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn revoked_tokens_cookies_and_bad_requests_are_refused_with_json_errors() {
    let app = spawn_app().await;
    let t = team(&app, "acme").await;
    let (token_id, token) = {
        let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::User(t.user)).await.unwrap();
        let (rec, plain) = mnote::auth::tokens::create(&mut tx, t.tenant, t.user, "mcp").await.unwrap();
        tx.commit().await.unwrap();
        (rec.id, plain)
    };
    let mcp = connect(&app, &token).await.unwrap();
    assert!(tool_names(&mcp).await.contains(&"evidence_search".to_string()));

    // Revoked (through the API): the next request of the same client fails, a new one cannot start.
    assert_eq!(t.client.delete(&format!("/api/tokens/{token_id}")).await, StatusCode::NO_CONTENT);
    assert!(mcp.list_all_tools().await.is_err(), "a revoked token's requests are refused");
    assert!(connect(&app, &token).await.is_err());
    let r = mcp_post(&app, Some(&token), INIT).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
    let (_, v) = json_of(r).await;
    assert_eq!(error_code_of(&v), "unauthorized");

    // A signed-in browser (session cookie, no bearer) is not an MCP client.
    let browser = app.login("owner@acme.test").await;
    let r = browser
        .http
        .post(format!("{}/mcp", app.base))
        .header("content-type", "application/json")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    assert_eq!(error_code_of(&r.json::<Value>().await.unwrap()), "unauthorized");

    // With a good token: what the transport refuses is still our JSON error, never HTML.
    let good = app.token(t.tenant, t.user).await;
    let r = app
        .client()
        .http
        .get(format!("{}/mcp", app.base))
        .bearer_auth(&good)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "stateless: no GET stream");
    assert!(r.headers()["allow"].to_str().unwrap().contains("POST"));
    assert_eq!(error_code_of(&r.json::<Value>().await.unwrap()), "method_not_allowed");
    let r = app
        .client()
        .http
        .post(format!("{}/mcp", app.base))
        .bearer_auth(&good)
        .header("content-type", "application/json")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
    assert_eq!(error_code_of(&r.json::<Value>().await.unwrap()), "invalid_input");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(app.config.mcp_max_body_bytes)
    );
    let r = mcp_post(&app, Some(&good), &big).await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_code_of(&r.json::<Value>().await.unwrap()), "body_too_large");
    let r = mcp_post(&app, Some(&good), INIT).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"), "stateless JSON responses");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["result"]["serverInfo"]["name"], "mnote");
}

fn error_code_of(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_with_invalid_input_and_the_rate_limit_has_its_code() {
    let app = spawn_app_with(|c| c.mcp_rate_limit_per_minute = 8).await;
    let t = team(&app, "acme").await;
    let token = app.token(t.tenant, t.user).await;
    let mcp = connect(&app, &token).await.unwrap();
    let cases = [
        ("evidence_search", json!({"query": 3})),
        ("evidence_search", json!({"query": "x", "kbIds": []})),
        ("evidence_search", json!({"query": "   "})),
        ("evidence_search", json!({"query": "x", "topK": 99})),
        ("evidence_read", json!({"evidenceId": "not-a-uuid"})),
        ("evidence_open", json!({})),
        ("list_knowledge_bases", json!({"all": true})),
    ];
    for (name, args) in &cases {
        assert_eq!(error_code(&call(&mcp, name, args.clone()).await), "invalid_input", "{name} {args}");
    }
    // Tools this caller is not offered are tool errors too.
    assert_eq!(error_code(&call(&mcp, "knowledge_rag_query", json!({"query": "x"})).await), "unknown_tool");
    // The eighth call of the minute is the last one: then `rate_limited`, for this token only.
    let r = call(&mcp, "evidence_search", json!({"query": "作用域"})).await;
    assert_eq!(error_code(&r), "rate_limited");
    let wait = r.structured_content.as_ref().unwrap()["error"]["retryAfterSecs"].as_u64().unwrap();
    assert!((1..=8).contains(&wait), "{wait}");
    // The budget is the member's (issue 31 item 7): a fresh token of the same member is
    // refused too, another member is not.
    let fresh = connect(&app, &app.token(t.tenant, t.user).await).await.unwrap();
    assert_eq!(error_code(&call(&fresh, "evidence_search", json!({"query": "作用域"})).await), "rate_limited");
    let member = app.add_user(t.tenant, "member@acme.test", "member").await;
    let other = connect(&app, &app.token(t.tenant, member).await).await.unwrap();
    ok(&call(&other, "evidence_search", json!({"query": "作用域"})).await);
}

/// Issue 31 item 7: every token had its own budget and `tools/list` / `resources/list` were
/// never counted. Now one member's tokens share one budget and every list, call and read
/// takes from it.
#[tokio::test]
async fn a_members_tokens_share_one_mcp_budget_and_lists_count() {
    let app = spawn_app_with(|c| c.mcp_rate_limit_per_minute = 6).await;
    let t = team(&app, "acme").await;
    let a = connect(&app, &app.token(t.tenant, t.user).await).await.unwrap();
    let b = connect(&app, &app.token(t.tenant, t.user).await).await.unwrap();
    for _ in 0..3 {
        a.list_all_tools().await.unwrap();
    }
    for _ in 0..2 {
        b.list_all_resources().await.unwrap();
    }
    ok(&call(&b, "evidence_search", json!({"query": "作用域"})).await); // the sixth request
    assert_eq!(error_code(&call(&b, "evidence_search", json!({"query": "作用域"})).await), "rate_limited");
    let e = a.list_all_tools().await.expect_err("the list is refused once the budget is spent");
    assert!(format!("{e:?}").contains("rate_limited"), "{e:?}");
    let e = b.list_all_resources().await.expect_err("so is the resource list");
    assert!(format!("{e:?}").contains("rate_limited"), "{e:?}");
    // Minting a new token buys nothing.
    let c = connect(&app, &app.token(t.tenant, t.user).await).await.unwrap();
    assert!(c.list_all_tools().await.is_err());
    let member = app.add_user(t.tenant, "member@acme.test", "member").await;
    let other = connect(&app, &app.token(t.tenant, member).await).await.unwrap();
    assert!(!other.list_all_tools().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_capability_the_team_switched_off_is_neither_listed_nor_callable() {
    let app = spawn_app().await;
    let t = team(&app, "acme").await;
    let token = app.token(t.tenant, t.user).await;
    let mcp = connect(&app, &token).await.unwrap();
    ok(&call(&mcp, "evidence_search", json!({"query": "作用域"})).await);

    let (st, v) = t.client.send_json("PATCH", "/api/page-ai/capabilities", json!({"evidence": false})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let names = tool_names(&mcp).await;
    assert!(!names.iter().any(|n| n.starts_with("evidence_")), "{names:?}");
    assert!(names.iter().any(|n| n == "list_knowledge_bases"), "{names:?}");
    let r = call(&mcp, "evidence_search", json!({"query": "作用域"})).await;
    assert_eq!(error_code(&r), "unknown_tool");
    assert!(text_of(&r).contains("switched off"), "{}", text_of(&r));

    let (st, _) = t.client.send_json("PATCH", "/api/page-ai/capabilities", json!({"evidence": true})).await;
    assert_eq!(st, StatusCode::OK);
    assert!(tool_names(&mcp).await.iter().any(|n| n == "evidence_search"));
    ok(&call(&mcp, "evidence_search", json!({"query": "作用域"})).await);
}

/// A LightRAG stand-in that only answers the binding checks.
async fn healthy_lightrag() -> String {
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/health",
            get(|| async { axum::Json(json!({"status": "healthy", "core_version": "1.5.7-fake", "api_version": "0344"})) }),
        )
        .route("/auth/verify", get(|| async { axum::Json(json!({"status": "ok"})) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test]
async fn knowledge_rag_tools_appear_once_a_kb_is_bound_and_map_references_to_located_passages() {
    let lightrag = healthy_lightrag().await;
    let url = lightrag.clone();
    let app = spawn_app_with(move |c| c.rag.allowed_urls = vec![url]).await;
    let t = team(&app, "acme").await;
    let token = app.token(t.tenant, t.user).await;
    let before = connect(&app, &token).await.unwrap();
    assert!(!tool_names(&before).await.iter().any(|n| n.starts_with("knowledge_rag")));

    let (st, b) = t.client.send_json("PUT", &format!("/api/kbs/{}/knowledge-rag", t.kb), json!({"url": lightrag})).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    let after = connect(&app, &token).await.unwrap();
    assert_eq!(
        tool_names(&after).await,
        [
            "evidence_search",
            "evidence_read",
            "evidence_open",
            "evidence_outline",
            "knowledge_rag_query",
            "knowledge_rag_open_reference",
            "list_knowledge_bases"
        ]
    );
    let (kbs, _) = ok(&call(&after, "list_knowledge_bases", json!({})).await);
    assert_eq!(kbs["knowledgeBases"][0]["knowledgeRag"], true);

    // A LightRAG reference (its file_path names our source) → the located passage.
    let (_, list) = t.client.get_json(&format!("/api/kbs/{}/sources", t.kb)).await;
    let en = list["items"].as_array().unwrap().iter().find(|s| s["resourcePath"].as_str().unwrap().ends_with("en.md")).unwrap();
    let file_path =
        mnote::rag::docs::file_source(en["id"].as_str().unwrap().parse().unwrap(), en["resourcePath"].as_str().unwrap());
    let (r, text) = ok(&call(
        &after,
        "knowledge_rag_open_reference",
        json!({"filePath": file_path, "quote": "Channels send messages between threads."}),
    )
    .await);
    assert_eq!(r["sourceTitle"], "en.md", "{r}");
    assert!(r["quote"].as_str().unwrap().contains("Channels send messages"), "{r}");
    let url = assert_located(&r, &app.base);
    assert!(text.contains(&url), "{text}");
    assert!(highlighted(&app, &token, &url).await.contains("Channels send messages between threads."));
    assert_highlights(&highlighted(&app, &token, &url).await, &r);
}

/// A spreadsheet hit: its locator names the sheet and cells, and the text an MCP client's model
/// reads cites them as a formula would (`'Forecast 2027'!A5:D5`).
#[tokio::test]
async fn spreadsheet_citations_name_the_sheet_and_cells_in_the_tool_text() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    let fixtures = std::path::PathBuf::from(std::env::var_os("MNOTE_FIXTURES_DIR").expect("MNOTE_FIXTURES_DIR (./dev test)"));
    std::fs::create_dir_all(app.docs.join("sheets")).unwrap();
    std::fs::copy(fixtures.join("needles.xlsx"), app.docs.join("sheets/needles.xlsx")).unwrap();
    app.indexed_folder_kb(&client, "sheets", json!({"name": "sheets"})).await;
    let token = app.token(s.tenant_id, s.user_id).await;
    let mcp = connect(&app, &token).await.unwrap();
    let (v, text) = ok(&call(&mcp, "evidence_search", json!({"query": "aurora", "mode": "lexical"})).await);
    let source = &v["results"][0]["locator"];
    assert_eq!((&source["sheet"], &source["cellRange"]), (&json!("Forecast 2027"), &json!("A5:D5")), "{v}");
    assert!(text.contains("'Forecast 2027'!A5:D5"), "{text}");
}
