//! `reasonix` runs on the `acp` runtime through the real HTTP server, against
//! `scripts/acp_agent.py` (a small stdlib ACP agent: plan, its own tool call around our
//! `mnote.evidence.search`, a cited answer; `[[slow]]`, `[[hang]]`, `[[crash]]`, `[[write]]`).

use std::{path::Path, time::Duration};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{files::third_party_acp_agent, fixtures::*, helpers::*};

const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\nThe robots charge overnight in the north hall. Each robot reports its battery level to the fleet controller every minute.\n";

pub(crate) fn agent_script() -> String {
    acp_agent_script()
}

/// An app whose `reasonix` runs `python3 scripts/acp_agent.py --pid-file <pid_file>`. The
/// pid file's directory is made writable by anyone: the agent may run as another user.
async fn acp_app(pid_file: &Path, tweak: impl FnOnce(&mut mnote::config::Config)) -> TestApp {
    let dir = pid_file.parent().unwrap();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let command = vec!["python3".into(), agent_script(), "--pid-file".into(), pid_file.to_string_lossy().into_owned()];
    spawn_app_with(|c| {
        c.agents.acp_command = Some(command);
        let_the_test_agent_work(c, dir);
        tweak(c);
    })
    .await
}

/// A tenant with the handbook indexed in a KB.
pub(crate) async fn seeded(app: &TestApp) -> Kb {
    let k = kb_with_grant(app).await;
    app.write_doc("team/notes/handbook.md", HANDBOOK);
    register(&k, app, "team/notes").await;
    app.run_jobs().await;
    k
}

pub(crate) async fn start(k: &Kb, prompt: &str) -> Value {
    let body = json!({
        "requestId": format!("req-{}", uuid::Uuid::new_v4().simple()),
        "sessionId": "session-acp",
        "agentId": "reasonix",
        "prompt": prompt,
        "contextRefs": {"kbIds": [k.kb]},
    });
    let (st, run) = k.client.post_json("/api/page-ai/runs", body).await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    run
}

pub(crate) fn id_of(run: &Value) -> String {
    run["hostRunId"].as_str().unwrap_or_else(|| panic!("{run}")).to_string()
}

/// Poll the run until it is completed, failed or cancelled.
pub(crate) async fn finished(k: &Kb, id: &str) -> Value {
    for _ in 0..600 {
        let (st, run) = k.client.get_json(&format!("/api/page-ai/runs/{id}")).await;
        assert_eq!(st, StatusCode::OK, "{run}");
        if matches!(run["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("run {id} did not end");
}

async fn events(k: &Kb, id: &str) -> Vec<Value> {
    let (st, page) = k.client.get_json(&format!("/api/page-ai/runs/{id}/events?afterSeq=0")).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    page["items"].as_array().unwrap_or_else(|| panic!("{page}")).clone()
}

fn of_kind<'a>(events: &'a [Value], kind: &str, source: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind && e["source"] == source).collect()
}

/// The agent's pid, from its `--pid-file`.
async fn agent_pid(pid_file: &Path) -> u32 {
    for _ in 0..100 {
        if let Ok(s) = std::fs::read_to_string(pid_file)
            && let Ok(pid) = s.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the agent wrote no pid to {}", pid_file.display());
}

/// Whether `pid` runs now (exists and is not a zombie waiting to be reaped).
fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // `pid (comm) state ...`: the state follows the closing parenthesis.
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
    }
}

/// Whether `pid` stops running within a few seconds.
async fn is_gone(pid: u32) -> bool {
    for _ in 0..100 {
        if !is_running(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_reasonix_run_streams_its_plan_its_tools_and_a_cited_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("agent.pid");
    let app = acp_app(&pid_file, |_| {}).await;
    let k = seeded(&app).await;
    // [[slow]]: 40+ chunks 150 ms apart, so the journal holds several deltas.
    let run = start(&k, "[[slow]] Where do the robots charge?").await;
    assert_eq!((run["provider"].as_str(), run["providerNote"].as_str()), (Some("acp"), None), "{run}");
    let id = id_of(&run);
    let run = finished(&k, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["provider"], "acp");
    let session = run["providerRunId"].as_str().unwrap_or_else(|| panic!("no providerRunId: {run}"));
    assert!(session.starts_with("sess-"), "{run}");

    let ev = events(&k, &id).await;
    let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(of_kind(&ev, "message.delta", "reasonix").len() >= 3, "{kinds:?}");
    let plans = of_kind(&ev, "plan.updated", "reasonix");
    assert!(plans.len() >= 2, "{kinds:?}");
    assert_eq!(plans[0]["payload"]["entries"].as_array().map(Vec::len), Some(3), "{}", plans[0]);
    assert_eq!(plans[0]["payload"]["entries"][0]["status"], "in_progress");
    assert!(plans.last().unwrap()["payload"]["entries"].as_array().unwrap().iter().all(|e| e["status"] == "completed"));

    // The agent's own tool call, compact and attributed to the agent.
    let started = of_kind(&ev, "tool.started", "reasonix");
    assert_eq!(started.len(), 1, "{kinds:?}");
    assert_eq!(started[0]["payload"]["callId"], "search-1");
    assert_eq!(started[0]["payload"]["name"], "Search the knowledge bases");
    assert_eq!(started[0]["payload"]["arguments"], json!({"kind": "search", "status": "in_progress"}));
    let completed = of_kind(&ev, "tool.completed", "reasonix");
    assert_eq!((completed.len(), completed[0]["payload"]["ok"].as_bool()), (1, Some(true)), "{kinds:?}");

    // Our tool, called through `_mnote/tools/call`, journaled by the tool box.
    let ours = of_kind(&ev, "tool.started", "tool");
    assert_eq!(ours.len(), 1, "{kinds:?}");
    assert_eq!(ours[0]["payload"]["name"], "mnote.evidence.search");
    assert_eq!(ours[0]["payload"]["arguments"]["query"], "Where do the robots charge?");
    let result = of_kind(&ev, "tool.completed", "tool");
    assert_eq!(result.len(), 1, "{kinds:?}");
    assert_eq!(result[0]["payload"]["ok"], true, "{}", result[0]);
    let evidence: Vec<&str> =
        result[0]["payload"]["evidenceIds"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert!(!evidence.is_empty(), "{}", result[0]);

    // The answer: the quote's first sentence, its [evidence:<id>] marker turned into our link.
    let end = ev.last().unwrap();
    assert_eq!(end["kind"], "run.completed", "{kinds:?}");
    let answer = end["payload"]["answer"].as_str().unwrap();
    assert_eq!(run["answer"].as_str(), Some(answer));
    assert!(answer.contains("The robots charge overnight in the north hall."), "{answer}");
    assert!(answer.contains(&format!("view?evidence={}", evidence[0])), "{answer}");
    assert!(!answer.contains("[evidence:"), "{answer}");
    // The streamed text is the agent's (markers and all), in order.
    let streamed: String =
        of_kind(&ev, "message.delta", "reasonix").iter().map(|e| e["payload"]["text"].as_str().unwrap()).collect();
    assert!(streamed.starts_with("The robots charge overnight"), "{streamed}");
    assert!(streamed.contains(&format!("[evidence:{}]", evidence[0])), "{streamed}");
    assert!(is_gone(agent_pid(&pid_file).await).await, "the agent outlived its run");
}

#[tokio::test]
async fn cancelling_a_slow_run_cancels_it_and_ends_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("agent.pid");
    let app = acp_app(&pid_file, |_| {}).await;
    let k = seeded(&app).await;
    let id = id_of(&start(&k, "[[slow]] Where do the robots charge?").await);
    // Wait for the answer to be streaming.
    let mut streaming = false;
    for _ in 0..300 {
        if !of_kind(&events(&k, &id).await, "message.delta", "reasonix").is_empty() {
            streaming = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(streaming, "the run never streamed");
    let pid = agent_pid(&pid_file).await;
    assert!(is_running(pid), "the agent is not running mid-answer");
    let (st, c) = k.client.post_json(&format!("/api/page-ai/runs/{id}/cancel"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{c}");
    let run = finished(&k, &id).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    let ev = events(&k, &id).await;
    assert_eq!(ev.last().unwrap()["kind"], "run.cancelled", "{ev:?}");
    // Far fewer than the 40+ chunks of the whole answer were streamed.
    assert!(of_kind(&ev, "message.delta", "reasonix").len() < 40, "{ev:?}");
    assert!(is_gone(pid).await, "the agent process {pid} is still running");
}

#[tokio::test]
async fn an_agent_that_crashes_fails_the_run_with_its_exit_status_and_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("agent.pid");
    let app = acp_app(&pid_file, |_| {}).await;
    let k = seeded(&app).await;
    let id = id_of(&start(&k, "[[crash]] Where do the robots charge?").await);
    let run = finished(&k, &id).await;
    assert_eq!((run["status"].as_str(), run["error"]["code"].as_str()), (Some("failed"), Some("acp_failed")), "{run}");
    let message = run["error"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("crashing on purpose"), "{message}");
    let ev = events(&k, &id).await;
    let end = ev.last().unwrap();
    assert_eq!((end["kind"].as_str(), end["payload"]["code"].as_str()), (Some("run.failed"), Some("acp_failed")), "{ev:?}");
    // What it streamed before it crashed is kept.
    assert!(!of_kind(&ev, "message.delta", "reasonix").is_empty(), "{ev:?}");

    // Resumed: a new agent process gets the earlier turns before the question, and answers.
    let body = json!({
        "requestId": "req-resume", "sessionId": "session-acp", "agentId": "reasonix",
        "prompt": "Where do the robots charge?", "contextRefs": {"kbIds": [k.kb]},
        "parentRunId": id, "resumeRequestId": "resume-1",
    });
    let (st, child) = k.client.post_json("/api/page-ai/runs", body).await;
    assert_eq!(st, StatusCode::CREATED, "{child}");
    let child = finished(&k, &id_of(&child)).await;
    assert_eq!(child["status"], "completed", "{child}");
    let answer = child["answer"].as_str().unwrap();
    assert!(answer.starts_with("(Continuing our conversation.) The robots charge overnight"), "{answer}");
}

#[tokio::test]
async fn a_silent_agent_times_out_and_is_ended() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("agent.pid");
    let app = acp_app(&pid_file, |c| c.agents.idle_timeout = Duration::from_secs(3)).await;
    let k = seeded(&app).await;
    let id = id_of(&start(&k, "[[hang]] Where do the robots charge?").await);
    let run = finished(&k, &id).await;
    assert_eq!((run["status"].as_str(), run["error"]["code"].as_str()), (Some("failed"), Some("agent_timeout")), "{run}");
    let ev = events(&k, &id).await;
    assert_eq!(of_kind(&ev, "message.delta", "reasonix").len(), 1, "one chunk, then silence: {ev:?}");
    assert!(is_gone(agent_pid(&pid_file).await).await, "the silent agent was left running");
}

#[tokio::test]
async fn the_agent_gets_no_permission_and_cannot_write_files() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("agent.pid");
    let app = acp_app(&pid_file, |_| {}).await;
    let k = seeded(&app).await;
    let id = id_of(&start(&k, "[[write]] Where do the robots charge?").await);
    let run = finished(&k, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let answer = run["answer"].as_str().unwrap();
    // session/request_permission → cancelled; fs/write_text_file → method not found.
    assert!(answer.starts_with("Permission: cancelled. Write: error -32601."), "{answer}");
    assert!(!Path::new("/tmp/mnote-acp-should-not-exist.md").exists());
}

#[tokio::test]
async fn an_agent_that_cannot_start_or_breaks_the_protocol_fails_with_its_code() {
    let app = spawn_app_with(|c| c.agents.acp_command = Some(vec!["/nonexistent/acp-agent".into()])).await;
    let k = seeded(&app).await;
    let run = finished(&k, &id_of(&start(&k, "Where do the robots charge?").await)).await;
    assert_eq!((run["status"].as_str(), run["error"]["code"].as_str()), (Some("failed"), Some("acp_failed")), "{run}");

    // A program that prints a banner on stdout is not an ACP agent.
    let banner = "import sys, time; print('Agent v2 starting...'); sys.stdout.flush(); time.sleep(30)";
    let app = spawn_app_with(|c| c.agents.acp_command = Some(vec!["python3".into(), "-c".into(), banner.into()])).await;
    let k = seeded(&app).await;
    let run = finished(&k, &id_of(&start(&k, "Where do the robots charge?").await)).await;
    assert_eq!((run["status"].as_str(), run["error"]["code"].as_str()), (Some("failed"), Some("acp_protocol_error")), "{run}");
    assert!(run["error"]["message"].as_str().unwrap().contains("Agent v2 starting"), "{run}");
}

#[tokio::test]
async fn reasonix_without_an_operator_command_runs_on_builtin() {
    let app = spawn_app_with(|_| {}).await;
    let k = seeded(&app).await;
    let run = start(&k, "Where do the robots charge?").await;
    assert_eq!((run["provider"].as_str(), run["providerNote"].as_str()), (Some("builtin"), Some("not_configured")), "{run}");
    let run = finished(&k, &id_of(&run)).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!((run["provider"].as_str(), run["providerNote"].as_str()), (Some("builtin"), Some("not_configured")), "{run}");
    assert_eq!(run["providerRunId"], Value::Null, "{run}");
}

// --- The sandbox (issue 31 item 8): a hostile agent's view of the machine. ---

/// An app whose `reasonix` runs the agent with the hostile options: the key file a real
/// data dir holds (`<data dir>/secret.key`, 0600 as `./dev` makes it), this process's pid as
/// the server's, and a pid file for the daemon it may start. `dir` is writable by anyone (the
/// agent may run as another user).
async fn hostile_app(dir: &Path, tweak: impl FnOnce(&mut mnote::config::Config)) -> TestApp {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let (pid_file, daemon_file) = (dir.join("agent.pid"), dir.join("daemon.pid"));
    spawn_app_with(|c| {
        let key = c.data_dir.join("secret.key");
        std::fs::create_dir_all(&c.data_dir).unwrap();
        std::fs::write(&key, "00".repeat(32)).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        c.agents.acp_command = Some(vec![
            "python3".into(),
            agent_script(),
            "--pid-file".into(),
            s(&pid_file),
            "--key-file".into(),
            s(&key),
            "--server-pid".into(),
            std::process::id().to_string(),
            "--daemon-pid-file".into(),
            s(&daemon_file),
        ]);
        let_the_test_agent_work(c, dir);
        tweak(c);
    })
    .await
}

/// The JSON report a hostile directive answers with.
pub(crate) async fn report(k: &Kb, directive: &str) -> Value {
    let run = finished(k, &id_of(&start(k, &format!("{directive} Where do the robots charge?")).await)).await;
    assert_eq!(run["status"], "completed", "{run}");
    serde_json::from_str(run["answer"].as_str().unwrap()).unwrap_or_else(|e| panic!("{e}: {run}"))
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[tokio::test]
async fn the_agent_sees_only_the_allow_listed_environment() {
    let tmp = tempfile::tempdir().unwrap();
    // CARGO_PKG_NAME is set by cargo for this process: declared, it passes by name.
    let app = hostile_app(tmp.path(), |c| c.agents.acp_env = vec!["CARGO_PKG_NAME".into()]).await;
    let k = seeded(&app).await;
    let env = report(&k, "[[env]]").await;
    let env = env["env"].as_object().unwrap_or_else(|| panic!("{env}"));
    let allowed = ["PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "TERM", "CARGO_PKG_NAME"];
    for name in env.keys() {
        assert!(allowed.contains(&name.as_str()) || name.starts_with("LC_"), "the agent got {name}: {env:?}");
    }
    assert_eq!(env.get("CARGO_PKG_NAME").and_then(Value::as_str), Some(env!("CARGO_PKG_NAME")), "{env:?}");
    // HOME is the run's own fresh directory, not the server's.
    let home = env["HOME"].as_str().unwrap();
    assert!(home.contains("mnote-acp-"), "{home}");
    assert_ne!(Some(home.to_string()), std::env::var("HOME").ok());
}

#[tokio::test]
async fn the_agent_cannot_read_the_key_file_or_the_servers_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let app = hostile_app(tmp.path(), |_| {}).await;
    let k = seeded(&app).await;
    let r = report(&k, "[[steal]]").await;
    let denied = |field: &str| r[field].as_str().is_some_and(|v| v.starts_with("denied"));
    assert!(denied("serverEnviron"), "{r}");
    assert!(denied("parentEnviron"), "{r}");
    // A server that runs as root runs its agents as `nobody` (MNOTE_ACP_USER); otherwise the
    // agent has the server's uid and file permissions cannot keep it from the key file
    // (README: what the sandbox holds in which mode).
    if running_as_root() {
        assert!(denied("keyFile"), "{r}");
        assert_eq!((r["uid"].as_u64(), r["gid"].as_u64()), (Some(65534), Some(65534)), "{r}");
        assert!(!r["groups"].as_array().unwrap().contains(&json!(0)), "{r}");
    }
}

#[tokio::test]
async fn no_process_the_agent_started_outlives_its_run() {
    let tmp = tempfile::tempdir().unwrap();
    let app = hostile_app(tmp.path(), |_| {}).await;
    let k = seeded(&app).await;
    let run = finished(&k, &id_of(&start(&k, "[[daemon]] Where do the robots charge?").await)).await;
    assert_eq!((run["status"].as_str(), run["answer"].as_str()), (Some("completed"), Some("Daemon started.")), "{run}");
    let daemon: u32 = std::fs::read_to_string(tmp.path().join("daemon.pid")).unwrap().trim().parse().unwrap();
    assert!(is_gone(daemon).await, "the agent's setsid daemon {daemon} outlived the run");
    assert!(is_gone(agent_pid(&tmp.path().join("agent.pid")).await).await, "the agent outlived its run");
}

#[tokio::test]
async fn a_line_over_the_cap_fails_the_run_with_acp_line_too_long() {
    let tmp = tempfile::tempdir().unwrap();
    let app = hostile_app(tmp.path(), |_| {}).await;
    let k = seeded(&app).await;
    let started = std::time::Instant::now();
    // The agent writes one 9 MiB line, then sleeps for 30 s: the run ends at the cap.
    let run = finished(&k, &id_of(&start(&k, "[[hugeline]] Where do the robots charge?").await)).await;
    assert_eq!((run["status"].as_str(), run["error"]["code"].as_str()), (Some("failed"), Some("acp_line_too_long")), "{run}");
    assert!(run["error"]["message"].as_str().unwrap().contains("8 MiB"), "{run}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(is_gone(agent_pid(&tmp.path().join("agent.pid")).await).await, "the agent outlived its run");
}

// --- Our tools over standard MCP (issue 27): the `mcpServers` entry of `session/new`. ---

/// An app whose `reasonix` runs the test agent with `extra` options; `dir` (for the pid file
/// and the agent's dumps) is made writable by anyone.
async fn acp_app_with_args(dir: &Path, extra: &[&str], tweak: impl FnOnce(&mut mnote::config::Config)) -> TestApp {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let mut command = vec!["python3".into(), agent_script(), "--pid-file".into(), dir.join("agent.pid").to_string_lossy().into()];
    command.extend(extra.iter().map(|s| s.to_string()));
    spawn_app_with(|c| {
        c.agents.acp_command = Some(command);
        let_the_test_agent_work(c, dir);
        tweak(c);
    })
    .await
}

/// Another tenant ("globex") with a document about charging robots, and one of its evidence ids.
pub(crate) async fn foreign_evidence(app: &TestApp) -> (String, Kb) {
    let s = app.bootstrap("globex", "owner@globex.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    std::fs::create_dir_all(app.docs.join("globex")).unwrap();
    let (st, g) = client
        .post_json("/api/grants", json!({"path": app.docs_path("globex"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = client.post_json("/api/kbs", json!({"name": "globex kb"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let k = Kb { client, tenant: s.tenant_id, kb: kb["id"].as_str().unwrap().to_string() };
    app.write_doc("globex/secret/plan.md", "# Globex plan\n\nThe robots charge in the Berlin bunker at noon.\n");
    register(&k, app, "globex/secret").await;
    app.run_jobs().await;
    let (st, r) = k.client.post_json("/api/evidence/search", json!({"query": "robots charge Berlin bunker"})).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    let id = r["results"][0]["evidenceId"].as_str().unwrap_or_else(|| panic!("{r}")).to_string();
    (id, k)
}

/// A JSON-RPC request to `/mcp` with `token`: the status and body.
async fn mcp_post(app: &TestApp, token: &str, method: &str, params: Value) -> (StatusCode, Value) {
    mnote::platform::http::install_tls_provider();
    let r = reqwest::Client::new()
        .post(format!("{}/mcp", app.base))
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let st = r.status();
    (st, r.json().await.unwrap_or(Value::Null))
}

/// The run token the agent received (`--mcp-dump`): its `mcpServers` entry.
fn dumped_server(dir: &Path) -> Value {
    let servers: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("mcp.json")).unwrap()).unwrap();
    assert_eq!(servers.as_array().map(Vec::len), Some(1), "{servers}");
    servers[0].clone()
}

#[tokio::test]
async fn an_agent_that_takes_mcp_servers_calls_our_tools_over_mcp_journaled_and_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("mcp.json");
    let dump_arg = dump.to_string_lossy().into_owned();
    let app = acp_app_with_args(tmp.path(), &["--mcp-http", "--mcp-dump", &dump_arg], |_| {}).await;
    let k = seeded(&app).await;
    let (foreign, _globex) = foreign_evidence(&app).await;

    let id = id_of(&start(&k, &format!("[[probe]] [[open:{foreign}]] Where do the robots charge?")).await);
    let run = finished(&k, &id).await;
    assert_eq!(run["status"], "completed", "{run}");

    // The entry the agent got: our /mcp over HTTP, this server's own address, a bearer header.
    let server = dumped_server(tmp.path());
    assert_eq!((server["type"].as_str(), server["name"].as_str()), (Some("http"), Some("mnote")), "{server}");
    assert_eq!(server["url"].as_str(), Some(format!("{}/mcp", app.base).as_str()), "{server}");
    assert_eq!(server["headers"][0]["name"], "Authorization", "{server}");
    let token = server["headers"][0]["value"].as_str().unwrap().strip_prefix("Bearer ").unwrap().to_string();
    assert!(token.starts_with("mnoterun_"), "a run token, not an API token");

    // While the run was live: the run's tool offer (no list_knowledge_bases), refused by the
    // API, and another tenant's evidence is nothing.
    let answer = run["answer"].as_str().unwrap();
    assert!(
        answer.starts_with(
            "Tools: evidence_search, evidence_read, evidence_open, evidence_outline. API: 401. Open: error not_found. "
        ),
        "{answer}"
    );
    assert!(!answer.contains("Berlin"), "another tenant's document reached the run: {answer}");
    assert!(answer.contains("The robots charge overnight in the north hall."), "{answer}");

    // The calls over MCP are the run's: journaled by the tool box with compact results.
    let ev = events(&k, &id).await;
    let started = of_kind(&ev, "tool.started", "tool");
    let names: Vec<&str> = started.iter().map(|e| e["payload"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["mnote.evidence.open", "mnote.evidence.search"], "{ev:?}");
    assert!(started.iter().all(|e| e["payload"]["callId"].as_str().unwrap().starts_with("mcp-")), "{ev:?}");
    assert_eq!(started[1]["payload"]["arguments"]["query"], "Where do the robots charge?");
    let completed = of_kind(&ev, "tool.completed", "tool");
    assert_eq!(completed.len(), 2, "{ev:?}");
    assert_eq!(
        (completed[0]["payload"]["ok"].as_bool(), completed[0]["payload"]["error"]["code"].as_str()),
        (Some(false), Some("not_found"))
    );
    assert_eq!(completed[1]["payload"]["ok"], true, "{}", completed[1]);
    let found: Vec<&str> =
        completed[1]["payload"]["evidenceIds"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert!(!found.is_empty() && !found.contains(&foreign.as_str()), "{}", completed[1]);
    assert!(completed[1]["payload"].get("content").is_none(), "compact: no raw results in the journal");

    // The receipt counts them and verifies the citations built from them.
    let receipt = &run["receipt"];
    let calls = receipt["toolCalls"].as_array().unwrap_or_else(|| panic!("{receipt}"));
    assert!(calls.iter().any(|c| c["name"] == "mnote.evidence.search" && c["ok"] == true), "{receipt}");
    assert!(receipt["evidenceIds"].as_array().unwrap().iter().any(|e| e == found[0]), "{receipt}");
    assert!(receipt["total"].as_u64().unwrap() >= 1, "{receipt}");
    assert_eq!(receipt["verified"], receipt["total"], "{receipt}");
    assert!(answer.contains(&format!("view?evidence={}", found[0])), "{answer}");

    // The token never shows: not in the run, not in its journal.
    assert!(!run.to_string().contains(&token) && !Value::Array(ev.clone()).to_string().contains(&token));
    // After the run: refused (401), for listing and for calls alike.
    let (st, body) = mcp_post(&app, &token, "tools/list", json!({})).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{body}");
    let (st, _) =
        mcp_post(&app, &token, "tools/call", json!({"name": "evidence_search", "arguments": {"query": "robots"}})).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    // Nothing of it is kept: the run's row holds no token hash any more.
    let mut tx = mnote::db::TenantTx::begin(&app.pool, k.tenant, mnote::db::Scope::System).await.unwrap();
    let kept: Option<String> =
        sqlx::query_scalar("select mcp_token_hash from ai_run where id = $1::uuid").bind(&id).fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(kept, None);
}

#[tokio::test]
async fn an_agent_without_http_mcp_gets_no_mcp_servers_and_keeps_the_extension() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("mcp.json");
    let dump_arg = dump.to_string_lossy().into_owned();
    // No --mcp-http: the agent does not advertise mcpCapabilities.http.
    let app = acp_app_with_args(tmp.path(), &["--mcp-dump", &dump_arg], |_| {}).await;
    let k = seeded(&app).await;
    let id = id_of(&start(&k, "Where do the robots charge?").await);
    let run = finished(&k, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let servers: Value = serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    assert_eq!(servers, json!([]), "no stdio bridge: nothing for MCP");
    let ev = events(&k, &id).await;
    let ours = of_kind(&ev, "tool.started", "tool");
    assert_eq!(ours.len(), 1, "{ev:?}");
    assert_eq!(ours[0]["payload"]["callId"], "acp-1", "through _mnote/tools/call");
    assert_eq!(run["receipt"]["verified"], run["receipt"]["total"], "{run}");
}

#[tokio::test]
async fn a_run_token_reaches_only_the_runs_tools_while_it_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("mcp.json");
    let dump_arg = dump.to_string_lossy().into_owned();
    let app = acp_app_with_args(tmp.path(), &["--mcp-http", "--mcp-dump", &dump_arg], |_| {}).await;
    let k = seeded(&app).await;
    // Another KB of the same user, outside the run's `kbIds` (issue 39 item 2).
    app.write_doc("zoo/zoo.md", "# Zoo\n\nThe zebra enclosure opens at nine.\n");
    let (st, g) = k
        .client
        .post_json("/api/grants", json!({"path": app.docs_path("zoo"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, zoo) = k.client.post_json("/api/kbs", json!({"name": "zoo"})).await;
    let zoo = zoo["id"].as_str().unwrap().to_string();
    let (st, r) = k.client.post_json(&format!("/api/kbs/{zoo}/sources"), json!({"path": app.docs_path("zoo")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    let (_, v) = k.client.post_json("/api/evidence/search", json!({"query": "zebra", "mode": "lexical", "kbIds": [zoo]})).await;
    let (zoo_ev, zoo_src) = (v["results"][0]["evidenceId"].clone(), v["results"][0]["source"]["sourceId"].clone());
    assert!(zoo_ev.is_string() && zoo_src.is_string(), "{v}");
    // [[hang]]: the agent answers one chunk (after its MCP search), then waits to be cancelled.
    let id = id_of(&start(&k, "[[hang]] Where do the robots charge?").await);
    let mut streaming = false;
    for _ in 0..300 {
        if !of_kind(&events(&k, &id).await, "message.delta", "reasonix").is_empty() {
            streaming = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(streaming, "the run never streamed");
    let server = dumped_server(tmp.path());
    let token = server["headers"][0]["value"].as_str().unwrap().strip_prefix("Bearer ").unwrap().to_string();

    // Live: the run's tools only, no resources, no list_knowledge_bases.
    let (st, list) = mcp_post(&app, &token, "tools/list", json!({})).await;
    assert_eq!(st, StatusCode::OK, "{list}");
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["evidence_search", "evidence_read", "evidence_open", "evidence_outline"], "{list}");
    let (st, r) = mcp_post(&app, &token, "resources/list", json!({})).await;
    assert_eq!((st, r["result"]["resources"].clone()), (StatusCode::OK, json!([])), "{r}");
    let (_, r) = mcp_post(&app, &token, "tools/call", json!({"name": "list_knowledge_bases", "arguments": {}})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    // A call made with it now is journaled into the run.
    let (_, r) =
        mcp_post(&app, &token, "tools/call", json!({"name": "evidence_search", "arguments": {"query": "battery level"}})).await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert!(r["result"]["structuredContent"]["results"][0]["citationUrl"].as_str().unwrap().starts_with(&app.base), "{r}");
    // The run's KBs bound every tool, by id too: the other KB's passage and document are not found.
    let robot = r["result"]["structuredContent"]["results"][0]["evidenceId"].clone();
    for (tool, args) in [
        ("evidence_read", json!({"evidenceId": zoo_ev})),
        ("evidence_open", json!({"evidenceId": zoo_ev})),
        ("evidence_outline", json!({"sourceId": zoo_src})),
        ("evidence_search", json!({"query": "zebra enclosure"})),
    ] {
        let (_, r) = mcp_post(&app, &token, "tools/call", json!({"name": tool, "arguments": args})).await;
        if tool == "evidence_search" {
            assert_eq!(r["result"]["structuredContent"]["results"], json!([]), "{r}");
        } else {
            let e = &r["result"]["structuredContent"]["error"]["code"];
            assert_eq!((&r["result"]["isError"], e), (&json!(true), &json!("not_found")), "{tool}: {r}");
        }
    }
    let (_, r) = mcp_post(&app, &token, "tools/call", json!({"name": "evidence_read", "arguments": {"evidenceId": robot}})).await;
    assert_ne!(r["result"]["isError"], true, "the run's own KB is read: {r}");
    // Elsewhere it is no credential at all.
    let mut api = Client::new(&app.base);
    api.bearer = Some(token.clone());
    assert_eq!(api.get("/api/kbs").await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(api.get(&format!("/api/page-ai/runs/{id}")).await.status(), StatusCode::UNAUTHORIZED);

    // The team's capability switches apply to the run's token at once, as to the run.
    let (st, v) = k.client.send_json("PATCH", "/api/page-ai/capabilities", json!({"evidence": false})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (_, list) = mcp_post(&app, &token, "tools/list", json!({})).await;
    assert_eq!(list["result"]["tools"], json!([]), "{list}");
    let (_, r) = mcp_post(&app, &token, "tools/call", json!({"name": "evidence_search", "arguments": {"query": "robots"}})).await;
    assert_eq!(
        (r["result"]["isError"].as_bool(), r["result"]["structuredContent"]["error"]["code"].as_str()),
        (Some(true), Some("unknown_tool")),
        "{r}"
    );

    let (st, c) = k.client.post_json(&format!("/api/page-ai/runs/{id}/cancel"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{c}");
    let run = finished(&k, &id).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    let ev = events(&k, &id).await;
    let queries: Vec<&str> =
        of_kind(&ev, "tool.started", "tool").iter().filter_map(|e| e["payload"]["arguments"]["query"].as_str()).collect();
    assert_eq!(queries, vec!["Where do the robots charge?", "battery level", "zebra enclosure", "robots"], "{ev:?}");
    let last = of_kind(&ev, "tool.completed", "tool").last().map(|e| e["payload"]["error"]["code"].clone());
    assert_eq!(last, Some(json!("unknown_tool")), "the refused call is the run's too: {ev:?}");
    assert!(run["receipt"]["toolCalls"].as_array().unwrap().len() >= 2, "{run}");
    // Cancelled is an end too: refused.
    let (st, _) = mcp_post(&app, &token, "tools/list", json!({})).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_agent_whose_session_new_needs_authentication_fails_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let app = acp_app_with_args(tmp.path(), &["--fail-auth"], |_| {}).await;
    let k = seeded(&app).await;
    let run = finished(&k, &id_of(&start(&k, "Where do the robots charge?").await)).await;
    assert_eq!((run["status"].as_str(), run["error"]["code"].as_str()), (Some("failed"), Some("acp_failed")), "{run}");
    let message = run["error"]["message"].as_str().unwrap();
    assert!(message.contains("session/new") && message.contains("Authentication required"), "{message}");
    assert!(is_gone(agent_pid(&tmp.path().join("agent.pid")).await).await, "the agent outlived its run");
}

#[tokio::test]
async fn an_agent_that_exits_during_initialize_fails_the_run_with_its_scrubbed_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let app = acp_app_with_args(tmp.path(), &["--die-on-init"], |_| {}).await;
    let k = seeded(&app).await;
    let run = finished(&k, &id_of(&start(&k, "Where do the robots charge?").await)).await;
    assert_eq!((run["status"].as_str(), run["error"]["code"].as_str()), (Some("failed"), Some("acp_failed")), "{run}");
    let message = run["error"]["message"].as_str().unwrap();
    assert!(message.contains("exit status: 1"), "{message}");
    assert!(message.contains("cannot reach the model provider with key [redacted]: connection refused"), "{message}");
    assert!(!message.contains("sk-live"), "{message}");
}

/// The program that runs Node for the third-party agent: `$MNOTE_NODE22` (installed by `./dev`)
/// when anyone may run it (the agent may run as another user), else `node` from PATH.
fn node() -> String {
    use std::os::unix::fs::PermissionsExt;
    let usable = |p: &Path| {
        p.ancestors().all(|a| a.as_os_str().is_empty() || std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
    };
    match std::env::var_os("MNOTE_NODE22").map(std::path::PathBuf::from) {
        Some(p) if p.is_file() && usable(&p) => p.to_string_lossy().into_owned(),
        _ => "node".into(),
    }
}

#[tokio::test]
async fn a_third_party_acp_agent_completes_a_run_and_is_refused_permission() {
    // The example agent of the pinned npm @agentclientprotocol/sdk: it streams two chunks,
    // reports a read tool call, then asks permission for an edit, and stops there when the
    // permission request is cancelled (as MNote answers every one).
    let agent = third_party_acp_agent();
    // Its package and the one it imports, beside it in the copy's node_modules (confined
    // agents read only what they are given).
    let modules = agent.ancestors().find(|a| a.ends_with("node_modules")).unwrap().to_path_buf();
    let agent = agent.to_string_lossy().into_owned();
    let app = spawn_app_with(|c| {
        c.agents.acp_command = Some(vec![node(), agent]);
        c.agents.acp_read_paths = vec![modules];
    })
    .await;
    let k = seeded(&app).await;
    let id = id_of(&start(&k, "Improve the project configuration.").await);
    let run = finished(&k, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["provider"], "acp");
    let session = run["providerRunId"].as_str().unwrap_or_else(|| panic!("{run}"));
    assert!(session.len() == 32 && session.chars().all(|c| c.is_ascii_hexdigit()), "the SDK's session id: {run}");
    let answer = run["answer"].as_str().unwrap();
    assert_eq!(
        answer,
        "I'll help you with that. Let me start by reading some files to understand the current situation. \
         Now I understand the project structure. I need to make some changes to improve it.",
        "{run}"
    );

    let ev = events(&k, &id).await;
    let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(!of_kind(&ev, "message.delta", "reasonix").is_empty(), "{kinds:?}");
    let started: Vec<&str> =
        of_kind(&ev, "tool.started", "reasonix").iter().map(|e| e["payload"]["callId"].as_str().unwrap()).collect();
    assert_eq!(started, vec!["call_1", "call_2"], "{kinds:?}");
    let completed = of_kind(&ev, "tool.completed", "reasonix");
    assert_eq!(completed.len(), 1, "only the read completed: the edit was never permitted: {kinds:?}");
    assert_eq!(
        (completed[0]["payload"]["callId"].as_str(), completed[0]["payload"]["ok"].as_bool()),
        (Some("call_1"), Some(true))
    );
    assert_eq!(ev.last().unwrap()["kind"], "run.completed", "{kinds:?}");
}

#[tokio::test]
async fn a_run_whose_worker_is_lost_takes_its_token_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("mcp.json");
    let dump_arg = dump.to_string_lossy().into_owned();
    let app = acp_app_with_args(tmp.path(), &["--mcp-http", "--mcp-dump", &dump_arg], |_| {}).await;
    let k = seeded(&app).await;
    let id = id_of(&start(&k, "[[hang]] Where do the robots charge?").await);
    let mut live = None;
    for _ in 0..300 {
        if dump.exists() && !of_kind(&events(&k, &id).await, "message.delta", "reasonix").is_empty() {
            live = Some(dumped_server(tmp.path()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let server = live.expect("the run never streamed");
    let token = server["headers"][0]["value"].as_str().unwrap().strip_prefix("Bearer ").unwrap().to_string();
    assert_eq!(mcp_post(&app, &token, "tools/list", json!({})).await.0, StatusCode::OK);

    // The worker's lease runs out (a crashed replica): the reconciler interrupts the run.
    let mut tx = mnote::db::TenantTx::begin(&app.pool, k.tenant, mnote::db::Scope::System).await.unwrap();
    sqlx::query("update ai_run set lease_expires_at = now() - interval '1 minute', lease_owner = 'gone' where id = $1::uuid")
        .bind(&id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let interrupted = mnote::journal::reconcile::once(&app.pool).await.unwrap();
    assert_eq!(interrupted.iter().map(|u| u.to_string()).collect::<Vec<_>>(), vec![id.clone()]);
    let (st, body) = mcp_post(&app, &token, "tools/list", json!({})).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{body}");
}
