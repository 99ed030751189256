//! Conversations (`/api/page-ai/conversations…`): a session of runs, created by its first run;
//! follow-ups carry the earlier turns (to the OpenAI-compatible mock as earlier messages, to the
//! built-in agent as the previous question when the follow-up depends on it); the list, search, rename and delete; each one
//! visible to its own user only (RLS), never to another member, an admin or another tenant.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{helpers::*, lightrag::mock_llm};

const KEY: &str = "sk-test-1234";
const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\n\
The robots charge overnight in the north hall. Each robot reports its battery level every minute.\n";

fn mock_root() -> String {
    mock_llm().trim_end_matches("/v1").to_string()
}

struct Ctx {
    app: TestApp,
    tenant: Uuid,
    owner: Uuid,
    client: Client,
    kb: String,
}

/// A tenant whose KB holds the handbook (indexed); the mock is an allowed agent endpoint.
async fn setup() -> Ctx {
    let app = spawn_app_with(|c| c.agents.allowed_urls = vec![mock_root()]).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("acme/handbook.md", HANDBOOK);
    let (st, g) = client
        .post_json("/api/grants", json!({"path": app.docs_path("acme"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = client.post_json("/api/kbs", json!({"name": "Handbook", "visibility": "team"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = client.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("acme")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    Ctx { tenant: s.tenant_id, owner: s.user_id, app, client, kb }
}

/// Chat only connected to the scripted mock model (a model is connected).
async fn connect_chat_only(c: &Ctx) {
    let (st, v) = c
        .client
        .send_json(
            "PUT",
            "/api/page-ai/agents/chat_only/config",
            json!({"endpointUrl": mock_root(), "model": "scripted", "apiKey": KEY}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
}

/// Start a run in `session`; its id.
async fn start(client: &Client, kb: &str, session: &str, agent: &str, prompt: &str) -> String {
    let (st, run) = client
        .post_json(
            "/api/page-ai/runs",
            json!({
                "requestId": format!("req-{}", Uuid::new_v4()),
                "sessionId": session,
                "agentId": agent,
                "prompt": prompt,
                "contextRefs": {"kbIds": [kb]},
            }),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    run["hostRunId"].as_str().unwrap().to_string()
}

/// Poll the run until it ends (a generous number of rounds, not a time limit).
async fn finished(client: &Client, id: &str) -> Value {
    for _ in 0..1200 {
        let (st, run) = client.get_json(&format!("/api/page-ai/runs/{id}")).await;
        assert_eq!(st, StatusCode::OK, "{run}");
        if matches!(run["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {id} did not end");
}

async fn ask(c: &Ctx, session: &str, prompt: &str) -> Value {
    let id = start(&c.client, &c.kb, session, "hermes", prompt).await;
    let run = finished(&c.client, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    run
}

fn ids(list: &Value) -> Vec<&str> {
    list["items"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn the_first_run_creates_the_conversation_which_is_listed_searched_renamed_and_deleted() {
    let c = setup().await;
    let (st, list) = c.client.get_json("/api/page-ai/conversations").await;
    assert_eq!((st, list), (StatusCode::OK, json!({"items": []})));

    let first = ask(&c, "conv-a", "  Where do the robots\n charge?  ").await;
    let (st, list) = c.client.get_json("/api/page-ai/conversations").await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert_eq!(ids(&list), ["conv-a"]);
    let item = &list["items"][0];
    assert_eq!(item["schema"], "mnote.ai_conversation.v1");
    assert_eq!(item["title"], "Where do the robots charge?", "the first question, on one line");
    assert_eq!(item["runCount"], 1);

    let second = ask(&c, "conv-a", "How often do they report their battery?").await;
    ask(&c, "conv-b", "Who builds the robots?").await;
    let (_, list) = c.client.get_json("/api/page-ai/conversations").await;
    assert_eq!(ids(&list), ["conv-b", "conv-a"], "most recently active first");

    // One conversation: its runs in order, the title still the first question.
    let (st, one) = c.client.get_json("/api/page-ai/conversations/conv-a").await;
    assert_eq!(st, StatusCode::OK, "{one}");
    assert_eq!(one["title"], "Where do the robots charge?");
    assert_eq!(one["runCount"], 2);
    let runs: Vec<&str> = one["runs"].as_array().unwrap().iter().map(|r| r["hostRunId"].as_str().unwrap()).collect();
    assert_eq!(runs, [first["hostRunId"].as_str().unwrap(), second["hostRunId"].as_str().unwrap()]);
    assert!(one["runs"][0]["answer"].as_str().unwrap().contains("north hall"), "{one}");

    // Search: titles and every question, case-insensitive; wildcards are literal.
    for (q, want) in [("battery", vec!["conv-a"]), ("WHO BUILDS", vec!["conv-b"]), ("robots", vec!["conv-b", "conv-a"])] {
        let (st, l) = c.client.get_json(&format!("/api/page-ai/conversations?q={}", mnote::web::urlencode(q))).await;
        assert_eq!(st, StatusCode::OK, "{l}");
        assert_eq!(ids(&l), want, "q={q}");
    }
    for q in ["%", "_", "nothing like this"] {
        let (_, l) = c.client.get_json(&format!("/api/page-ai/conversations?q={}", mnote::web::urlencode(q))).await;
        assert_eq!(ids(&l), Vec::<&str>::new(), "q={q}");
    }
    let (st, e) = c.client.get_json(&format!("/api/page-ai/conversations?q={}", "x".repeat(201))).await;
    assert_eq!((st, e["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")), "{e}");

    // Rename: trimmed; an empty or unknown field is refused; an unknown id is not found.
    let (st, r) = c.client.send_json("PATCH", "/api/page-ai/conversations/conv-a", json!({"title": "  Charging   notes "})).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(r["title"], "Charging notes");
    let (_, one) = c.client.get_json("/api/page-ai/conversations/conv-a").await;
    assert_eq!(one["title"], "Charging notes");
    let (st, e) = c.client.send_json("PATCH", "/api/page-ai/conversations/conv-a", json!({"title": "   "})).await;
    assert_eq!((st, e["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")), "{e}");
    let (st, e) = c.client.send_json("PATCH", "/api/page-ai/conversations/conv-a", json!({"title": "x", "pinned": true})).await;
    assert_eq!((st, e["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")), "{e}");
    let (st, e) = c.client.send_json("PATCH", "/api/page-ai/conversations/nope", json!({"title": "x"})).await;
    assert_eq!((st, e["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{e}");
    let (st, e) = c.client.get_json("/api/page-ai/conversations/bad%20id").await;
    assert_eq!((st, e["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{e}");

    // Delete: gone from the list, and its runs (and their journals) with it.
    assert_eq!(c.client.delete("/api/page-ai/conversations/conv-a").await, StatusCode::NO_CONTENT);
    let (st, _) = c.client.get_json("/api/page-ai/conversations/conv-a").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, list) = c.client.get_json("/api/page-ai/conversations").await;
    assert_eq!(ids(&list), ["conv-b"]);
    for run in [&first, &second] {
        let (st, _) = c.client.get_json(&format!("/api/page-ai/runs/{}", run["hostRunId"].as_str().unwrap())).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
    }
    assert_eq!(c.client.delete("/api/page-ai/conversations/conv-a").await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_conversation_is_its_owners_alone() {
    let c = setup().await;
    let member = c.app.add_user(c.tenant, "member@acme.test", "member").await;
    let member_api = c.app.api(c.tenant, member).await;
    ask(&c, "shared-name", "Where do the robots charge?").await;
    let other = c.app.bootstrap("globex", "owner@globex.test").await;
    let other_api = c.app.api(other.tenant_id, other.user_id).await;

    for (who, api) in [("a member of the same team", &member_api), ("another tenant", &other_api)] {
        let (st, list) = api.get_json("/api/page-ai/conversations").await;
        assert_eq!((st, ids(&list)), (StatusCode::OK, Vec::<&str>::new()), "{who}");
        let (st, _) = api.get_json("/api/page-ai/conversations/shared-name").await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{who}");
        let (st, _) = api.send_json("PATCH", "/api/page-ai/conversations/shared-name", json!({"title": "mine"})).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{who}");
        assert_eq!(api.delete("/api/page-ai/conversations/shared-name").await, StatusCode::NOT_FOUND, "{who}");
    }
    // The same session id chosen by the member is the member's own conversation.
    let id = start(&member_api, &c.kb, "shared-name", "hermes", "Who builds the robots?").await;
    finished(&member_api, &id).await;
    let (_, mine) = member_api.get_json("/api/page-ai/conversations/shared-name").await;
    assert_eq!((mine["title"].as_str(), mine["runCount"].as_i64()), (Some("Who builds the robots?"), Some(1)), "{mine}");
    let (_, owners) = c.client.get_json("/api/page-ai/conversations/shared-name").await;
    assert_eq!((owners["title"].as_str(), owners["runCount"].as_i64()), (Some("Where do the robots charge?"), Some(1)));

    // Not even the team's owner sees another user's runs or conversations.
    let (st, _) = c.client.get_json(&format!("/api/page-ai/runs/{id}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "a run is its actor's own, also to the team's owner");
    let (_, list) = c.client.get_json("/api/page-ai/conversations").await;
    assert_eq!(ids(&list), ["shared-name"]);
    assert_eq!(list["items"][0]["title"], "Where do the robots charge?");

    // In the database: the member's transaction sees only the member's row.
    let mut tx = mnote::db::TenantTx::begin(&c.app.pool, c.tenant, mnote::db::Scope::User(member)).await.unwrap();
    let owners_rows: i64 = sqlx::query_scalar("select count(*) from ai_conversation where actor_id = $1")
        .bind(c.owner)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(owners_rows, 0);
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn the_built_in_agent_reads_a_dependent_follow_up_with_the_previous_question() {
    let c = setup().await;
    let first = ask(&c, "follow", "Where do the robots charge?").await;
    assert!(first["answer"].as_str().unwrap().contains("north hall"), "{first}");
    // Alone, the follow-up names nothing the handbook says.
    let alone = ask(&c, "alone", "Tell me more about that.").await;
    assert_eq!(alone["receipt"]["total"], 0, "{alone}");
    // In the conversation it is searched with the previous question, and answered from it.
    let follow = ask(&c, "follow", "Tell me more about that.").await;
    let answer = follow["answer"].as_str().unwrap();
    assert!(answer.contains("north hall") || answer.contains("battery"), "{follow}");
    assert!(follow["receipt"]["total"].as_u64().unwrap() >= 1, "{follow}");
}

/// The run's searched queries and its last plan's entries.
async fn searched(c: &Ctx, run: &Value) -> (Vec<String>, Vec<String>) {
    let id = run["hostRunId"].as_str().unwrap();
    let (st, page) = c.client.get_json(&format!("/api/page-ai/runs/{id}/events?afterSeq=0")).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    let items = page["items"].as_array().unwrap();
    let queries = items
        .iter()
        .filter(|e| e["kind"] == "tool.started" && e["payload"]["name"] == "mnote.evidence.search")
        .map(|e| e["payload"]["arguments"]["query"].as_str().unwrap().to_string())
        .collect();
    let plan = items.iter().rev().find(|e| e["kind"] == "plan.updated").expect("a plan");
    let entries = plan["payload"]["entries"].as_array().unwrap();
    (queries, entries.iter().map(|e| e["content"].as_str().unwrap().to_string()).collect())
}

/// Issue 41: a follow-up on a new topic is searched on its own; one that refers back (a
/// pronoun, a continuation cue, one content word) with the previous question; the plan's
/// first step says which.
#[tokio::test]
async fn a_topic_change_is_searched_alone_and_a_dependent_follow_up_with_the_previous_question() {
    let c = setup().await;
    let first = ask(&c, "topic", "Where do the robots charge?").await;
    let (queries, plan) = searched(&c, &first).await;
    assert_eq!(queries[0], "Where do the robots charge?");
    assert!(!plan.iter().any(|p| p.contains("previous question")), "no follow-up step on a first question: {plan:?}");

    let zh = ask(&c, "topic", "出差住宿每晚的上限是多少？").await;
    let (queries, plan) = searched(&c, &zh).await;
    assert_eq!(queries[0], "出差住宿每晚的上限是多少？", "{queries:?}");
    assert!(queries.iter().all(|q| !q.contains("robots") && !q.contains("charge")), "{queries:?}");
    assert_eq!(plan[0], "新话题：单独检索，不带上一个问题", "{plan:?}");

    let en = ask(&c, "topic", "Who builds the warehouse robots?").await;
    let (queries, plan) = searched(&c, &en).await;
    assert_eq!(queries[0], "Who builds the warehouse robots?", "{queries:?}");
    assert!(queries.iter().all(|q| !q.contains("出差")), "{queries:?}");
    assert_eq!(plan[0], "New topic: searched on its own, without the previous question", "{plan:?}");
    assert!(en["answer"].as_str().unwrap().contains("Lyon"), "{en}");

    let zh = ask(&c, "topic", "它的上限是多少？").await;
    let (queries, plan) = searched(&c, &zh).await;
    assert_eq!(queries[0], "它的上限是多少？ Who builds the warehouse robots?", "{queries:?}");
    assert_eq!(plan[0], "追问：与上一个问题“Who builds the warehouse robots?”一起检索", "{plan:?}");

    let en = ask(&c, "topic", "and what about its battery?").await;
    let (queries, plan) = searched(&c, &en).await;
    assert_eq!(queries[0], "and what about its battery? 它的上限是多少？", "{queries:?}");
    assert_eq!(plan[0], "Follow-up: searched together with the previous question “它的上限是多少？”", "{plan:?}");
}

#[tokio::test]
async fn a_follow_up_sends_the_earlier_turns_to_the_model_and_a_live_conversation_is_not_deleted() {
    let c = setup().await;
    connect_chat_only(&c).await;
    let chat = |session: &'static str, prompt: &'static str| {
        let c = &c;
        async move {
            let id = start(&c.client, &c.kb, session, "chat_only", prompt).await;
            let run = finished(&c.client, &id).await;
            assert_eq!(run["status"], "completed", "{run}");
            run["answer"].as_str().unwrap().to_string()
        }
    };
    let first = chat("llm", "Where do the robots charge?").await;
    assert!(first.starts_with("This is a scripted answer without tools."), "{first}");
    // The mock lists the earlier messages it received, oldest first.
    let second = chat("llm", "[[history]] And how often?").await;
    assert!(second.starts_with("Earlier turns I received (2): user: “Where do the robots charge?”; assistant: “This is a scripted answer without tools."), "{second}");
    let third = chat("llm", "[[history]] Anything else?").await;
    assert!(third.starts_with("Earlier turns I received (4): user: “Where do the robots charge?”"), "{third}");
    assert!(third.contains("user: “[[history]] And how often?”"), "{third}");
    assert_eq!(chat("other", "[[history]] Hello?").await, "I received no earlier turns.");

    // A conversation with an answer still running is not deleted (cancel it first).
    let slow = start(&c.client, &c.kb, "llm", "chat_only", "[[trickle]] Tell me everything.").await;
    let (st, e) = c.client.delete_json("/api/page-ai/conversations/llm").await;
    assert_eq!((st, e["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("conflict")), "{e}");
    let (st, _) = c.client.post_json(&format!("/api/page-ai/runs/{slow}/cancel"), json!({})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(finished(&c.client, &slow).await["status"], "cancelled");
    assert_eq!(c.client.delete("/api/page-ai/conversations/llm").await, StatusCode::NO_CONTENT);
}

/// Issue 41: "Assistant" in the navigation opens a new conversation (`/ai?new=1`, the script
/// told not to resume the last one), an earlier one is resumed from the list, which marks the
/// one shown; an owner without a model is shown how to connect one, a member is not, nor anyone
/// once a model is connected.
#[tokio::test]
async fn the_navigation_starts_a_new_conversation_and_an_admin_without_a_model_is_shown_how_to_connect_one() {
    let c = setup().await;
    ask(&c, "conv-nav", "Where do the robots charge?").await;
    let mut owner = c.app.login("owner@acme.test").await;

    let (st, html) = owner.page("/ai?new=1").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("<a href=\"/ai?new=1\" class=\"active\">Assistant</a>"), "the nav link: {html}");
    assert!(html.contains("data-session-fresh=\"true\""), "a new conversation: {html}");
    assert!(!html.contains("class=\"ai-past\"") && !html.contains("class=\"ai-turn"), "no earlier turns: {html}");
    assert!(!html.contains("aria-current=\"true\""), "nothing marked current: {html}");
    assert!(html.contains("href=\"/ai?session=conv-nav\" class=\"ai-conv-link\">"), "resumed from the list: {html}");
    assert!(html.contains("name=\"new\" value=\"1\""), "the new-conversation form asks for a new one: {html}");
    assert!(html.contains("No language model is connected"), "{html}");
    assert!(html.contains("<a class=\"button small\" href=\"/settings/agents\">Connect a model provider</a>"), "{html}");

    // Resumed from the list: its turns shown, marked current.
    let (_, html) = owner.page("/ai?session=conv-nav").await;
    assert!(!html.contains("data-session-fresh"), "{html}");
    assert!(html.contains("href=\"/ai?session=conv-nav\" class=\"ai-conv-link\" aria-current=\"true\">"), "{html}");
    assert!(html.contains("<li class=\"ai-conv current\" data-id=\"conv-nav\">"), "{html}");
    assert!(html.contains("Where do the robots charge?"), "{html}");

    // 中文.
    let csrf = owner.csrf.clone().unwrap();
    let r = owner.post_form("/language", &[("lang", "zh-CN"), ("next", "/"), ("csrf_token", &csrf)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = owner.page("/ai?new=1").await;
    assert!(html.contains("尚未连接语言模型") && html.contains(">连接模型服务</a>"), "{html}");

    // A member: no link to the settings, one line that the built-in agent answers.
    c.app.add_user(c.tenant, "m@acme.test", "member").await;
    let mut member = c.app.login("m@acme.test").await;
    let (_, html) = member.page("/ai?new=1").await;
    assert!(!html.contains("Connect a model provider") && !html.contains("No language model"), "{html}");
    assert!(html.contains("The built-in offline agent answers"), "{html}");

    // A model connected: no line for anyone.
    connect_chat_only(&c).await;
    let (_, html) = owner.page("/ai").await;
    assert!(!html.contains("ai-no-model") && !html.contains("连接模型服务"), "{html}");
    let (_, html) = member.page("/ai").await;
    assert!(!html.contains("ai-no-model"), "{html}");
}
