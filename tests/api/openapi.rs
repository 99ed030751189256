//! The OpenAPI document (`GET /api/openapi.json`, issue 28 item 4): it is public, it is the
//! checked-in `docs/openapi.json`, and a schema-driven fuzzer (schemathesis, pinned and
//! installed by `./dev test`, `$MNOTE_SCHEMATHESIS`) run against a real test server with it
//! finds no server error, no undocumented status and no answer that breaks its schema.

use std::{collections::BTreeSet, path::PathBuf, process::Stdio, time::Duration};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

fn checked_in() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("docs/openapi.json")).expect("docs/openapi.json is JSON")
}

#[tokio::test]
async fn the_served_document_is_public_and_the_checked_in_one() {
    let app = spawn_app().await;
    let r = app.client().get("/api/openapi.json").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    let served: Value = r.json().await.unwrap();
    assert_eq!(served["openapi"], "3.1.0");
    assert!(
        served == checked_in(),
        "docs/openapi.json differs from the served document: run `MNOTE_UPDATE_OPENAPI=1 ./dev test --lib openapi`"
    );
    // Every operation but the document itself needs a credential, and says which errors.
    for (path, ops) in served["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            assert!(responses.keys().any(|s| s.starts_with('2')), "{method} {path} has no success answer");
            if path != "/api/openapi.json" {
                assert!(responses.contains_key("401") && responses.contains_key("500"), "{method} {path}: {responses:?}");
            }
        }
    }
}

/// `st run` against the document of a running test server, as an owner of a team with a KB
/// holding an indexed document and a run of the assistant; the ids of these are given to the
/// operations that take them (else every path id is a random UUID, answered `404`). Only that
/// throwaway team's data can change.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_schema_driven_fuzzer_finds_no_server_error_and_no_schema_mismatch() {
    let st = std::env::var_os("MNOTE_SCHEMATHESIS")
        .map(PathBuf::from)
        .expect("MNOTE_SCHEMATHESIS is unset: run the tests with ./dev test (it installs schemathesis)");
    assert!(st.exists(), "{} is missing: ./dev test installs it", st.display());
    let app = spawn_app().await;
    let s = app.bootstrap("fuzz", "owner@fuzz.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("fuzz/notes.md", "# Evidence\n\nThe fuzzer searches this indexed paragraph about evidence.\n");
    app.write_doc("fuzz/other.md", "# Other\n\nA second document, which the fuzzer may remove.\n");
    let kb = app.indexed_folder_kb(&api, "fuzz", json!({"name": "Fuzzed"})).await;
    let (code, sources) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(code, StatusCode::OK);
    let source_of = |name: &str| {
        let s =
            sources["items"].as_array().unwrap().iter().find(|s| s["resourcePath"].as_str().unwrap().ends_with(name)).unwrap();
        assert_eq!(s["status"], "indexed", "{sources}");
        s["id"].as_str().unwrap().to_string()
    };
    let (source, victim_source) = (source_of("notes.md"), source_of("other.md"));
    // `DELETE /api/kbs/{id}` and `DELETE /api/sources/{id}` get these, so that the other
    // operations keep a live KB and source.
    let (_, victim_kb) = api.post_json("/api/kbs", json!({"name": "Victim"})).await;
    let victim_kb = victim_kb["id"].as_str().unwrap().to_string();
    let (_, grants) = api.get_json("/api/grants").await;
    let grant = grants["items"][0]["id"].as_str().unwrap().to_string();
    let session = "fuzz-session";
    let (code, run) = api
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "fuzz-1", "sessionId": session, "agentId": "hermes", "prompt": "What is evidence?", "contextRefs": {"kbIds": [kb]}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{run}");
    let run = run["hostRunId"].as_str().unwrap().to_string();
    let token = app.token(s.tenant_id, s.user_id).await;

    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
[[operations]]
include-path-regex = "^/api/kbs/\\{{id\\}}$"
parameters = {{ "path.id" = "{victim_kb}" }}

[[operations]]
include-path-regex = "^/api/kbs/\\{{id\\}}/"
parameters = {{ "path.id" = "{kb}" }}

[[operations]]
include-path-regex = "^/api/sources/\\{{id\\}}$"
parameters = {{ "path.id" = "{victim_source}" }}

[[operations]]
include-path-regex = "^/api/sources/\\{{id\\}}/"
parameters = {{ "path.id" = "{source}" }}

[[operations]]
include-path-regex = "^/api/grants/\\{{id\\}}"
parameters = {{ "path.id" = "{grant}" }}

[[operations]]
include-path-regex = "^/api/page-ai/runs/\\{{id\\}}"
parameters = {{ "path.id" = "{run}" }}

[[operations]]
include-path-regex = "^/api/page-ai/sessions/"
parameters = {{ "path.session" = "{session}" }}

[[operations]]
include-path-regex = "^/api/page-ai/conversations/\\{{id\\}}"
parameters = {{ "path.id" = "{session}" }}

[[operations]]
include-path-regex = "^/api/page-ai/agents/\\{{agent\\}}"
parameters = {{ "path.agent" = "hermes" }}
"#
    );
    let config_file = dir.path().join("schemathesis.toml");
    std::fs::write(&config_file, config).unwrap();
    let junit = dir.path().join("junit.xml");
    // A deeper run by hand: MNOTE_FUZZ_EXAMPLES=500 MNOTE_FUZZ_SEED=7 ./dev test --test api a_schema_driven
    let examples = std::env::var("MNOTE_FUZZ_EXAMPLES").unwrap_or_else(|_| "50".into());
    let seed = std::env::var("MNOTE_FUZZ_SEED").unwrap_or_else(|_| "28".into());
    // One worker: with two, schemathesis's threads parse hypothesis's lambdas concurrently and
    // CPython 3.11.7 (this machine's) may fail with "SystemError: AST constructor recursion
    // depth mismatch" (CPython gh-106905), a crash of the fuzzer that says nothing of the server.
    let mut cmd = tokio::process::Command::new(&st);
    cmd.arg("--config-file")
        .arg(&config_file)
        .arg("run")
        .arg(format!("{}/api/openapi.json", app.base))
        .args(["--url", &app.base])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--max-examples", &examples, "--seed", &seed, "--workers", "1", "--request-timeout", "30"])
        .args(["--generation-database", "none", "--no-color", "--output-truncate", "false"])
        .args(["--report", "junit", "--report-junit-path"])
        .arg(&junit)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
        .await
        .expect("schemathesis ran over 10 minutes")
        .expect("schemathesis starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "schemathesis found failures (exit {:?}):\n{stdout}\n{stderr}", out.status.code());
    // Which operations it really tested: the report's test cases are named `METHOD /path`.
    let report = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("no junit report ({e}):\n{stdout}\n{stderr}"));
    let tested: BTreeSet<String> = regex::Regex::new(r#"<testcase[^>]* name="([A-Z]+ /api/[^"]*)""#)
        .unwrap()
        .captures_iter(&report)
        .map(|c| c[1].replace("&#123;", "{").replace("&#125;", "}"))
        .collect();
    let documented: BTreeSet<String> = checked_in()["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(p, ops)| ops.as_object().unwrap().keys().map(move |m| format!("{} {p}", m.to_uppercase())))
        .collect();
    // schemathesis does not test the operation that serves the document it loaded.
    let missing: Vec<_> = documented.difference(&tested).filter(|o| *o != "GET /api/openapi.json").collect();
    assert!(missing.is_empty(), "schemathesis did not test {missing:?}:\n{stdout}");
    assert!(tested.len() >= documented.len() - 1, "{tested:?}");
    // Its warnings and counts, for the log (`--nocapture`).
    eprintln!("{}", stdout.find("WARNINGS").or(stdout.find("SUMMARY")).map_or(&stdout[..], |i| &stdout[i..]));
}

/// Found by the fuzzer: a knowledge-RAG query naming a KB the caller cannot see answers `404`,
/// which the document did not list.
#[tokio::test]
async fn a_rag_query_of_an_unknown_kb_answers_a_documented_404() {
    let app = spawn_app().await;
    let s = app.bootstrap("rag404", "owner@rag404.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let (code, v) =
        api.post_json("/api/knowledge-rag/query", json!({"kbIds": [uuid::Uuid::new_v4()], "query": "what is evidence"})).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(error_code(&v), "not_found");
    let documented = &checked_in()["paths"]["/api/knowledge-rag/query"]["post"]["responses"];
    assert!(documented.get("404").is_some(), "{documented}");
}

/// Issue 39 item 4: every query-string parameter of every documented operation, given a NUL
/// (`%00`), answers `422 invalid_input`: never a `200` that carried the NUL on, never a `500`.
/// As an owner of a team with an indexed KB and a run, so path ids are real; the other
/// required query parameters get a plain value.
#[tokio::test]
async fn a_nul_in_any_documented_query_parameter_is_invalid_input() {
    let app = spawn_app().await;
    let s = app.bootstrap("nulq", "owner@nulq.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("nulq/notes.md", "# Evidence\n\nAn indexed paragraph about evidence.\n");
    let kb = app.indexed_folder_kb(&api, "nulq", json!({"name": "NUL"})).await;
    let (_, sources) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;
    let source = sources["items"][0]["id"].as_str().unwrap().to_string();
    let session = "nul-session";
    let (code, run) = api
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "nul-1", "sessionId": session, "agentId": "hermes", "prompt": "What is evidence?", "contextRefs": {"kbIds": [kb]}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{run}");
    let run = run["hostRunId"].as_str().unwrap().to_string();
    let (_, grants) = api.get_json("/api/grants").await;
    let grant = grants["items"][0]["id"].as_str().unwrap().to_string();
    let user = s.user_id.to_string();
    // The real id for a path parameter, by the path it is in.
    let fill = |path: &str| -> String {
        let id = if path.starts_with("/api/kbs/") {
            kb.as_str()
        } else if path.starts_with("/api/sources/") {
            source.as_str()
        } else if path.starts_with("/api/page-ai/runs/") {
            run.as_str()
        } else if path.starts_with("/api/grants/") {
            grant.as_str()
        } else if path.starts_with("/api/page-ai/conversations/") {
            session
        } else {
            user.as_str()
        };
        path.replace("{id}", id).replace("{user}", &user).replace("{session}", session).replace("{agent}", "hermes")
    };

    let served: Value = app.client().get("/api/openapi.json").await.json().await.unwrap();
    let mut tried = Vec::new();
    let mut failures = Vec::new();
    for (path, ops) in served["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            let query: Vec<&Value> = params.iter().filter(|p| p["in"] == "query").collect();
            for p in &query {
                let name = p["name"].as_str().unwrap();
                let others = query
                    .iter()
                    .filter(|o| o["name"] != name && o["required"] == true)
                    .map(|o| format!("&{}=evidence", o["name"].as_str().unwrap()));
                let url = format!("{}?{name}=a%00b{}", fill(path), others.collect::<String>());
                let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let (st, v) = json_of(api.req(m, &url).send().await.unwrap()).await;
                tried.push(format!("{} {url}", method.to_uppercase()));
                if (st, error_code(&v)) != (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input") {
                    failures.push(format!("{} {url}: {st} {v}", method.to_uppercase()));
                }
            }
        }
    }
    // The walk reached the operations with query parameters (the document lists them).
    assert!(tried.iter().any(|t| t.starts_with("GET /api/search/documents?q=")), "{tried:?}");
    assert!(tried.len() >= 5, "{tried:?}");
    assert!(
        failures.is_empty(),
        "{} of {} did not answer 422 invalid_input:\n{}",
        failures.len(),
        tried.len(),
        failures.join("\n")
    );
}
