//! Private KBs are private from the team's owners and admins too (issue 39, item 9): they see
//! that a member's private KB exists, its owner and size, and may delete or transfer it, but
//! every read path (search in every mode, the document search, read/open/outline as API and
//! as tools, the viewer and downloads, MCP, runs, SQL itself) answers as if it were empty. The
//! KB's owner and added members still read everything.

use mnote::{
    agents::tools::ToolBox,
    ai::AgentId,
    db::{Scope, TenantTx},
    journal::{ContextRefs, EventSource, sink::EventSink},
    state::AppState,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

const SECRET: &str = "# Plan\n\nThe zebra migration starts in the northern valley.\n\n## Budget\n\nThe zebra budget is small.\n";
const OPEN: &str = "# Team\n\nThe giraffe census is held in spring.\n";

struct Team {
    tenant: Uuid,
    /// The tenant's owner (role `owner`), who owns the team KB.
    owner: Client,
    /// A team admin (role `admin`), in no KB.
    admin: Client,
    admin_id: Uuid,
    /// The private KB's owner (role `member`).
    alice: Client,
    alice_id: Uuid,
    /// Another member, added to nothing yet.
    bob_id: Uuid,
    private_kb: String,
    source: Uuid,
    evidence: Uuid,
}

/// A tenant where Alice (a member) keeps `SECRET` in a private KB and the owner keeps `OPEN` in
/// a team KB; both indexed (and embedded when the app has an embedder).
async fn team(app: &TestApp) -> Team {
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let owner = app.api(s.tenant_id, s.user_id).await;
    let admin_id = app.add_user(s.tenant_id, "admin@acme.test", "admin").await;
    let alice_id = app.add_user(s.tenant_id, "alice@acme.test", "member").await;
    let bob_id = app.add_user(s.tenant_id, "bob@acme.test", "member").await;
    app.write_doc("alice/plan.md", SECRET);
    app.write_doc("team/census.md", OPEN);
    for dir in ["alice", "team"] {
        let (st, g) = owner
            .post_json("/api/grants", json!({"path": app.docs_path(dir), "allMembers": true, "permission": "read_index"}))
            .await;
        assert_eq!(st, StatusCode::CREATED, "{g}");
    }
    let alice = app.api(s.tenant_id, alice_id).await;
    let (st, kb) = alice.post_json("/api/kbs", json!({"name": "alice private", "visibility": "private"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let private_kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = alice.post_json(&format!("/api/kbs/{private_kb}/sources"), json!({"path": app.docs_path("alice")})).await;
    assert!(st.is_success(), "{r}");
    let (st, kb) = owner.post_json("/api/kbs", json!({"name": "team"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let team_kb = kb["id"].as_str().unwrap();
    let (st, r) = owner.post_json(&format!("/api/kbs/{team_kb}/sources"), json!({"path": app.docs_path("team")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    if app.embedder.is_some() {
        app.run_embeddings().await;
    }
    let (st, list) = alice.get_json(&format!("/api/kbs/{private_kb}/sources")).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    assert_eq!(list["items"][0]["status"], "indexed", "{list}");
    let source: Uuid = list["items"][0]["id"].as_str().unwrap().parse().unwrap();
    let (_, v) = alice.post_json("/api/evidence/search", json!({"query": "zebra migration", "mode": "lexical"})).await;
    let evidence: Uuid = v["results"][0]["evidenceId"].as_str().unwrap_or_else(|| panic!("{v}")).parse().unwrap();
    let admin = app.api(s.tenant_id, admin_id).await;
    Team { tenant: s.tenant_id, owner, admin, admin_id, alice, alice_id, bob_id, private_kb, source, evidence }
}

fn hits(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|r| r["sourceTitle"].as_str().unwrap().to_string())
        .collect()
}

/// Start a built-in run and wait for its end.
async fn ask(client: &Client, prompt: &str, context: Value) -> Value {
    let body = json!({"requestId": format!("req-{}", Uuid::new_v4().simple()), "sessionId": "s", "agentId": "hermes",
                      "prompt": prompt, "contextRefs": context});
    let (st, run) = client.post_json("/api/page-ai/runs", body).await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let id = run["hostRunId"].as_str().unwrap().to_string();
    for _ in 0..600 {
        let (_, r) = client.get_json(&format!("/api/page-ai/runs/{id}")).await;
        if matches!(r["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {id} did not end");
}

/// A JSON-RPC request to `/mcp` with `token`.
async fn mcp_call(app: &TestApp, token: &str, tool: &str, arguments: Value) -> Value {
    let r = app
        .client()
        .http
        .post(format!("{}/mcp", app.base))
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

#[tokio::test]
async fn admins_see_a_private_kb_exists_and_its_size_but_read_none_of_it() {
    let app = spawn_app_full(|_| {}, Some(minilm())).await;
    let t = team(&app).await;
    let kb = &t.private_kb;

    for (who, c) in [("admin", &t.admin), ("tenant owner", &t.owner)] {
        // The list and the KB: it exists, with its owner and size, deletable and transferable.
        let (_, list) = c.get_json("/api/kbs").await;
        let k =
            list["items"].as_array().unwrap().iter().find(|k| k["id"] == kb.as_str()).unwrap_or_else(|| panic!("{who}: {list}"));
        assert_eq!(
            (&k["ownerEmail"], &k["sourceCount"], &k["canRead"], &k["canManage"], &k["canDelete"], &k["canTransfer"]),
            (&json!("alice@acme.test"), &json!(1), &json!(false), &json!(false), &json!(true), &json!(true)),
            "{who}: {k}"
        );
        let (st, p) = c.get_json(&format!("/api/kbs/{kb}/delete-preview")).await;
        assert_eq!(st, StatusCode::OK, "{who}: {p}");
        assert_eq!(p["sources"], 1, "{who}: {p}");
        assert!(p["blocks"].as_i64().unwrap() >= 3, "{who}: the passages are counted: {p}");
        // No source list, no contents by id.
        assert_eq!(c.get_json(&format!("/api/kbs/{kb}/sources")).await.0, StatusCode::NOT_FOUND, "{who}");
        assert_eq!(c.get_json(&format!("/api/sources/{}", t.source)).await.0, StatusCode::NOT_FOUND, "{who}");
        let (st, e) = c.post_json("/api/evidence/read", json!({"evidenceId": t.evidence})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "{who}: {e}");
        let (st, e) = c.post_json("/api/evidence/open", json!({"evidenceId": t.evidence})).await;
        assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"), "{who}: {e}");
        // Search in every mode, paged and grouped, and the document search: nothing of it.
        for mode in ["lexical", "vector", "hybrid", "graph"] {
            let (st, v) = c.post_json("/api/evidence/search", json!({"query": "zebra migration budget", "mode": mode})).await;
            assert_eq!(st, StatusCode::OK, "{who} {mode}: {v}");
            assert!(!hits(&v).contains(&"plan.md".to_string()), "{who} {mode}: {v}");
            let (_, v) =
                c.post_json("/api/evidence/search", json!({"query": "zebra", "mode": mode, "groupBy": "document"})).await;
            assert!(!hits(&v).contains(&"plan.md".to_string()), "{who} {mode} paged: {v}");
            if mode == "lexical" {
                assert_eq!((&v["total"], &v["totalDocuments"]), (&json!(0), &json!(0)), "{who}: no count leaks: {v}");
            }
        }
        let (st, v) = c.post_json("/api/evidence/search", json!({"query": "zebra", "mode": "lexical", "kbIds": [kb]})).await;
        assert_eq!(st, StatusCode::OK, "{who}: {v}");
        assert!(hits(&v).is_empty(), "{who}: naming the KB finds nothing either: {v}");
        let (_, d) = c.get_json("/api/search/documents?q=zebra").await;
        assert_eq!(d["results"].as_array().map(Vec::len), Some(0), "{who}: {d}");
        // The team KB stays readable: the admin's reads work.
        let (_, v) = c.post_json("/api/evidence/search", json!({"query": "giraffe census", "mode": "hybrid"})).await;
        assert_eq!(hits(&v).first().map(String::as_str), Some("census.md"), "{who}: {v}");
        // The viewer and the download.
        for path in [format!("/sources/{}/view", t.source), format!("/sources/{}/download", t.source)] {
            assert_eq!(c.get(&path).await.status(), StatusCode::NOT_FOUND, "{who}: {path}");
        }
    }

    // At the SQL level, as the admin: no content row of the KB in any table.
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::User(t.admin_id)).await.unwrap();
    let kb_id: Uuid = kb.parse().unwrap();
    for table in [
        "source",
        "kb_folder",
        "evidence_block",
        "evidence_embedding",
        "evidence_term_stat",
        "evidence_kb_stat",
        "source_artifact",
        "evidence_section",
        "evidence_edge",
    ] {
        let sql = match table {
            "source" | "kb_folder" | "evidence_block" | "evidence_embedding" | "evidence_term_stat" | "evidence_kb_stat" => {
                format!("select count(*) from {table} where kb_id = $1")
            }
            _ => format!("select count(*) from {table} t join source s on s.id = t.source_id where s.kb_id = $1"),
        };
        let n: i64 = sqlx::query_scalar(&sql).bind(kb_id).fetch_one(&mut *tx).await.unwrap();
        assert_eq!(n, 0, "{table} rows of a private KB leak to an admin");
    }
    let n: i64 = sqlx::query_scalar("select count(*) from kb where id = $1").bind(kb_id).fetch_one(&mut *tx).await.unwrap();
    assert_eq!(n, 1, "the KB row itself is the admin's to see");
    tx.commit().await.unwrap();

    // Its owner reads everything, in every mode.
    for mode in ["lexical", "vector", "hybrid"] {
        let (_, v) = t.alice.post_json("/api/evidence/search", json!({"query": "zebra migration", "mode": mode})).await;
        assert_eq!(hits(&v).first().map(String::as_str), Some("plan.md"), "{mode}: {v}");
    }
    let (_, d) = t.alice.get_json("/api/search/documents?q=zebra").await;
    assert_eq!(d["results"][0]["title"], "plan.md", "{d}");
    let (st, _) = t.alice.post_json("/api/evidence/read", json!({"evidenceId": t.evidence})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(t.alice.get(&format!("/sources/{}/download", t.source)).await.status(), StatusCode::OK);

    // Once Alice adds the admin, the admin reads it too.
    let (st, _) = t.alice.send_json("PUT", &format!("/api/kbs/{kb}/members/{}", t.admin_id), json!({"canManage": false})).await;
    assert_eq!(st, StatusCode::OK);
    let (_, v) = t.admin.post_json("/api/evidence/search", json!({"query": "zebra migration", "mode": "lexical"})).await;
    assert_eq!(hits(&v).first().map(String::as_str), Some("plan.md"), "an added admin reads it: {v}");
    let (_, k) = t.admin.get_json(&format!("/api/kbs/{kb}")).await;
    assert_eq!((&k["canRead"], &k["canManage"]), (&json!(true), &json!(true)), "{k}");
}

#[tokio::test]
async fn an_admins_tools_runs_and_mcp_calls_find_nothing_of_a_private_kb() {
    let app = spawn_app().await;
    let t = team(&app).await;
    let state = AppState::new(app.pool.clone(), app.config.clone());

    // The tools as an admin's run calls them (function calling and ACP go through `call`).
    let admin = mnote::context::act_as(&app.pool, "acme", Some("admin@acme.test")).await.unwrap();
    let tools = ToolBox::prepare(
        state.clone(),
        admin,
        ContextRefs::default(),
        EventSink::memory(EventSource::Agent(AgentId::Hermes)),
        true,
    )
    .await;
    let s = tools.call("s", "mnote_evidence_search", json!({"query": "zebra migration"})).await;
    assert!(s.ok && s.content["results"].as_array().unwrap().is_empty(), "{:?}", s.content);
    for (name, args) in [
        ("mnote_evidence_read", json!({"evidenceId": t.evidence})),
        ("mnote_evidence_open", json!({"evidenceId": t.evidence})),
        ("mnote_evidence_outline", json!({"sourceId": t.source})),
    ] {
        let r = tools.call(name, name, args).await;
        assert_eq!(r.error.map(|e| e.code).as_deref(), Some("not_found"), "{name}");
    }
    assert!(tools.citation(t.evidence).await.is_none());

    // The same tools as Alice's: found.
    let alice = mnote::context::act_as(&app.pool, "acme", Some("alice@acme.test")).await.unwrap();
    let tools =
        ToolBox::prepare(state, alice, ContextRefs::default(), EventSink::memory(EventSource::Agent(AgentId::Hermes)), true)
            .await;
    for (name, args) in [
        ("mnote_evidence_read", json!({"evidenceId": t.evidence})),
        ("mnote_evidence_open", json!({"evidenceId": t.evidence})),
        ("mnote_evidence_outline", json!({"sourceId": t.source})),
    ] {
        let r = tools.call(name, name, args).await;
        assert!(r.ok, "{name}: {:?}", r.content);
    }

    // MCP with the admin's own token: no hit, not found by id.
    let token = app.token(t.tenant, t.admin_id).await;
    let r = mcp_call(&app, &token, "evidence_search", json!({"query": "zebra migration"})).await;
    assert_eq!(r["result"]["structuredContent"]["results"], json!([]), "{r}");
    for (tool, args) in [
        ("evidence_read", json!({"evidenceId": t.evidence})),
        ("evidence_open", json!({"evidenceId": t.evidence})),
        ("evidence_outline", json!({"sourceId": t.source})),
    ] {
        let r = mcp_call(&app, &token, tool, args).await;
        assert_eq!(
            (r["result"]["isError"].as_bool(), r["result"]["structuredContent"]["error"]["code"].as_str()),
            (Some(true), Some("not_found")),
            "{tool}: {r}"
        );
    }
    let r = mcp_call(&app, &token, "list_knowledge_bases", json!({})).await;
    assert!(!r.to_string().contains("alice private"), "MCP lists only what the admin reads: {r}");
    let alice_token = app.token(t.tenant, t.alice_id).await;
    let r = mcp_call(&app, &alice_token, "evidence_read", json!({"evidenceId": t.evidence})).await;
    assert_ne!(r["result"]["isError"], true, "{r}");

    // A run of the admin: nothing found, and naming the KB is refused up front.
    let run = ask(&t.admin, "Where does the zebra migration start?", json!({})).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(!run["answer"].as_str().unwrap_or_default().contains("northern valley"), "{run}");
    assert!(run["receipt"]["evidenceIds"].as_array().unwrap().is_empty(), "{run}");
    let (st, e) = t
        .admin
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "r-private", "sessionId": "s", "agentId": "hermes", "prompt": "zebra",
                   "contextRefs": {"kbIds": [t.private_kb]}}),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    // Alice's own run finds it.
    let run = ask(&t.alice, "Where does the zebra migration start?", json!({"kbIds": [t.private_kb]})).await;
    assert!(run["answer"].as_str().unwrap_or_default().contains("northern valley"), "{run}");
}

#[tokio::test]
async fn an_admin_transfers_and_deletes_a_private_kb_from_its_page_and_the_api() {
    let app = spawn_app().await;
    let t = team(&app).await;
    let kb = &t.private_kb;

    // The dashboard lists it with its size; the KB page: name, owner, size and the two
    // actions; no source list, no search box.
    let mut browser = app.login("admin@acme.test").await;
    let (_, html) = browser.page("/").await;
    let item = html.split("<strong>alice private</strong>").nth(1).expect("the dashboard lists it");
    assert!(item[..item.find("</li>").unwrap()].contains("1 source<"), "with its size");
    let (st, html) = browser.page(&format!("/kbs/{kb}")).await;
    assert_eq!(st, StatusCode::OK);
    for needle in
        ["alice private", "alice@acme.test", "id=\"private-kb\"", "id=\"transfer-kb\"", "id=\"delete-kb\"", "bob@acme.test"]
    {
        assert!(html.contains(needle), "{needle} missing from the admin's page");
    }
    assert!(html.contains("id=\"kb-size\">1 source</p>"), "its size, counted in the singular");
    for absent in ["id=\"sources\"", "plan.md", "/uploads", "action=\"/search\""] {
        assert!(!html.contains(absent), "{absent} shown to the admin");
    }
    // The transfer form does not offer the admin themselves (owning it would be reading it).
    assert!(!html.contains(&format!("<option value=\"{}\"", t.admin_id)), "the admin is offered the KB");
    // Alice's page has the sources and the transfer form too (she owns it).
    let mut alice_browser = app.login("alice@acme.test").await;
    let (_, html) = alice_browser.page(&format!("/kbs/{kb}")).await;
    assert!(html.contains("plan.md") && html.contains("id=\"transfer-kb\"") && !html.contains("id=\"private-kb\""));

    // Not to the admin: owning it would be reading it.
    let (st, e) = t.admin.post_json(&format!("/api/kbs/{kb}/transfer"), json!({"ownerId": t.admin_id})).await;
    assert_eq!((st, &e["error"]["code"]), (StatusCode::FORBIDDEN, &json!("forbidden")), "{e}");
    let (_, k) = t.alice.get_json(&format!("/api/kbs/{kb}")).await;
    assert_eq!(k["ownerEmail"], "alice@acme.test", "{k}");

    // Transfer, by the admin, to Bob: Bob owns and reads it, Alice stays a member and reads it,
    // the admin still reads nothing.
    let (st, k) = t.admin.post_json(&format!("/api/kbs/{kb}/transfer"), json!({"ownerId": t.bob_id})).await;
    assert_eq!(st, StatusCode::OK, "{k}");
    assert_eq!(
        (&k["ownerId"], &k["ownerEmail"], &k["canRead"]),
        (&json!(t.bob_id), &json!("bob@acme.test"), &json!(false)),
        "{k}"
    );
    let bob = app.api(t.tenant, t.bob_id).await;
    let (_, v) = bob.post_json("/api/evidence/search", json!({"query": "zebra migration", "mode": "lexical"})).await;
    assert_eq!(hits(&v).first().map(String::as_str), Some("plan.md"), "{v}");
    let (_, k) = t.alice.get_json(&format!("/api/kbs/{kb}")).await;
    assert_eq!((&k["canRead"], &k["canManage"], &k["canTransfer"]), (&json!(true), &json!(false), &json!(false)), "{k}");
    let (_, members) = bob.get_json(&format!("/api/kbs/{kb}/members")).await;
    assert_eq!(members["items"][0]["userId"], json!(t.alice_id), "{members}");
    // Alice, no longer the owner, cannot transfer it back; a stranger id is refused.
    let (st, _) = t.alice.post_json(&format!("/api/kbs/{kb}/transfer"), json!({"ownerId": t.alice_id})).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, e) = t.admin.post_json(&format!("/api/kbs/{kb}/transfer"), json!({"ownerId": Uuid::new_v4()})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{e}");
    // The owner transfers from the page's form (Bob gives it back to Alice).
    let mut bob_browser = app.login("bob@acme.test").await;
    let (_, html) = bob_browser.page(&format!("/kbs/{kb}")).await;
    assert!(html.contains("id=\"transfer-kb\""));
    let bob_browser = bob_browser.with_csrf().await;
    let r = bob_browser.post_form(&format!("/kbs/{kb}/transfer"), &[("owner_id", &t.alice_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, k) = t.alice.get_json(&format!("/api/kbs/{kb}")).await;
    assert_eq!(k["ownerEmail"], "alice@acme.test", "{k}");

    // Delete, by the admin who cannot read it, and restore.
    assert_eq!(t.admin.delete(&format!("/api/kbs/{kb}")).await, StatusCode::NO_CONTENT);
    assert_eq!(t.alice.get_json(&format!("/api/kbs/{kb}")).await.0, StatusCode::NOT_FOUND);
    let (st, k) = t.admin.post_json(&format!("/api/kbs/{kb}/restore"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{k}");
    // Settings and members stay the readers' business: an admin outside it cannot manage it.
    let (st, _) = t.admin.send_json("PATCH", &format!("/api/kbs/{kb}"), json!({"visibility": "team"})).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, _) = t.admin.send_json("PUT", &format!("/api/kbs/{kb}/members/{}", t.admin_id), json!({"canManage": false})).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
}
