//! Issue 41, "answerability, typed and visible": the built-in agent (no model configured)
//! judges from its passages whether they answer the question — the receipt's `verdict` — and
//! the run's result block says so: `answered` with the green check, `partial` saying what is
//! missing, `not_found` saying nothing in the knowledge bases answers it, the closest passages
//! folded below as no answer.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

const THREADS: &str = "# Concurrency notes\n\n## Scoped threads\n\nScoped threads let a closure borrow data from the parent stack frame.\n\n\
Channels send messages between threads.\n";
const FAA: &str = "# Contacts\n\nThe call center of the regional office answers on weekdays.\n\n\
Flight service stations can be reached by phone at 1-800-992-7433.\n";

struct Team {
    app: TestApp,
    client: Client,
    kb: String,
}

async fn team() -> Team {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("acme/threads.md", THREADS);
    app.write_doc("acme/contacts.md", FAA);
    let (st, g) = client
        .post_json("/api/grants", json!({"path": app.docs_path("acme"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, kb) = client.post_json("/api/kbs", json!({"name": "Notes"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = client.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("acme")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    Team { app, client, kb }
}

/// A built-in run over the team's KB, waited for (a bounded number of polls, not a clock).
async fn ask(t: &Team, prompt: &str) -> Value {
    let body = json!({
        "requestId": format!("req-{}", Uuid::new_v4().simple()),
        "sessionId": "session-1",
        "agentId": "hermes",
        "prompt": prompt,
        "contextRefs": {"kbIds": [t.kb]},
    });
    let (st, run) = t.client.post_json("/api/page-ai/runs", body).await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    assert_eq!(run["provider"], "builtin", "{run}");
    let id = run["hostRunId"].as_str().unwrap().to_string();
    for _ in 0..600 {
        let (_, r) = t.client.get_json(&format!("/api/page-ai/runs/{id}")).await;
        if matches!(r["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            assert_eq!(r["status"], "completed", "{r}");
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {id} did not end");
}

async fn result_block(t: &Team, run: &Value) -> String {
    let mut browser = t.app.login("owner@acme.test").await;
    let (st, page) = browser.page(&format!("/ai/runs/{}/result", run["hostRunId"].as_str().unwrap())).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    page
}

#[tokio::test]
async fn the_receipt_says_whether_the_documents_answer_and_the_page_shows_it() {
    let t = team().await;

    // Answerable: answered, every quote found, the green check.
    let run = ask(&t, "How do scoped threads borrow data from the parent stack?").await;
    let r = &run["receipt"];
    assert_eq!((r["verdict"].as_str(), r["verdictBasis"].as_str()), (Some("answered"), Some("evidence")), "{r}");
    assert_eq!(r["verdictReason"], "answer_in_passages", "{r}");
    let n = r["total"].as_u64().unwrap();
    assert!(n >= 1 && r["verified"] == n, "{r}");
    assert!(r["checked"].as_str().unwrap().starts_with(&format!("{n} of {n} citations found in their passages")), "{r}");
    let page = result_block(&t, &run).await;
    assert!(page.contains("class=\"ai-verified all\""), "{page}");
    assert!(page.contains(&format!("{n} of {n} quotes found in their passages")), "{page}");
    assert!(!page.contains("ai-verdict-not-found") && !page.contains("ai-closest"), "{page}");

    // Nothing about it anywhere (issue 41's reproduction): not found, and the closest passages
    // still listed, folded, as no answer — never under a green check.
    let run = ask(&t, "What is our on-call rotation?").await;
    let r = &run["receipt"];
    assert_eq!(r["verdict"], "not_found", "{r}");
    assert_eq!(r["verdictReason"], "key_terms_missing", "{r}");
    assert!(r["missingTerms"].as_array().unwrap().iter().any(|t| t.as_str().unwrap().contains("rotation")), "{r}");
    assert!(r["total"].as_u64().unwrap() >= 1, "the closest passages are cited: {run}");
    let answer = run["answer"].as_str().unwrap();
    assert!(answer.starts_with("Nothing in these knowledge bases answers this."), "{answer}");
    assert!(answer.contains("The call center of the regional office answers on weekdays."), "{answer}");
    let page = result_block(&t, &run).await;
    assert!(page.contains("data-verdict=\"not_found\">Nothing in these knowledge bases answers this.</p>"), "{page}");
    assert!(page.contains("<details class=\"ai-closest\"><summary>Closest passages (not an answer)</summary>"), "{page}");
    assert!(!page.contains("class=\"ai-verified all\""), "no green check: {page}");

    // On topic, but the number asked for is in no passage: partial, saying what is missing.
    let run = ask(&t, "How many scoped threads can borrow data from the parent stack frame?").await;
    let r = &run["receipt"];
    assert_eq!((r["verdict"].as_str(), r["verdictReason"].as_str()), (Some("partial"), Some("asked_kind_missing")), "{r}");
    assert_eq!(r["missing"], "number", "{r}");
    assert!(
        run["answer"]
            .as_str()
            .unwrap()
            .starts_with("Partly answered: these passages are on topic, but none of them states the amount or number asked for"),
        "{run}"
    );
    let page = result_block(&t, &run).await;
    assert!(page.contains("ai-verdict ai-verdict-partial"), "{page}");
    assert!(page.contains("none states the amount or number asked for"), "{page}");
    assert!(!page.contains("class=\"ai-verified all\""), "{page}");

    // Chinese: the same verdict words in the reader's language.
    let run = ask(&t, "值班轮换表是怎样安排的？").await;
    assert_eq!(run["receipt"]["verdict"], "not_found", "{run}");
}
