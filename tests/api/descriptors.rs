//! Agent descriptors (`GET /api/page-ai/agents/descriptors`, `mnote.ai_agent_descriptors.v1`)
//! and the tenant's capability switches (`GET/PATCH /api/page-ai/capabilities`), through the
//! real server: every response validated against the published JSON Schema in
//! `docs/schemas/`; admin fields filtered for members; secrets never returned; a capability
//! switched off leaves the descriptors and the tools a real run offers — checked on what the
//! scripted OpenAI server receives (through a recording proxy) and on the `_meta.mnote.tools`
//! the ACP agent gets in `session/new`. Plus the self-test, in-process and as `mnote agents
//! selftest`.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use mnote::{
    agents::{descriptors::JSON_SCHEMA as DESCRIPTORS_SCHEMA, preferences::JSON_SCHEMA as PREFERENCES_SCHEMA, selftest},
    db::{Scope, TenantTx},
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{helpers::*, lightrag::mock_llm};

const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\n\
The robots charge overnight in the north hall. Each robot reports its battery level every minute.\n";

const EVIDENCE_FNS: [&str; 4] = ["mnote_evidence_search", "mnote_evidence_read", "mnote_evidence_open", "mnote_evidence_outline"];
const RAG_FNS: [&str; 2] = ["mnote_knowledge_rag_query", "mnote_knowledge_rag_open_reference"];

/// The descriptors of `c`, checked against the published schema.
pub async fn descriptors(c: &Client) -> Value {
    let (st, d) = c.get_json("/api/page-ai/agents/descriptors").await;
    assert_eq!(st, StatusCode::OK, "{d}");
    let errors = selftest::validate(DESCRIPTORS_SCHEMA, &d);
    assert!(errors.is_empty(), "descriptors do not match docs/schemas: {errors:?}\n{d}");
    d
}

pub fn agent<'a>(d: &'a Value, id: &str) -> &'a Value {
    d["items"].as_array().unwrap().iter().find(|a| a["agentId"] == id).unwrap_or_else(|| panic!("no {id} in {d}"))
}

fn field<'a>(fields: &'a Value, key: &str) -> Option<&'a Value> {
    fields.as_array().unwrap().iter().find(|f| f["key"] == key)
}

fn keys(fields: &Value) -> Vec<String> {
    fields.as_array().unwrap().iter().map(|f| f["key"].as_str().unwrap().to_string()).collect()
}

/// A tenant (owner + member) with an indexed KB under a grant.
struct Team {
    app: TestApp,
    tenant: Uuid,
    owner_id: Uuid,
    owner: Client,
    member: Client,
    kb: String,
}

async fn team(tweak: impl FnOnce(&mut mnote::config::Config)) -> Team {
    let app = spawn_app_with(tweak).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let owner = app.api(s.tenant_id, s.user_id).await;
    let member_id = app.add_user(s.tenant_id, "member@acme.test", "member").await;
    let member = app.api(s.tenant_id, member_id).await;
    app.write_doc("acme/handbook.md", HANDBOOK);
    let (st, g) = owner
        .post_json("/api/grants", json!({"path": app.docs_path("acme"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = owner.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = owner.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("acme")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    Team { tenant: s.tenant_id, owner_id: s.user_id, owner, member, kb, app }
}

/// A LightRAG binding of the KB (the tool box only looks for one; no LightRAG is called).
async fn bind_rag(t: &Team) {
    let mut tx = TenantTx::begin(&t.app.pool, t.tenant, Scope::User(t.owner_id)).await.unwrap();
    let kb = Uuid::parse_str(&t.kb).unwrap();
    mnote::rag::binding::put(&mut tx, t.tenant, kb, "http://127.0.0.1:9/lightrag", None, None, t.owner_id).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn three_descriptors_merged_for_the_caller_with_admin_fields_and_secrets_filtered() {
    let t = team(|c| c.agents.allowed_urls = vec!["http://127.0.0.1:9/v1".into()]).await;
    let d = descriptors(&t.member).await;
    assert_eq!(d["schema"], "mnote.ai_agent_descriptors.v1");
    let ids: Vec<&str> = d["items"].as_array().unwrap().iter().map(|a| a["agentId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["hermes", "reasonix", "chat_only"]);
    for a in d["items"].as_array().unwrap() {
        assert_eq!(a["schema"], "mnote.ai_agent_descriptor.v1");
        assert_eq!(a["runtimeConfigured"], false, "nothing configured: {a}");
        assert_eq!(a["runtimeProvider"], "builtin");
        assert!(a["fields"].as_array().unwrap().iter().all(|f| f["auth"] == "user"), "a member sees no admin field: {a}");
    }
    let hermes = agent(&d, "hermes");
    assert_eq!(hermes["provider"], "openai");
    assert_eq!(hermes["settingScopes"], json!(["ai.common", "ai.agent.hermes"]));
    assert_eq!(hermes["capabilities"], json!(["evidence", "knowledge_rag"]));
    assert_eq!(hermes["capabilityStates"], json!({"evidence": "enabled", "knowledge_rag": "enabled"}));
    let names: Vec<&str> = hermes["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(names.contains(&"mnote.knowledge_rag.query"));
    // Allowed roots come from the caller's grants (and only from them).
    let (_, grants) = t.member.get_json("/api/grants").await;
    assert_eq!(hermes["allowedRoots"], json!([{"path": grants["items"][0]["rootPath"], "permission": "read_index"}]), "{hermes}");
    assert!(keys(&hermes["fields"]).iter().all(|k| !k.contains("root")), "no field names a root");
    let chat = agent(&d, "chat_only");
    assert_eq!(chat["tools"], json!([]));
    assert_eq!(chat["capabilities"], json!([]));
    assert_eq!(chat["allowedRoots"], json!([]));
    // optionsSource resolved on the server: the caller's visible KBs.
    let kbs = field(&d["common"]["fields"], "ai.common.default_kbs").unwrap();
    assert_eq!(kbs["optionsSource"], "visible_kbs");
    assert_eq!(kbs["options"], json!([{"value": t.kb, "label": "Handbook"}]));
    assert_eq!(kbs["kind"], "multiselect");
    let profile = field(&agent(&d, "reasonix")["fields"], "ai.agent.reasonix.profile_id").unwrap();
    assert_eq!((profile["kind"].clone(), profile["default"].clone()), (json!("string"), json!("default")));
    assert_eq!(profile["validation"]["pattern"], "^[A-Za-z0-9_.-]+$");

    // The owner also sees the team's configuration fields; the API key only as set / not set.
    let (st, v) = t
        .owner
        .send_json(
            "PATCH",
            "/api/page-ai/preferences",
            json!({"ai.agent.hermes.endpoint_url": "http://127.0.0.1:9/v1", "ai.agent.hermes.default_model": "scripted",
                   "ai.agent.hermes.extra_models": "scripted-b, scripted-c", "ai.agent.hermes.api_key": "sk-secret-777"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["values"]["ai.agent.hermes.api_key"], json!({"set": true}));
    let d = descriptors(&t.owner).await;
    assert!(!d.to_string().contains("sk-secret-777"), "a secret came back: {d}");
    let hermes = agent(&d, "hermes");
    assert_eq!(hermes["runtimeConfigured"], true);
    let key = field(&hermes["fields"], "ai.agent.hermes.api_key").unwrap();
    assert_eq!(
        (key["secret"].clone(), key["kind"].clone(), key["value"].clone()),
        (json!(true), json!("secret"), json!({"set": true}))
    );
    assert!(keys(&hermes["fields"]).contains(&"ai.agent.hermes.endpoint_url".to_string()));
    // The configured models are the options of the user's model field, for every member.
    let d = descriptors(&t.member).await;
    let model = field(&agent(&d, "hermes")["fields"], "ai.agent.hermes.model").unwrap();
    assert_eq!(model["optionsSource"], "configured_models");
    let opts: Vec<&str> = model["options"].as_array().unwrap().iter().map(|o| o["value"].as_str().unwrap()).collect();
    assert_eq!(opts, ["scripted", "scripted-b", "scripted-c"]);
    assert_eq!(model["value"], "scripted", "defaults to the configured model");
    assert!(!d.to_string().contains("endpoint_url") && !d.to_string().contains("api_key"), "{d}");
    // The old configuration API sees the same row.
    let (_, cfg) = t.member.get_json("/api/page-ai/agents/hermes/config").await;
    assert_eq!((cfg["model"].clone(), cfg["hasApiKey"].clone()), (json!("scripted"), json!(true)));

    // Labels in the caller's language.
    let r = t
        .member
        .req(reqwest::Method::GET, "/api/page-ai/agents/descriptors")
        .header("accept-language", "zh-CN")
        .send()
        .await
        .unwrap();
    let zh: Value = r.json().await.unwrap();
    assert!(selftest::validate(DESCRIPTORS_SCHEMA, &zh).is_empty());
    assert_eq!(field(&zh["common"]["fields"], "ai.common.default_agent").unwrap()["label"], "默认智能体");
}

#[tokio::test]
async fn capability_switches_are_for_admins_and_mark_descriptors_disabled() {
    let t = team(|_| {}).await;
    for (m, body) in [("GET", None), ("PATCH", Some(json!({"knowledge_rag": false})))] {
        let (st, e) = match body {
            None => t.member.get_json("/api/page-ai/capabilities").await,
            Some(b) => t.member.send_json(m, "/api/page-ai/capabilities", b).await,
        };
        assert_eq!(st, StatusCode::FORBIDDEN, "{m}: {e}");
        assert_eq!(error_code(&e), "forbidden");
    }
    let (st, v) = t.owner.get_json("/api/page-ai/capabilities").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["capabilities"], json!({"evidence": true, "knowledge_rag": true}));
    assert_eq!(v["tools"]["knowledge_rag"], json!(["mnote.knowledge_rag.query", "mnote.knowledge_rag.open_reference"]));
    let (st, e) = t.owner.send_json("PATCH", "/api/page-ai/capabilities", json!({"telepathy": false, "evidence": "off"})).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert_eq!(error_code(&e), "invalid_input");
    assert!(e["error"]["fields"]["telepathy"].as_str().unwrap().contains("unknown capability"), "{e}");
    assert!(e["error"]["fields"]["evidence"].is_string(), "{e}");

    let (st, v) = t.owner.send_json("PATCH", "/api/page-ai/capabilities", json!({"knowledge_rag": false})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["capabilities"], json!({"evidence": true, "knowledge_rag": false}));
    // Every member's descriptors follow.
    let d = descriptors(&t.member).await;
    for id in ["hermes", "reasonix"] {
        let a = agent(&d, id);
        assert_eq!(a["capabilityStates"]["knowledge_rag"], "disabled", "{a}");
        assert_eq!(a["capabilities"], json!(["evidence"]));
        assert_eq!(a["disabledCapabilities"], json!(["knowledge_rag"]));
        for tool in a["tools"].as_array().unwrap() {
            let rag = tool["capabilityIds"] == json!(["knowledge_rag"]);
            assert_eq!(tool["enabled"], !rag, "{tool}");
        }
    }
    // And back.
    let (st, v) = t.owner.send_json("PATCH", "/api/page-ai/capabilities", json!({"knowledge_rag": true})).await;
    assert_eq!((st, v["capabilities"]["knowledge_rag"].clone()), (StatusCode::OK, json!(true)));
    assert_eq!(agent(&descriptors(&t.member).await, "hermes")["disabledCapabilities"], json!([]));
}

// ---- what a real run offers ----

/// A recording proxy in front of the scripted OpenAI server: each chat request body is kept
/// (the tools the model was offered, the model asked for) and the answer streamed back as is.
struct Recorder {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

async fn recorder() -> Recorder {
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let upstream = mock_llm().to_string();
    mnote::platform::http::install_tls_provider();
    let http = reqwest::Client::new();
    let kept = bodies.clone();
    let route = axum::routing::post(move |body: axum::body::Bytes| {
        let (http, upstream, kept) = (http.clone(), upstream.clone(), kept.clone());
        async move {
            kept.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            let r = http
                .post(format!("{upstream}/chat/completions"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            axum::response::Response::builder()
                .status(status)
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from_stream(r.bytes_stream()))
                .unwrap()
        }
    });
    let router = axum::Router::new().route("/v1/chat/completions", route);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.ok() });
    Recorder { url: format!("http://{addr}/v1"), bodies }
}

impl Recorder {
    fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.bodies.lock().unwrap())
    }
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| a.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

async fn run_to_end(c: &Client, agent: &str, kb: &str, prompt: &str) -> Value {
    let (st, run) = c
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": format!("req-{}", Uuid::new_v4()), "sessionId": "s-desc", "agentId": agent, "prompt": prompt,
                   "contextRefs": {"kbIds": [kb]}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let id = run["hostRunId"].as_str().unwrap().to_string();
    for _ in 0..1200 {
        let (_, r) = c.get_json(&format!("/api/page-ai/runs/{id}")).await;
        if matches!(r["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {id} did not end");
}

#[tokio::test]
async fn switching_a_capability_off_changes_the_tools_the_scripted_openai_server_receives() {
    let rec = recorder().await;
    let url = rec.url.clone();
    let t = team(move |c| c.agents.allowed_urls = vec![url]).await;
    bind_rag(&t).await;
    let (st, v) =
        t.owner.send_json("PUT", "/api/page-ai/agents/hermes/config", json!({"endpointUrl": rec.url, "model": "scripted"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");

    // Everything on: the six registry tools, as function names.
    let run = run_to_end(&t.member, "hermes", &t.kb, "Where do the robots charge?").await;
    assert_eq!(run["status"], "completed", "{run}");
    let bodies = rec.take();
    let mut all: Vec<String> = EVIDENCE_FNS.iter().chain(RAG_FNS.iter()).map(|s| s.to_string()).collect();
    all.sort();
    let mut first = offered(&bodies[0]);
    first.sort();
    assert_eq!(first, all, "{}", bodies[0]);

    // Knowledge RAG switched off by the admin: the next run offers the evidence tools only.
    let (st, _) = t.owner.send_json("PATCH", "/api/page-ai/capabilities", json!({"knowledge_rag": false})).await;
    assert_eq!(st, StatusCode::OK);
    let run2 = run_to_end(&t.member, "hermes", &t.kb, "Where do the robots charge?").await;
    assert_eq!(run2["status"], "completed", "{run2}");
    let bodies = rec.take();
    assert_eq!(offered(&bodies[0]), EVIDENCE_FNS, "{}", bodies[0]);
    assert_ne!(run["capabilitySnapshotHash"], run2["capabilitySnapshotHash"], "the run records what it was offered");

    // Evidence off too: no tools at all (the model answers without them).
    let (st, _) = t.owner.send_json("PATCH", "/api/page-ai/capabilities", json!({"evidence": false})).await;
    assert_eq!(st, StatusCode::OK);
    let run3 = run_to_end(&t.member, "hermes", &t.kb, "Where do the robots charge?").await;
    assert_eq!(run3["status"], "completed", "{run3}");
    let bodies = rec.take();
    assert!(bodies.iter().all(|b| offered(b).is_empty()), "{bodies:?}");
    assert!(run3["answer"].as_str().unwrap().starts_with("This is a scripted answer without tools."), "{run3}");

    // Back on for the team, but this member turned knowledge RAG off for hermes: four tools,
    // and the model the member picked among the configured ones.
    let (st, _) = t.owner.send_json("PATCH", "/api/page-ai/capabilities", json!({"evidence": true, "knowledge_rag": true})).await;
    assert_eq!(st, StatusCode::OK);
    let (st, v) =
        t.owner.send_json("PATCH", "/api/page-ai/preferences", json!({"ai.agent.hermes.extra_models": "scripted-b"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = t
        .member
        .send_json(
            "PATCH",
            "/api/page-ai/preferences",
            json!({"ai.agent.hermes.use_knowledge_rag": false, "ai.agent.hermes.model": "scripted-b"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let run4 = run_to_end(&t.member, "hermes", &t.kb, "Where do the robots charge?").await;
    assert_eq!(run4["status"], "completed", "{run4}");
    let bodies = rec.take();
    assert_eq!(offered(&bodies[0]), EVIDENCE_FNS, "{}", bodies[0]);
    assert_eq!(bodies[0]["model"], "scripted-b");
    assert_eq!(run4["preferences"]["values"]["ai.agent.hermes.use_knowledge_rag"], false, "{run4}");
    // The owner's own runs are not affected by the member's preferences.
    let run5 = run_to_end(&t.owner, "hermes", &t.kb, "Where do the robots charge?").await;
    assert_eq!(run5["status"], "completed");
    let bodies = rec.take();
    assert_eq!(offered(&bodies[0]).len(), 6, "{}", bodies[0]);
    assert_eq!(bodies[0]["model"], "scripted");
}

fn acp_script() -> String {
    crate::fixtures::acp_agent_script()
}

/// The `session/new` requests the ACP agent received, from the copy `tee` kept of its stdin.
fn session_news(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|m| m["method"] == "session/new").collect()
}

#[tokio::test]
async fn switching_knowledge_rag_off_changes_the_tools_offered_to_the_acp_agent() {
    let dir = tempfile::tempdir().unwrap();
    // The agent may run as an unprivileged user (a server running as root): it writes here.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let log = dir.path().join("stdin.jsonl");
    let pid = dir.path().join("agent.pid");
    let line = format!("tee -a '{}' | exec python3 '{}' --pid-file '{}'", log.display(), acp_script(), pid.display());
    let writable = dir.path().to_path_buf();
    let t = team(move |c| {
        c.agents.acp_command = Some(vec!["sh".into(), "-c".into(), line]);
        crate::fixtures::let_the_test_agent_work(c, &writable);
    })
    .await;
    bind_rag(&t).await;
    let (st, v) =
        t.member.send_json("PATCH", "/api/page-ai/preferences", json!({"ai.agent.reasonix.profile_id": "night-shift"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let run = run_to_end(&t.member, "reasonix", &t.kb, "Where do the robots charge?").await;
    assert_eq!(run["status"], "completed", "{run}");
    let news = session_news(&log);
    assert_eq!(news.len(), 1, "{news:?}");
    let names = |m: &Value| -> Vec<String> {
        m["params"]["_meta"]["mnote"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&news[0]).len(), 6, "{}", news[0]);
    assert!(names(&news[0]).contains(&"mnote.knowledge_rag.query".to_string()));
    // The run's frozen preferences travel with it.
    assert_eq!(news[0]["params"]["_meta"]["mnote"]["preferences"]["ai.agent.reasonix.profile_id"], "night-shift");

    let (st, _) = t.owner.send_json("PATCH", "/api/page-ai/capabilities", json!({"knowledge_rag": false})).await;
    assert_eq!(st, StatusCode::OK);
    let run = run_to_end(&t.member, "reasonix", &t.kb, "Where do the robots charge?").await;
    assert_eq!(run["status"], "completed", "{run}");
    let news = session_news(&log);
    assert_eq!(news.len(), 2);
    assert_eq!(
        names(&news[1]),
        ["mnote.evidence.search", "mnote.evidence.read", "mnote.evidence.open", "mnote.evidence.outline"],
        "{}",
        news[1]
    );
    // And the descriptor says the same as what the agent got.
    let d = descriptors(&t.member).await;
    let enabled: Vec<&str> = agent(&d, "reasonix")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["enabled"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(enabled, names(&news[1]));
}

#[tokio::test]
async fn the_selftest_passes_in_process_and_as_a_command() {
    let app = spawn_app().await;
    let r = selftest::run(&app.config);
    assert!(r.ok(), "{:#?}", r.problems);
    assert!(r.checks > 100, "{}", r.checks);
    // Preferences responses validate too (an empty body is not one).
    assert!(!selftest::validate(PREFERENCES_SCHEMA, &json!({})).is_empty());

    let s = app.bootstrap("acme", "owner@acme.test").await;
    let _ = s;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnote"))
        .args(["agents", "selftest", "--tenant", "acme"])
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .env("MNOTE_GRANTABLE_ROOTS", &app.docs)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("agents selftest: ok"), "{stdout}");
    // The test build has the `jsonschema` feature (Cargo.toml's dev-dependency on this package):
    // the command ran the schema checks too.
    assert!(stdout.contains("JSON Schemas)") && !stdout.contains("NOT RUN"), "{stdout}");
    // A bad operator field definition fails it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnote"))
        .args(["agents", "selftest"])
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .env("MNOTE_AGENT_EXTRA_FIELDS", r#"[{"key": "ai.agent.nobody.x", "label": {"en": "X"}, "kind": "string"}]"#)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("FAIL MNOTE_AGENT_EXTRA_FIELDS"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
