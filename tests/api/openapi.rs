//! The OpenAPI document (`GET /api/openapi.json`, issue 28 item 4): it is public, it is the
//! checked-in `docs/openapi.json`, and a schema-driven fuzzer (schemathesis, pinned and
//! installed by `./dev test`, `$MNOTE_SCHEMATHESIS`) run against a real test server with it
//! finds no server error, no undocumented status and no answer that breaks its schema.

use std::{path::PathBuf, process::Stdio, time::Duration};

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
/// holding an indexed document. Only that throwaway team's data can change.
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
    let kb = app.indexed_folder_kb(&api, "fuzz", json!({"name": "Fuzzed"})).await;
    let (st_code, v) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(st_code, StatusCode::OK);
    assert_eq!(v["items"][0]["status"], "indexed", "{v}");
    let token = app.token(s.tenant_id, s.user_id).await;
    let doc = checked_in();
    let operations: usize = doc["paths"].as_object().unwrap().values().map(|o| o.as_object().unwrap().len()).sum();

    let report = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(&st);
    cmd.arg("run")
        .arg(format!("{}/api/openapi.json", app.base))
        .args(["--url", &app.base])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--max-examples", "5", "--seed", "28", "--workers", "2", "--request-timeout", "30"])
        .args(["--generation-database", "none", "--no-color", "--output-truncate", "false"])
        .arg("--report-dir")
        .arg(report.path())
        .current_dir(report.path())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
        .await
        .expect("schemathesis ran over 10 minutes")
        .expect("schemathesis starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tested = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Tested: "))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no `Tested:` count in schemathesis' report:\n{stdout}\n{stderr}"));
    assert!(out.status.success(), "schemathesis found failures (exit {:?}):\n{stdout}\n{stderr}", out.status.code());
    assert_eq!(tested, operations, "schemathesis tested {tested} of the {operations} operations:\n{stdout}");
}
