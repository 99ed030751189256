//! One assistant (issue 26 items 1 and 7): a built-in run (no model configured) whose KB is
//! bound to a real `lightrag-server` (tests/api/lightrag.rs) asks LightRAG itself, streams
//! LightRAG's answer into the run (journaled deltas) with citations mapped onto our evidence
//! that highlight the whole span; LightRAG's `[no-context]` reply is never shown raw (a fake
//! LightRAG gives it deterministically); a LightRAG mode asked for on an unbound KB says how to
//! fix it; the former Ask pages lead to the assistant.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{helpers::*, lightrag};

/// Several paragraphs: LightRAG's chunk spans several of our blocks.
const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\nThe robots charge overnight in the north hall, and each robot reports its battery level to the fleet controller every minute.\n\nA charging dock holds four robots at once.\n\nThe night shift checks every dock before midnight.\n";

struct Team {
    app: TestApp,
    client: Client,
    tenant: Uuid,
    kb: String,
}

async fn team(allowed: Vec<String>, docs: &[(&str, &str)]) -> Team {
    let app = spawn_app_with(move |c| c.rag.allowed_urls = allowed).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    for (rel, text) in docs {
        app.write_doc(&format!("team/{rel}"), text);
    }
    let (st, _) = client
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (_, kb) = client.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = client.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("team")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    Team { app, client, tenant: s.tenant_id, kb }
}

async fn bind(t: &Team, url: &str, key: Option<&str>) {
    let (st, b) =
        t.client.send_json("PUT", &format!("/api/kbs/{}/knowledge-rag", t.kb), json!({"url": url, "apiKey": key})).await;
    assert_eq!(st, StatusCode::OK, "{b}");
}

/// Sync passes until LightRAG holds every source (a hang guard of a few minutes).
async fn settle(t: &Team) {
    for _ in 0..960 {
        let r = mnote::rag::sync::pass_tenant(&t.app.pool, &t.app.config, t.tenant, None).await.expect("sync pass");
        if r.sent == 0 && r.pending == 0 && r.deleted == 0 && r.errors.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("LightRAG sync did not settle");
}

/// A built-in run of `hermes` on the team's KB, waited for.
async fn ask(t: &Team, prompt: &str) -> Value {
    let body = json!({
        "requestId": format!("req-{}", Uuid::new_v4().simple()),
        "sessionId": "session-1",
        "agentId": "hermes",
        "prompt": prompt,
        "contextRefs": {"kbIds": [t.kb]},
    });
    let (st, run) = t.client.post_json("/api/page-ai/runs", body).await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    assert_eq!(run["provider"], "builtin", "{run}");
    let id = run["hostRunId"].as_str().unwrap().to_string();
    for _ in 0..2400 {
        let (_, r) = t.client.get_json(&format!("/api/page-ai/runs/{id}")).await;
        if matches!(r["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} did not end");
}

async fn events(t: &Team, run: &Value) -> Vec<Value> {
    let (st, page) =
        t.client.get_json(&format!("/api/page-ai/runs/{}/events?afterSeq=0", run["hostRunId"].as_str().unwrap())).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    page["items"].as_array().unwrap().clone()
}

fn of_kind<'a>(items: &'a [Value], kind: &str) -> Vec<&'a Value> {
    items.iter().filter(|e| e["kind"] == kind).collect()
}

fn deltas(items: &[Value]) -> String {
    of_kind(items, "message.delta").iter().map(|e| e["payload"]["text"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn the_builtin_assistant_streams_lightrags_answer_with_spanning_citations() {
    let server = lightrag::shared();
    let t = team(vec![server.url.clone()], &[("handbook.md", HANDBOOK)]).await;
    bind(&t, &server.url, Some(lightrag::API_KEY)).await;
    settle(&t).await;

    let run = ask(&t, "Where do the robots charge overnight?").await;
    let items = events(&t, &run).await;
    assert_eq!(run["status"], "completed", "{run} {items:#?}");
    // LightRAG was asked through the tool box (journaled), in the automatic mode.
    let rag: Vec<&Value> =
        of_kind(&items, "tool.started").into_iter().filter(|e| e["payload"]["name"] == "mnote.knowledge_rag.query").collect();
    assert!(!rag.is_empty(), "{items:#?}");
    assert_eq!(rag[0]["payload"]["arguments"]["mode"], "mix");
    let done = of_kind(&items, "tool.completed")
        .into_iter()
        .find(|e| e["payload"]["name"] == "mnote.knowledge_rag.query")
        .unwrap()
        .clone();
    assert_eq!(done["payload"]["ok"], true, "{done}");
    assert!(done["payload"]["count"].as_u64().unwrap() >= 1, "{done}");
    // The plan says so, in words.
    let plans = of_kind(&items, "plan.updated");
    let last_plan = plans.last().unwrap()["payload"]["entries"].to_string();
    assert!(last_plan.contains("Ask the LightRAG knowledge graph (graph and passages)"), "{last_plan}");

    // The answer: LightRAG's (the test LLM's canned answer), streamed in more than one piece
    // before the run ended, then the built-in extractive part; the deltas are the answer.
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.starts_with("#### From the LightRAG knowledge graph\n\n"), "{answer}");
    assert!(answer.contains("MOCK ANSWER"), "{answer}");
    assert!(answer.contains("north hall"), "{answer}");
    assert!(!answer.contains("[no-context]"), "{answer}");
    assert_eq!(deltas(&items), answer);
    let first_delta = items.iter().position(|e| e["kind"] == "message.delta").unwrap();
    let rag_done =
        items.iter().position(|e| e["kind"] == "tool.completed" && e["payload"]["name"] == "mnote.knowledge_rag.query").unwrap();
    assert!(first_delta < rag_done, "LightRAG's answer streams while LightRAG writes it");

    // Its citations are ours: the viewer URL names the whole span (`through=`), and the viewer
    // highlights every block of it, the first as `#hl`.
    let link = answer
        .split("](")
        .skip(1)
        .map(|s| &s[..s.find(')').unwrap()])
        .find(|u| u.contains("through="))
        .unwrap_or_else(|| panic!("no spanning citation: {answer}"))
        .to_string();
    assert!(link.starts_with("/sources/") && link.contains("?evidence=") && link.ends_with("#hl"), "{link}");
    let browser = t.app.login("owner@acme.test").await;
    let html = browser.get(link.split('#').next().unwrap()).await.text().await.unwrap();
    let doc = scraper::Html::parse_document(&html);
    let hl = doc.select(&scraper::Selector::parse("#hl.hl").unwrap()).count();
    let span = doc.select(&scraper::Selector::parse(".hl-span").unwrap()).count();
    assert_eq!(hl, 1, "one first block");
    assert!(span >= 1, "the span's later blocks are highlighted too: {html}");
    let spanned: String = doc.select(&scraper::Selector::parse(".hl-span").unwrap()).flat_map(|e| e.text()).collect();
    assert!(spanned.contains("north hall") || spanned.contains("Acme Robotics"), "{spanned}");
    // The receipt checks the citations of both parts.
    assert!(run["receipt"]["total"].as_u64().unwrap() >= 2, "{run}");
}

/// A fake LightRAG whose `/query/stream` gives the canned no-context reply, as 1.5.7 does when
/// nothing is retrieved.
async fn no_context_lightrag() -> String {
    use axum::routing::{get, post};
    let app = axum::Router::new()
        .route(
            "/health",
            get(|| async { axum::Json(json!({"status": "healthy", "core_version": "1.5.7-fake", "api_version": "0344"})) }),
        )
        .route("/auth/verify", get(|| async { axum::Json(json!({"status": "ok"})) }))
        .route(
            "/query",
            post(|| async {
                axum::Json(json!({
                    "response": "Sorry, I'm not able to provide an answer to that question.[no-context]",
                    "references": [],
                }))
            }),
        )
        .route(
            "/query/stream",
            post(|| async {
                (
                    [("content-type", "application/x-ndjson")],
                    "{\"response\": \"Sorry, I'm not able to provide an answer to that question.[no-context]\", \"llm_generated\": false, \"references\": []}\n",
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test]
async fn lightrags_no_context_reply_is_said_in_the_readers_language() {
    let fake = no_context_lightrag().await;
    let t = team(vec![fake.clone()], &[("handbook.md", HANDBOOK)]).await;
    bind(&t, &fake, None).await;

    let run = ask(&t, "Where do the robots charge overnight?").await;
    assert_eq!(run["status"], "completed", "{run}");
    let answer = run["answer"].as_str().unwrap();
    assert!(!answer.contains("no-context") && !answer.contains("Sorry, I'm not able"), "{answer}");
    assert!(answer.starts_with("_The LightRAG knowledge graph found nothing on this question"), "{answer}");
    assert!(answer.contains("north hall"), "our evidence still answers: {answer}");
    // Automatic mode: `mix` found nothing, so `naive` was tried too.
    let items = events(&t, &run).await;
    let modes: Vec<&str> = of_kind(&items, "tool.started")
        .into_iter()
        .filter(|e| e["payload"]["name"] == "mnote.knowledge_rag.query")
        .map(|e| e["payload"]["arguments"]["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["mix", "naive"]);

    let run = ask(&t, "机器人晚上在哪里充电？").await;
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.starts_with("_LightRAG 知识图谱中没有与这个问题相关的内容"), "{answer}");
    assert!(!answer.contains("no-context"), "{answer}");

    // The JSON API does not pass the canned reply on either: no answer, and it says why.
    let (st, r) = t
        .client
        .post_json(
            "/api/knowledge-rag/query",
            json!({"kbIds": [t.kb], "query": "Where do the robots charge overnight?", "answer": true}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!((&r["answer"], &r["noContext"], &r["degraded"]), (&Value::Null, &json!(true), &json!(false)), "{r}");
    assert!(!r.to_string().contains("no-context") && !r.to_string().contains("Sorry, I'm not able"), "{r}");
}

#[tokio::test]
async fn a_lightrag_mode_asked_for_on_an_unbound_kb_says_how_to_fix_it_and_ask_pages_lead_to_the_assistant() {
    let t = team(Vec::new(), &[("handbook.md", HANDBOOK)]).await;
    // Not asked for: the assistant just answers from the evidence.
    let run = ask(&t, "Where do the robots charge overnight?").await;
    let answer = run["answer"].as_str().unwrap();
    assert!(!answer.contains("LightRAG"), "{answer}");
    assert!(answer.contains("north hall"), "{answer}");
    // Asked for (a mode picked in the advanced options): why not, and the link to the fix.
    let (st, v) =
        t.client.send_json("PATCH", "/api/page-ai/preferences", json!({"ai.agent.hermes.knowledge_rag_mode": "local"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let run = ask(&t, "Where do the robots charge overnight?").await;
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.contains("not connected to a LightRAG server"), "{answer}");
    assert!(answer.contains(&format!("(/kbs/{}/knowledge-rag)", t.kb)), "the owner gets the link: {answer}");
    assert!(answer.contains("north hall"), "{answer}");
    let (st, e) =
        t.client.send_json("PATCH", "/api/page-ai/preferences", json!({"ai.agent.hermes.knowledge_rag_mode": "graph"})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "an unknown mode is refused: {e}");

    // The former Ask pages: 303 to the assistant with the KB and the question; an unbound KB
    // gets a notice on the assistant's page.
    let mut browser = t.app.login("owner@acme.test").await;
    let r = browser.get(&format!("/kbs/{}/ask?q=Who+leads%3F&mode=mix", t.kb)).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], format!("/ai?kb={}&ask=Who+leads%3F", t.kb).as_str());
    let (st, page) = browser.page(&format!("/ai?kb={}&ask=Who+leads%3F", t.kb)).await;
    assert_eq!(st, StatusCode::OK);
    assert!(page.contains("not connected to LightRAG"), "{page}");
    assert!(page.contains(">Who leads?</textarea>"), "the question is in the box, not asked yet: {page}");
    let r = browser.get("/ask").await;
    assert_eq!((r.status(), r.headers()["location"].to_str().unwrap()), (StatusCode::SEE_OTHER, "/ai"));
    let r = browser.get(&format!("/kbs/{}/ask", Uuid::new_v4())).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "an unknown KB");
}
