//! The `openai` agent runtime end to end: a tenant's `hermes` / `chat_only` agents pointed at
//! the scripted OpenAI-compatible mock (`scripts/mock_openai.py`, model `scripted`), runs
//! created and read through the run API, their journals checked event by event.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{helpers::*, lightrag::mock_llm};

const KEY: &str = "sk-test-1234";
const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\n\
The robots charge overnight in the north hall. Each robot reports its battery level every minute.\n";

/// `http://127.0.0.1:<port>`: the mock's root (its API is under `/v1`).
fn mock_root() -> String {
    mock_llm().trim_end_matches("/v1").to_string()
}

struct Ctx {
    // Kept alive for the server it runs.
    _app: TestApp,
    client: Client,
    kb: String,
}

/// A tenant whose KB holds the handbook (indexed), on an app that allows the mock (and
/// `extra_allowed`) as agent endpoints.
async fn setup(tweak: impl FnOnce(&mut mnote::config::Config), extra_allowed: &[String]) -> Ctx {
    let mut allowed = vec![mock_root()];
    allowed.extend_from_slice(extra_allowed);
    let app = spawn_app_with(|c| {
        c.agents.allowed_urls = allowed;
        tweak(c);
    })
    .await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("acme/handbook.md", HANDBOOK);
    let (st, g) = client
        .post_json("/api/grants", json!({"path": app.docs_path("acme"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = client.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = client.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("acme")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    let (_, list) = client.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(list["items"][0]["status"], "indexed", "{list}");
    Ctx { _app: app, client, kb }
}

/// Point `agent` at `endpoint` with model `scripted` and `key`.
async fn configure(c: &Ctx, agent: &str, endpoint: &str, key: &str) {
    let (st, v) = c
        .client
        .send_json(
            "PUT",
            &format!("/api/page-ai/agents/{agent}/config"),
            json!({"endpointUrl": endpoint, "model": "scripted", "apiKey": key}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["provider"], "openai", "{v}");
    assert_eq!(v["hasApiKey"], true, "{v}");
    assert!(!v.to_string().contains(key), "the key came back: {v}");
}

/// Start a run of `agent` over the KB; its id.
async fn start(c: &Ctx, agent: &str, prompt: &str) -> String {
    let (st, run) = c
        .client
        .post_json(
            "/api/page-ai/runs",
            json!({
                "requestId": format!("req-{}", Uuid::new_v4()),
                "sessionId": "session-1",
                "agentId": agent,
                "prompt": prompt,
                "contextRefs": {"kbIds": [c.kb]},
            }),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    assert_eq!(run["provider"], "openai", "{run}");
    run["hostRunId"].as_str().unwrap().to_string()
}

fn is_terminal(status: &Value) -> bool {
    matches!(status.as_str(), Some("completed" | "failed" | "cancelled"))
}

/// Poll the run until it ends (a generous number of rounds, not a time limit).
async fn finished(c: &Ctx, id: &str) -> Value {
    for _ in 0..1200 {
        let (st, run) = c.client.get_json(&format!("/api/page-ai/runs/{id}")).await;
        assert_eq!(st, StatusCode::OK, "{run}");
        if is_terminal(&run["status"]) {
            return run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {id} did not end");
}

/// Every journal event of the run so far, in order.
async fn events(c: &Ctx, id: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut after = 0;
    loop {
        let (st, page) = c.client.get_json(&format!("/api/page-ai/runs/{id}/events?afterSeq={after}")).await;
        assert_eq!(st, StatusCode::OK, "{page}");
        let items = page["items"].as_array().unwrap().clone();
        if items.is_empty() {
            return out;
        }
        after = items.last().unwrap()["seq"].as_i64().unwrap();
        let ended = page["ended"] == true;
        out.extend(items);
        if ended {
            return out;
        }
    }
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

fn streamed(events: &[Value]) -> String {
    events.iter().filter(|e| e["kind"] == "message.delta").map(|e| e["payload"]["text"].as_str().unwrap()).collect()
}

/// The run ended as `status`; neither the run nor any event shows the configured key.
async fn ended(c: &Ctx, id: &str, status: &str, key: &str) -> (Value, Vec<Value>) {
    let run = finished(c, id).await;
    assert_eq!(run["status"], status, "{run}");
    let evs = events(c, id).await;
    assert!(!run.to_string().contains(key), "the key is in the run: {run}");
    for e in &evs {
        assert!(!e.to_string().contains(key), "the key is in an event: {e}");
    }
    (run, evs)
}

#[tokio::test]
async fn chat_only_streams_its_answer_in_deltas_and_gets_no_tools() {
    let c = setup(|_| {}, &[]).await;
    // Configured without `/v1`: the runtime adds it.
    configure(&c, "chat_only", &mock_root(), KEY).await;
    let id = start(&c, "chat_only", "What do the robots do at night?").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let answer = run["answer"].as_str().unwrap();
    // The mock's answer for a request without `tools`.
    assert!(answer.starts_with("This is a scripted answer without tools."), "{answer}");
    assert!(answer.contains("You asked: \u{201c}What do the robots do at night?\u{201d}"), "{answer}");
    let deltas = evs.iter().filter(|e| e["kind"] == "message.delta").count();
    assert!(deltas >= 2, "one delta event for a streamed answer: {:?}", kinds(&evs));
    assert_eq!(streamed(&evs), answer);
    assert!(evs.iter().filter(|e| e["kind"] == "message.delta").all(|e| e["source"] == "chat_only"));
    assert!(!kinds(&evs).iter().any(|k| k.starts_with("tool.")), "{:?}", kinds(&evs));
    assert_eq!(kinds(&evs).last(), Some(&"run.completed"));
    assert!(run["providerRunId"].as_str().unwrap().starts_with("chatcmpl-scripted-"), "{run}");
}

#[tokio::test]
async fn hermes_searches_through_the_tool_box_and_answers_with_citation_links() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge?").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let k = kinds(&evs);
    let started = evs.iter().find(|e| e["kind"] == "tool.started").unwrap_or_else(|| panic!("no tool call: {k:?}"));
    assert_eq!(started["source"], "tool", "{started}");
    // The arguments the mock streamed in three pieces arrived whole.
    assert_eq!(started["payload"]["arguments"]["query"], "Where do the robots charge?", "{started}");
    let completed = evs.iter().find(|e| e["kind"] == "tool.completed").expect("tool.completed");
    assert_eq!(completed["payload"]["ok"], true, "{completed}");
    assert_eq!(completed["payload"]["callId"], started["payload"]["callId"]);
    let found: Vec<&str> =
        completed["payload"]["evidenceIds"].as_array().expect("evidence ids").iter().map(|v| v.as_str().unwrap()).collect();
    assert!(!found.is_empty(), "{completed}");
    let pos = |kind: &str| k.iter().position(|x| *x == kind).unwrap();
    assert!(pos("tool.started") < pos("tool.completed") && pos("tool.completed") < pos("run.completed"), "{k:?}");

    // The answer: the mock's cited lines, the markers turned into citationMarkdown links.
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.contains("The robots charge overnight in the north hall."), "{answer}");
    assert!(!answer.contains("[evidence:"), "a marker was left unlinked: {answer}");
    assert!(
        found.iter().any(|e| answer.contains(&format!("view?evidence={e}"))) && answer.contains("](/sources/"),
        "no citation link to a found evidence id: {answer}"
    );
    // Each link says it was opened from this answer (the viewer's breadcrumb leads back).
    assert!(answer.contains(&format!("&from=ai:{id}#hl)")), "{answer}");
    // What streamed was the model's text, markers and all.
    let text = streamed(&evs);
    assert!(found.iter().any(|e| text.contains(&format!("[evidence:{e}]"))), "{text}");
}

#[tokio::test]
async fn an_error_in_the_stream_fails_the_run_with_llm_stream_error() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge? [[error]]").await;
    let (run, evs) = ended(&c, &id, "failed", KEY).await;
    assert_eq!(run["error"]["code"], "llm_stream_error", "{run}");
    assert!(run["error"]["message"].as_str().unwrap().contains("failed on purpose"), "{run}");
    let failed = evs.last().unwrap();
    assert_eq!(failed["kind"], "run.failed", "{:?}", kinds(&evs));
    assert_eq!(failed["payload"]["code"], "llm_stream_error");
    // The deltas before the error were journaled.
    assert!(!streamed(&evs).is_empty(), "{:?}", kinds(&evs));
}

#[tokio::test]
async fn a_silent_stream_fails_the_run_with_agent_timeout() {
    let c = setup(|c| c.agents.idle_timeout = std::time::Duration::from_secs(3), &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge? [[hang]]").await;
    let (run, evs) = ended(&c, &id, "failed", KEY).await;
    assert_eq!(run["error"]["code"], "agent_timeout", "{run}");
    assert_eq!(run["error"]["message"], "the model sent nothing for 3 s", "{run}");
    assert_eq!(evs.last().unwrap()["payload"]["code"], "agent_timeout");
    assert!(!streamed(&evs).is_empty(), "the few deltas before the silence: {:?}", kinds(&evs));
}

#[tokio::test]
async fn a_run_cancelled_while_streaming_ends_cancelled() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge? [[slow]]").await;
    // Wait until the answer is streaming.
    let mut streaming = false;
    for _ in 0..1200 {
        if events(&c, &id).await.iter().any(|e| e["kind"] == "message.delta") {
            streaming = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(streaming, "no delta arrived");
    let (st, v) = c.client.post_json(&format!("/api/page-ai/runs/{id}/cancel"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (run, evs) = ended(&c, &id, "cancelled", KEY).await;
    let k = kinds(&evs);
    assert_eq!(k.last(), Some(&"run.cancelled"), "{k:?}");
    assert!(!k.contains(&"run.completed"), "{k:?}");
    // Stopped early: the slow answer sends at least 40 deltas 150 ms apart (each its own
    // event, the journal coalesces only within 75 ms); only the first few arrived.
    let deltas = evs.iter().filter(|e| e["kind"] == "message.delta").count();
    assert!((1..40).contains(&deltas), "{deltas} deltas: {k:?}");
    // The partial answer is kept.
    assert_eq!(run["answer"].as_str().unwrap_or_default(), streamed(&evs), "{run}");
}

#[tokio::test]
async fn a_refused_key_fails_with_llm_unauthorized_and_is_never_shown() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), "sk-wrong").await;
    let id = start(&c, "hermes", "Where do the robots charge?").await;
    let (run, evs) = ended(&c, &id, "failed", "sk-wrong").await;
    assert_eq!(run["error"]["code"], "llm_unauthorized", "{run}");
    assert!(run["error"]["message"].as_str().unwrap().contains("HTTP 401"), "{run}");
    assert_eq!(evs.last().unwrap()["payload"]["code"], "llm_unauthorized");
}

#[tokio::test]
async fn an_endpoint_that_does_not_answer_fails_with_llm_unavailable() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{closed}/v1");
    let c = setup(|_| {}, std::slice::from_ref(&url)).await;
    configure(&c, "hermes", &url, KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge?").await;
    let (run, _) = ended(&c, &id, "failed", KEY).await;
    assert_eq!(run["error"]["code"], "llm_unavailable", "{run}");
    let message = run["error"]["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("cannot reach http://127.0.0.1:{closed}/v1/chat/completions")), "{message}");
}

#[tokio::test]
async fn tool_rounds_are_bounded_and_the_last_request_asks_for_the_answer() {
    let c = setup(|c| c.agents.max_tool_rounds = 2, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    // `[[loop]]`: the model calls the search tool every time it is offered tools.
    let id = start(&c, "hermes", "Where do the robots charge? [[loop]]").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let calls: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "tool.started").collect();
    assert_eq!(calls.len(), 2, "{:?}", kinds(&evs));
    assert_ne!(calls[0]["payload"]["callId"], calls[1]["payload"]["callId"]);
    assert_eq!(evs.iter().filter(|e| e["kind"] == "tool.completed").count(), 2);
    // Offered no tools, the model answered from the results it had.
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.contains("The robots charge overnight in the north hall."), "{answer}");
    assert!(answer.contains("](/sources/") && !answer.contains("[evidence:"), "{answer}");
}

#[tokio::test]
async fn a_run_survives_the_database_dropping_its_connections_mid_stream() {
    // A Postgres restart as the server sees it: every backend of its database is terminated
    // (57P01) while the run streams. (The cluster is shared with the tests running beside
    // this one, so it is not restarted itself.) Appends and the terminal write are retried:
    // the run completes and its journal has every event once, with no gap.
    let c = setup(|_| {}, &[]).await;
    configure(&c, "chat_only", &mock_root(), KEY).await;
    let id = start(&c, "chat_only", "Tell me about the robots [[slow]]").await;
    let mut dropped = 0;
    for _ in 0..600 {
        let deltas = events(&c, &id).await.iter().filter(|e| e["kind"] == "message.delta").count();
        if deltas >= 3 + dropped * 5 {
            let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url()).await.unwrap();
            let killed: Vec<bool> = sqlx::query_scalar(
                "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()",
            )
            .bind(&c._app.db_name)
            .fetch_all(&mut admin)
            .await
            .unwrap();
            assert!(!killed.is_empty());
            dropped += 1;
            if dropped == 2 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(dropped, 2, "the run ended before its connections could be dropped twice");
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let seqs: Vec<i64> = evs.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "no gap, no duplicate");
    assert_eq!(streamed(&evs), run["answer"].as_str().unwrap(), "every streamed delta is in the journal once");
    assert_eq!(kinds(&evs).last(), Some(&"run.completed"));
}

/// Issue 31 item 10: a single 200 MB model line kept a run busy for ~5 min (the idle timeout
/// never fired). A line past `max_line_bytes` fails the run at once with `llm_bad_response`.
#[tokio::test]
async fn a_model_line_without_end_fails_the_run_at_the_line_limit() {
    let c = setup(
        |c| {
            c.agents.idle_timeout = std::time::Duration::from_secs(60);
            c.agents.max_line_bytes = 1 << 20;
        },
        &[],
    )
    .await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let started = std::time::Instant::now();
    let id = start(&c, "hermes", "Where do the robots charge? [[hugeline]]").await;
    let (run, evs) = ended(&c, &id, "failed", KEY).await;
    assert_eq!(run["error"]["code"], "llm_bad_response", "{run}");
    assert!(run["error"]["message"].as_str().unwrap().contains("a line longer than 1048576 bytes"), "{run}");
    assert_eq!(evs.last().unwrap()["payload"]["code"], "llm_bad_response");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "took {:?}", started.elapsed());
}

/// Issue 31 item 10: a 105-million-character answer was stored and served. The streamed
/// answer stops at `max_answer_bytes` (`answer_too_large`), every event stays under
/// `max_event_bytes`, and what is stored is bounded.
#[tokio::test]
async fn an_answer_over_the_limit_fails_the_run_with_answer_too_large() {
    let c = setup(
        |c| {
            c.agents.max_answer_bytes = 256 << 10;
            c.agents.max_event_bytes = 64 << 10;
        },
        &[],
    )
    .await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge? [[huge]]").await;
    let (run, evs) = ended(&c, &id, "failed", KEY).await;
    assert_eq!(run["error"]["code"], "answer_too_large", "{run}");
    assert_eq!(evs.last().unwrap()["payload"]["code"], "answer_too_large");
    let text = streamed(&evs);
    assert!(!text.is_empty() && text.len() <= 256 << 10, "{} bytes streamed", text.len());
    for e in &evs {
        let n = e["payload"].to_string().len();
        assert!(n <= 64 << 10, "a {} event of {n} bytes", e["kind"]);
    }
    assert!(run.to_string().len() < 600 << 10, "the stored run is bounded: {} bytes", run.to_string().len());
}

/// Issue 27: llama-cpp-python's server ignores `tools` unless the request says `tool_choice`
/// (`[[needchoice]]` shapes the mock so): tools are always offered with `tool_choice: "auto"`,
/// and the model searches.
#[tokio::test]
async fn a_server_that_ignores_tools_without_tool_choice_still_gets_them() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge? [[needchoice]]").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let started: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "tool.started").collect();
    assert_eq!(started.len(), 1, "the tools were ignored: {:?} {run}", kinds(&evs));
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.contains("The robots charge overnight in the north hall.") && answer.contains("](/sources/"), "{answer}");
    assert!(!answer.contains("without tools"), "{answer}");
}

/// Issue 27: some servers (llama-cpp-python, some vLLM versions) repeat `id`, `type` and
/// `function.name` in every tool-call delta (`[[namerepeat]]`): still one call, its name
/// once and its arguments whole.
#[tokio::test]
async fn a_stream_repeating_the_function_name_in_every_delta_is_one_call() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge? [[namerepeat]]").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let started: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "tool.started").collect();
    assert_eq!(started.len(), 1, "{:?}", kinds(&evs));
    assert_eq!(started[0]["payload"]["arguments"]["query"], "Where do the robots charge?", "{}", started[0]);
    let completed = evs.iter().find(|e| e["kind"] == "tool.completed").expect("tool.completed");
    assert_eq!(completed["payload"]["ok"], true, "a repeated name made an unknown tool: {completed}");
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.contains("The robots charge overnight in the north hall.") && answer.contains("](/sources/"), "{answer}");
}

/// Issue 27: a model whose server does not parse its calls writes the call as text
/// (`<tool_call>{…}</tool_call>` in `content`, `[[textcall]]`): the run completes with that
/// text as its answer; nothing is run, nothing crashes.
#[tokio::test]
async fn a_tool_call_written_as_text_ends_as_an_answer_with_the_text() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    let id = start(&c, "hermes", "Where do the robots charge? [[textcall]]").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.starts_with("<tool_call>") && answer.contains("\"name\": \"mnote_evidence_search\""), "{answer}");
    assert!(answer.contains("Where do the robots charge?"), "{answer}");
    assert!(!kinds(&evs).iter().any(|k| k.starts_with("tool.")), "{:?}", kinds(&evs));
    assert_eq!(streamed(&evs), answer);
    assert_eq!(kinds(&evs).last(), Some(&"run.completed"));
}

/// Issue 39 item 2: the model's function calls read only the run's KBs. Another KB of the same
/// owner (readable through the API) is `not_found` to read/open/outline by id in a run over the
/// handbook's KB; the handbook itself is found.
#[tokio::test]
async fn function_calls_by_id_stay_inside_the_runs_knowledge_bases() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;
    c._app.write_doc("other/zoo.md", "# Zoo\n\nThe zebra enclosure opens at nine.\n");
    let (st, kb) = c.client.post_json("/api/kbs", json!({"name": "Zoo"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let zoo = kb["id"].as_str().unwrap();
    let (st, g) = c
        .client
        .post_json("/api/grants", json!({"path": c._app.docs_path("other"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, r) = c.client.post_json(&format!("/api/kbs/{zoo}/sources"), json!({"path": c._app.docs_path("other")})).await;
    assert!(st.is_success(), "{r}");
    c._app.run_jobs().await;
    let client = &c.client;
    let found = |kb: &str, q: &str| {
        let body = json!({"query": q, "mode": "lexical", "kbIds": [kb]});
        async move {
            let (_, v) = client.post_json("/api/evidence/search", body).await;
            let hit = &v["results"][0];
            (hit["evidenceId"].as_str().unwrap().to_string(), hit["source"]["sourceId"].as_str().unwrap().to_string())
        }
    };
    let (zebra, zoo_source) = found(zoo, "zebra enclosure").await;
    let (robots, handbook) = found(&c.kb, "robots charge").await;
    for (prompt, expected) in [
        (format!("[[read]] {zebra}"), "mnote_evidence_read: not_found"),
        (format!("[[open]] {zebra}"), "mnote_evidence_open: not_found"),
        (format!("[[outline]] {zoo_source}"), "mnote_evidence_outline: not_found"),
        (format!("[[read]] {robots}"), "mnote_evidence_read: ok"),
        (format!("[[outline]] {handbook}"), "mnote_evidence_outline: ok"),
    ] {
        let id = start(&c, "hermes", &prompt).await;
        let (run, evs) = ended(&c, &id, "completed", KEY).await;
        assert_eq!(run["answer"], expected, "{prompt}: {:?}", kinds(&evs));
        assert!(evs.iter().any(|e| e["kind"] == "tool.completed"), "{prompt}: {:?}", kinds(&evs));
    }
}

/// Issue 41: the model's own verdict, capped by our check of its quotes. A model that cites
/// quotes its passages hold answered; one that says (with the marker the system prompt asks
/// for) the evidence does not answer is `not_found`, the marker neither streamed nor in the
/// answer; one whose quotes do not hold is not `answered`, however sure it sounds.
#[tokio::test]
async fn the_models_verdict_and_our_quote_check_decide_the_receipts_verdict() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "hermes", mock_llm(), KEY).await;

    let id = start(&c, "hermes", "Where do the robots charge?").await;
    let (run, _) = ended(&c, &id, "completed", KEY).await;
    let r = &run["receipt"];
    assert_eq!(r["verdict"], "answered", "{r}");
    assert_eq!(r["verdictBasis"], "model", "{r}");
    assert_eq!(r["verified"], r["total"], "{r}");
    assert!(r["checked"].as_str().unwrap().starts_with(&format!("{} of {} citations found", r["total"], r["total"])), "{r}");

    let id = start(&c, "hermes", "What is our on-call rotation? [[notfound]]").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let r = &run["receipt"];
    assert_eq!((r["verdict"].as_str(), r["verdictReason"].as_str()), (Some("not_found"), Some("model_said_not_found")), "{r}");
    // The live ending carries the verdict too: a client knows it without re-reading the run.
    let ending = evs.iter().find(|e| e["kind"] == "run.completed").expect("run.completed");
    assert_eq!(ending["payload"]["verdict"], "not_found", "{ending}");
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.starts_with("The knowledge bases do not answer this question"), "{answer}");
    assert!(!answer.contains("[not-found]") && !streamed(&evs).contains("[not-found]"), "{answer}");
    assert!(kinds(&evs).contains(&"tool.completed"), "it searched first: {:?}", kinds(&evs));

    // "[partial]": the model answers part of the question; its quotes hold, so the receipt says
    // partial (never the green "answered"), and the marker is neither in the answer nor streamed.
    let id = start(&c, "hermes", "Where do the robots charge, and how long does a charge take? [[partial]]").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let r = &run["receipt"];
    assert_eq!((r["verdict"].as_str(), r["verdictReason"].as_str()), (Some("partial"), Some("model_said_partial")), "{r}");
    assert!(r["verified"].as_u64().unwrap() >= 1, "its quotes hold: {r}");
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.contains("do not say how long"), "{answer}");
    assert!(!answer.contains("[partial]") && !streamed(&evs).contains("[partial]"), "{answer}");

    let id = start(&c, "hermes", "Where do the robots charge? [[misquote]]").await;
    let (run, _) = ended(&c, &id, "completed", KEY).await;
    let r = &run["receipt"];
    assert!(r["total"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["verified"], 0, "{r}");
    assert_eq!((r["verdict"].as_str(), r["verdictReason"].as_str()), (Some("not_found"), Some("no_verified_quote")), "{r}");

    // The run page: no green check for an answer whose quotes did not hold.
    let mut browser = c._app.login("owner@acme.test").await;
    let (st, page) = browser.page(&format!("/ai/runs/{id}/result")).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    assert!(!page.contains("class=\"ai-verified all\""), "{page}");
    assert!(page.contains("Nothing in these knowledge bases answers this."), "{page}");
}

/// A chat without evidence tools is neither answered nor not found: no verdict.
#[tokio::test]
async fn a_chat_without_evidence_tools_gets_no_verdict() {
    let c = setup(|_| {}, &[]).await;
    configure(&c, "chat_only", mock_llm(), KEY).await;
    let id = start(&c, "chat_only", "What do the robots do at night?").await;
    let (run, evs) = ended(&c, &id, "completed", KEY).await;
    let ending = evs.iter().find(|e| e["kind"] == "run.completed").expect("run.completed");
    assert!(ending["payload"].get("verdict").is_none(), "no verdict key: {ending}");
    assert_eq!(run["receipt"]["verdict"], Value::Null, "{run}");
    assert!(run["receipt"]["checked"].as_str().unwrap().contains("no verdict"), "{run}");
}
