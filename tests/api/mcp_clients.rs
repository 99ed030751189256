//! `/mcp` as third-party MCP clients see it (issue 27): the OAuth discovery paths they probe
//! after a `401` answer a JSON `404` at once, the `401` says how to get a token; the MCP
//! Inspector's command line and `mcp-remote` (the bridge of the Claude Desktop snippet in
//! docs/MCP.md) with a wrong token end with that message, with a good one list the tools;
//! and the MCP project's own conformance suite passes its scenarios that apply, through a
//! token-adding proxy (it has no header option). The clients are the pinned ones of
//! `tests/clients`, run with Node 22 (see `clients.rs`).

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{Request, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::{clients, helpers::*};

/// What every refusal and every discovery path says (a stable part of the message).
const HOW: &str = "Settings → API tokens";

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#;

#[tokio::test]
async fn oauth_discovery_paths_answer_a_json_404_and_the_401_says_how_to_get_a_token() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let expired = app.token(s.tenant_id, s.user_id).await;
    let mut tx = mnote::db::TenantTx::begin(&app.pool, s.tenant_id, mnote::db::Scope::User(s.user_id)).await.unwrap();
    sqlx::query("update api_token set expires_at = now() - interval '1 second' where token_hash = $1")
        .bind(mnote::auth::tokens::hash(&expired))
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    mnote::platform::http::install_tls_provider();
    let http = reqwest::Client::new();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-authorization-server/mcp",
        "/.well-known/openid-configuration",
        "/.well-known/openid-configuration/mcp",
        "/mcp/.well-known/openid-configuration",
        "/mcp/.well-known/oauth-authorization-server",
    ] {
        let r = http.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"), "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "not_found", "{path}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(HOW), "{path}: {v}");
    }
    // Dynamic client registration: the same 404 (no CSRF refusal, no HTML page).
    let r = http
        .post(format!("{}/register", app.base))
        .json(&json!({"client_name": "x", "redirect_uris": ["http://localhost:1/cb"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains(HOW), "{v}");

    // The 401 of /mcp: no token, a wrong one.
    let post = |token: Option<&str>| {
        let mut r = http
            .post(format!("{}/mcp", app.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INIT);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let invalid = "Bearer realm=\"mnote\", error=\"invalid_token\", error_description=";
    for (token, code, says, challenge) in [
        (None, "unauthorized", "an API token is required", "Bearer realm=\"mnote\", error_description="),
        (Some("mnote_wrong"), "unauthorized", "not valid here", invalid),
        (Some(expired.as_str()), "token_expired", "this API token has expired", invalid),
    ] {
        let r = post(token).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let www = r.headers()["www-authenticate"].to_str().unwrap().to_string();
        assert!(www.starts_with(challenge) && www.contains("Settings -> API tokens"), "{www}");
        assert!(!www.contains("resource_metadata"), "no OAuth metadata is advertised: {www}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], code, "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(says) && message.contains(HOW) && message.contains("Authorization: Bearer"), "{message}");
    }
}

/// A bridge that adds `Authorization: Bearer <token>` to every request and forwards it to the
/// server, for clients without a header option. The `Host` the client sends for the proxy
/// becomes the server's (the server's Host allow-list knows its own address only); any other
/// `Host` is passed on as it came, so a DNS-rebinding probe still reaches the server as such.
struct Proxy {
    server: String,
    server_authority: HeaderValue,
    own: Vec<String>,
    token: String,
    http: reqwest::Client,
}

async fn token_proxy(server: &str, token: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    mnote::platform::http::install_tls_provider();
    let proxy = Arc::new(Proxy {
        server: server.to_string(),
        server_authority: HeaderValue::from_str(server.trim_start_matches("http://")).unwrap(),
        own: vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        token: token.to_string(),
        http: reqwest::Client::new(),
    });
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://127.0.0.1:{port}")
}

async fn forward(State(p): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let mut headers = parts.headers;
    for h in [header::CONNECTION, header::CONTENT_LENGTH, header::TRANSFER_ENCODING] {
        headers.remove(h);
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    if p.own.iter().any(|o| o == host) {
        headers.insert(header::HOST, p.server_authority.clone());
    }
    headers.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {}", p.token)).unwrap());
    let url = format!("{}{}", p.server, parts.uri.path_and_query().map_or("/", |q| q.as_str()));
    let r = match p.http.request(parts.method, url).headers(headers).body(body).send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut out = Response::builder().status(r.status());
    for (k, v) in r.headers() {
        if k != header::CONNECTION && k != header::TRANSFER_ENCODING && k != header::CONTENT_LENGTH {
            out = out.header(k, v);
        }
    }
    out.body(axum::body::Body::from_stream(r.bytes_stream())).unwrap()
}

/// `Passed: N/M` of the conformance suite's summary (it exits 0 even when checks fail).
fn passed(stdout: &str) -> Option<(u32, u32)> {
    stdout.lines().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("Passed:")?.trim();
        let (n, m) = rest.split_once('/')?;
        let digits = |t: &str| t.trim().chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok();
        Some((digits(n)?, digits(m)?))
    })
}

/// The MCP project's conformance suite (`@modelcontextprotocol/conformance`, pinned) against
/// `/mcp`, for the server scenarios that apply to a tools-and-resources server: initialize,
/// ping, tools-list, resources-list and DNS-rebinding protection. The others need features
/// this server does not offer (prompts, completion, logging, sampling, elicitation, the
/// suite's own test tools and resources).
#[tokio::test]
async fn the_mcp_conformance_suite_passes_the_scenarios_that_apply() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let (st, kb) = app.api(s.tenant_id, s.user_id).await.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    assert_eq!(st, StatusCode::CREATED, "{kb}");
    let token = app.token(s.tenant_id, s.user_id).await;
    let proxy = token_proxy(&app.base, &token).await;
    let conformance = clients::clients_dir().join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(conformance.is_file(), "{} is missing: run the tests through `./dev test`", conformance.display());
    let results = tempfile::tempdir().unwrap();
    let url = format!("{proxy}/mcp");
    let mut seen = Vec::new();
    for scenario in ["server-initialize", "ping", "tools-list", "resources-list", "dns-rebinding-protection"] {
        let out = clients::node_in(
            Some(results.path()),
            &[
                conformance.as_os_str(),
                "server".as_ref(),
                "--url".as_ref(),
                url.as_ref(),
                "--scenario".as_ref(),
                scenario.as_ref(),
            ],
            &[],
            Duration::from_secs(180),
        )
        .await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (n, m) = passed(&stdout).unwrap_or_else(|| panic!("{scenario}: no `Passed: N/M` line\n{}", clients::text(&out)));
        println!("conformance {scenario}: Passed: {n}/{m}");
        assert!(m > 0 && n == m, "{scenario}: Passed: {n}/{m}\n{}", clients::text(&out));
        seen.push((scenario, n, m));
    }
    println!("conformance: {seen:?}");
}

/// The MCP Inspector's command-line mode (pinned `@modelcontextprotocol/inspector`) with a
/// wrong token: in its non-interactive mode (`--stored-auth-only`, what it tells CI to use) it
/// ends with our `401` message; interactive (under a terminal) it tries OAuth, finds no
/// metadata, is refused dynamic client registration with our `404` message and ends there
/// (before: a CSRF error page). With a good token it lists the tools.
#[tokio::test]
async fn the_mcp_inspector_cli_with_a_wrong_token_ends_with_how_to_get_one() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let token = app.token(s.tenant_id, s.user_id).await;
    let inspector = clients::bin("mcp-inspector");
    let url = format!("{}/mcp", app.base);
    let home = tempfile::tempdir().unwrap();
    let home = home.path().to_str().unwrap();
    let envs = [("HOME", home), ("MCP_INSPECTOR_SECRET_STORE", "memory")];
    let args = |token: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = vec![
            inspector.to_str().unwrap().into(),
            "--cli".into(),
            url.clone(),
            "--transport".into(),
            "http".into(),
            "--header".into(),
            format!("Authorization: Bearer {token}"),
            "--method".into(),
            "tools/list".into(),
        ];
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let run = |a: Vec<String>| async move {
        let a: Vec<&std::ffi::OsStr> = a.iter().map(|x| x.as_ref()).collect();
        clients::node(&a, &envs, Duration::from_secs(120)).await
    };

    let out = run(args("mnote_wrong", &["--stored-auth-only"])).await;
    let all = clients::text(&out);
    println!("inspector --stored-auth-only, wrong token:\n{all}");
    assert!(!out.status.success(), "{all}");
    assert!(all.contains(HOW) && all.contains("not valid here"), "the failure does not say how to get a token:\n{all}");

    // Interactive: under a terminal (`script` from util-linux gives it one).
    let script = ["/usr/bin/script", "/bin/script"].into_iter().find(|p| std::path::Path::new(p).exists());
    let script = script.expect("`script` (util-linux) is missing: the interactive Inspector run needs a terminal");
    let node = clients::node22();
    let command = std::iter::once(node.to_str().unwrap().to_string())
        .chain(args("mnote_wrong", &[]))
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = tokio::process::Command::new(script);
    cmd.args(["-qec", &command, "/dev/null"]).stdin(std::process::Stdio::null()).kill_on_drop(true);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.env("BROWSER", "/bin/false");
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the interactive Inspector hung (an OAuth login waiting for a browser?)")
        .unwrap();
    let all = clients::text(&out);
    println!("inspector interactive, wrong token:\n{all}");
    assert!(!out.status.success(), "{all}");
    assert!(all.contains(HOW), "the interactive failure does not say how to get a token:\n{all}");

    let out = run(args(&token, &[])).await;
    assert!(out.status.success(), "{}", clients::text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", clients::text(&out)));
    let names: Vec<&str> = v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"evidence_search"), "{names:?}");
}

/// One `mcp-remote` session over its standard input and output (as Claude Desktop drives
/// it): the JSON-RPC messages in, what came out (lines of JSON) and its stderr.
async fn mcp_remote(url: &str, auth: &str, home: &str, messages: &[Value], replies: usize) -> (Vec<Value>, String) {
    let node = clients::node22();
    let bin = clients::bin("mcp-remote");
    let mut child = tokio::process::Command::new(&node)
        .arg(&bin)
        .arg(url)
        .arg("--header")
        // The snippet's form: mcp-remote expands `${MNOTE_AUTH}` from its environment.
        .arg("Authorization:${MNOTE_AUTH}")
        .env("MNOTE_AUTH", auth)
        .env("HOME", home)
        .env("MCP_REMOTE_CONFIG_DIR", home)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run mcp-remote");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let err = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let mut got = Vec::new();
    for m in messages {
        stdin.write_all(format!("{m}\n").as_bytes()).await.unwrap();
    }
    stdin.flush().await.unwrap();
    // Hang guard only: a wrong token makes mcp-remote exit (stdout closes).
    let read = async {
        while got.len() < replies {
            match stdout.next_line().await {
                Ok(Some(l)) if !l.trim().is_empty() => got.push(serde_json::from_str(&l).unwrap_or(json!({"raw": l}))),
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(90), read).await;
    drop(stdin);
    let _ = child.start_kill();
    let _ = child.wait().await;
    let err = tokio::time::timeout(Duration::from_secs(10), err).await.ok().and_then(Result::ok).unwrap_or_default();
    (got, err)
}

/// The Claude Desktop snippet of docs/MCP.md: `mcp-remote URL --header Authorization:${MNOTE_AUTH}`
/// (pinned `mcp-remote`), driven headless over its standard input: with the token it
/// initializes and lists the tools; with a wrong one it ends with our message instead of
/// starting an OAuth login in a browser.
#[tokio::test]
async fn mcp_remote_with_the_documented_header_lists_the_tools_and_a_wrong_token_ends_with_how_to_get_one() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let token = app.token(s.tenant_id, s.user_id).await;
    let url = format!("{}/mcp", app.base);
    let home = tempfile::tempdir().unwrap();
    let home = home.path().to_str().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (got, err) = mcp_remote(&url, &format!("Bearer {token}"), home, &[init.clone(), initialized, list], 2).await;
    assert_eq!(got.len(), 2, "stdout {got:?}\nstderr {err}");
    assert_eq!(got[0]["result"]["serverInfo"]["name"], "mnote", "{got:?}");
    let names: Vec<&str> = got[1]["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"evidence_search"), "{names:?}");

    let (got, err) = mcp_remote(&url, "Bearer mnote_wrong", home, &[init], 1).await;
    println!("mcp-remote, wrong token: stdout {got:?}\nstderr {err}");
    assert!(got.iter().all(|m| m.get("result").is_none()), "{got:?}");
    let said = format!("{got:?}\n{err}");
    assert!(said.contains(HOW), "mcp-remote did not pass on how to get a token:\n{said}");
    assert!(!said.contains("Please authorize this client by visiting"), "an OAuth login was started:\n{said}");
}
