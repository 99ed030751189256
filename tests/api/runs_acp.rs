//! `reasonix` runs on the `acp` runtime through the real HTTP server, against
//! `scripts/acp_agent.py` (a small stdlib ACP agent: plan, its own tool call around our
//! `mnote.evidence.search`, a cited answer; `[[slow]]`, `[[hang]]`, `[[crash]]`, `[[write]]`).

use std::{path::Path, time::Duration};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{fixtures::*, helpers::*};

const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\nThe robots charge overnight in the north hall. Each robot reports its battery level to the fleet controller every minute.\n";

fn agent_script() -> String {
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
        tweak(c);
    })
    .await
}

/// A tenant with the handbook indexed in a KB.
async fn seeded(app: &TestApp) -> Kb {
    let k = kb_with_grant(app).await;
    app.write_doc("team/notes/handbook.md", HANDBOOK);
    register(&k, app, "team/notes").await;
    app.run_jobs().await;
    k
}

async fn start(k: &Kb, prompt: &str) -> Value {
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

fn id_of(run: &Value) -> String {
    run["hostRunId"].as_str().unwrap_or_else(|| panic!("{run}")).to_string()
}

/// Poll the run until it is completed, failed or cancelled.
async fn finished(k: &Kb, id: &str) -> Value {
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
        tweak(c);
    })
    .await
}

/// The JSON report a hostile directive answers with.
async fn report(k: &Kb, directive: &str) -> Value {
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
