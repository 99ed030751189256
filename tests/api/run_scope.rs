//! One scope for every tool of a run (issue 39, item 2): the run's `contextRefs.kbIds` bound
//! search, read, open, outline and citation links alike, in the one `ToolEnv` every path shares
//! (the built-in agent's `invoke`, function calls and ACP's `call`, the run's MCP token and a
//! detached tool box `within` a context). Evidence outside answers `not_found`, as invisible
//! evidence does; no `kbIds` = every KB the actor reads.

use mnote::{
    agents::tools::ToolBox,
    ai::AgentId,
    journal::{ContextRefs, EventSource, sink::EventSink},
    state::AppState,
};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

use crate::helpers::*;

/// A KB named `name` holding the directory `dir` with `file`, indexed; its id.
async fn kb(app: &TestApp, c: &Client, dir: &str, name: &str, file: (&str, &str)) -> Uuid {
    app.write_doc(&format!("{dir}/{}", file.0), file.1);
    let (st, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path(dir), "allMembers": true, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = c.post_json("/api/kbs", json!({"name": name})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let id = kb["id"].as_str().unwrap().to_string();
    let (st, r) = c.post_json(&format!("/api/kbs/{id}/sources"), json!({"path": app.docs_path(dir)})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    id.parse().unwrap()
}

/// The first lexical hit of `q` in `kb`: (evidence id, source id).
async fn hit(c: &Client, kb: Uuid, q: &str) -> (Uuid, Uuid) {
    let (_, v) = c.post_json("/api/evidence/search", json!({"query": q, "mode": "lexical", "kbIds": [kb]})).await;
    let h = &v["results"][0];
    let id = |x: &serde_json::Value| x.as_str().unwrap_or_else(|| panic!("{v}")).parse().unwrap();
    (id(&h["evidenceId"]), id(&h["source"]["sourceId"]))
}

fn code(r: &mnote::agents::tools::ToolResult) -> Option<&str> {
    r.error.as_ref().map(|e| e.code.as_str())
}

#[tokio::test]
async fn a_runs_tools_read_only_its_knowledge_bases_by_search_and_by_id() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let robots =
        kb(&app, &c, "robots", "robots", ("hall.md", "# Hall\n\nThe robots charge overnight in the north hall.\n")).await;
    let zoo = kb(&app, &c, "zoo", "zoo", ("zoo.md", "# Zoo\n\nThe zebra enclosure opens at nine.\n")).await;
    let (robot_ev, robot_src) = hit(&c, robots, "robots charge").await;
    let (zoo_ev, zoo_src) = hit(&c, zoo, "zebra enclosure").await;
    let state = AppState::new(app.pool.clone(), app.config.clone());
    let actor = mnote::context::act_as(&app.pool, "acme", None).await.unwrap();
    let only_robots = ContextRefs { kb_ids: vec![robots], ..Default::default() };

    let tools = ToolBox::prepare(
        state.clone(),
        actor.clone(),
        only_robots.clone(),
        EventSink::memory(EventSource::Agent(AgentId::Hermes)),
        true,
    )
    .await;
    let search = tools.call("s", "mnote_evidence_search", json!({"query": "zebra enclosure robots"})).await;
    let titles: Vec<&str> =
        search.content["results"].as_array().unwrap().iter().map(|r| r["sourceTitle"].as_str().unwrap()).collect();
    assert_eq!(titles, ["hall.md"], "{:?}", search.content);
    let by_id = |ev: Uuid, src: Uuid| {
        [
            ("mnote_evidence_read", json!({"evidenceId": ev})),
            ("mnote_evidence_open", json!({"evidenceId": ev})),
            ("mnote_evidence_outline", json!({"sourceId": src})),
        ]
    };
    for (name, args) in by_id(zoo_ev, zoo_src) {
        let r = tools.call(name, name, args).await;
        assert_eq!(code(&r), Some("not_found"), "{name}: outside the run's KBs: {:?}", r.content);
    }
    for (name, args) in by_id(robot_ev, robot_src) {
        let r = tools.call(name, name, args).await;
        assert!(r.ok, "{name}: {:?}", r.content);
    }
    // Typed calls (the built-in agent) and citation links of markers go the same way.
    let typed =
        tools.invoke::<mnote::agents::tools::Read>("t", mnote::agents::tools::ReadArgs { evidence_id: zoo_ev, window: None });
    assert_eq!(typed.await.err().map(|e| e.code.as_str().to_string()).as_deref(), Some("not_found"));
    assert!(tools.citation(zoo_ev).await.is_none());
    assert!(tools.citation(robot_ev).await.is_some());

    // A detached tool box (MCP's) within the same context: bounded alike.
    let detached = ToolBox::detached(
        state.clone(),
        actor.clone(),
        app.base.clone(),
        ToolBox::offered_for(&state, &actor, &only_robots).await,
    )
    .within(only_robots.clone());
    let r = detached.run("mnote.evidence.read", json!({"evidenceId": zoo_ev})).await;
    assert_eq!(r.err().map(|e| e.code.as_str().to_string()).as_deref(), Some("not_found"));

    // No kbIds: every KB the actor reads.
    let all =
        ToolBox::prepare(state, actor, ContextRefs::default(), EventSink::memory(EventSource::Agent(AgentId::Hermes)), true)
            .await;
    for (name, args) in by_id(zoo_ev, zoo_src) {
        let r = all.call(name, name, args).await;
        assert!(r.ok, "{name}: {:?}", r.content);
    }
}

/// The tool offer is computed in one function (`runs::offer`): the hash stored with a run is
/// the hash of the offer its executor builds its tool box from and its MCP token serves, and a
/// capability the team switched off is in none of them.
#[tokio::test]
async fn the_offer_stored_with_a_run_is_what_the_executor_and_its_token_serve() {
    use mnote::{
        agents::{Provider, RunPreferencesSnapshot, offer::For, preferences::RunPreferences},
        mcp::run_token::{self, RunScope},
    };
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let (st, v) = c.send_json("PATCH", "/api/page-ai/capabilities", json!({"knowledge_rag": false})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let state = AppState::new(app.pool.clone(), app.config.clone());
    let actor = mnote::context::act_as(&app.pool, "acme", None).await.unwrap();
    for (agent, tools) in [
        (AgentId::Hermes, vec!["mnote.evidence.search", "mnote.evidence.read", "mnote.evidence.open", "mnote.evidence.outline"]),
        (AgentId::ChatOnly, vec![]),
    ] {
        let body = json!({"requestId": format!("offer-{agent}"), "sessionId": "s-offer", "agentId": agent, "prompt": "robots?"});
        let (st, run) = c.post_json("/api/page-ai/runs", body).await;
        assert_eq!(st, StatusCode::CREATED, "{run}");
        let snapshot: RunPreferencesSnapshot = serde_json::from_value(run["preferences"].clone()).unwrap();
        let preferences = RunPreferences::from_snapshot(&snapshot);
        let context = ContextRefs::default();
        let offer = mnote::runs::offer(&state, &actor, &context, For::Run { agent, preferences: &preferences }).await.unwrap();
        assert_eq!(offer.names(), tools, "{agent}");
        let provider: Provider = serde_json::from_value(run["provider"].clone()).unwrap();
        assert_eq!(run["capabilitySnapshotHash"], offer.hash(provider), "{agent}: the stored hash is the offer's");
        let scope = RunScope {
            tenant_id: s.tenant_id,
            run_id: run["hostRunId"].as_str().unwrap().parse().unwrap(),
            agent,
            context,
            preferences,
        };
        let served: Vec<&str> = run_token::offered(&state, &actor, &scope).await.iter().map(|d| d.name).collect();
        assert_eq!(served, tools, "{agent}: the run's token serves the same offer");
    }
}
