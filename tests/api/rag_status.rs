//! Issue 39 item 8: the knowledge-RAG status says `processed` only when it knows whether the
//! OCR text reached LightRAG, and says explicitly what it knows (`ocrText`). The rows are
//! written by the sync's own functions (`rag::docs`), against a binding whose LightRAG is
//! down (the status lists the sources all the same); the real sync against a real LightRAG
//! is in knowledge_rag.rs.

use mnote::{
    db::{Scope, TenantTx},
    rag::docs::{self, DocState, Sent},
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

#[tokio::test]
async fn the_rag_status_says_processed_only_when_the_ocr_exposure_is_known() {
    let dead = format!("http://127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let d = dead.clone();
    let app = spawn_app_with(move |c| c.rag.allowed_urls = vec![d]).await;
    let s = app.bootstrap("ragstatus", "owner@ragstatus.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    for name in ["exposed", "hidden", "waiting", "plain", "refused"] {
        app.write_doc(&format!("ocr/{name}.md"), &format!("# {name}\n\nA paragraph of {name}.\n"));
    }
    let kb = app.indexed_folder_kb(&api, "ocr", json!({"name": "RAG status"})).await;
    let (st, b) = api.send_json("PUT", &format!("/api/kbs/{kb}/knowledge-rag"), json!({"url": dead})).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    let (_, sources) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;
    let id = |name: &str| -> Uuid {
        let s = sources["items"].as_array().unwrap().iter().find(|s| s["resourcePath"] == format!("{name}.md").as_str());
        s.unwrap_or_else(|| panic!("{sources}"))["id"].as_str().unwrap().parse().unwrap()
    };

    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
    let binding: Uuid = sqlx::query_scalar("select id from rag_binding where tenant_id = $1 and active")
        .bind(s.tenant_id)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    // Sent: four with OCR text, one without.
    for (name, ocr) in [("exposed", true), ("hidden", true), ("waiting", true), ("plain", false), ("refused", true)] {
        let source = id(name);
        let file_source = docs::file_source(source, &format!("{name}.md"));
        let doc_id = format!("doc-{name}");
        let sent = Sent {
            binding,
            source,
            file_source: &file_source,
            doc_id: &doc_id,
            source_hash: "sha256:x",
            method: "text",
            track_id: "track-1",
            ocr_expected: ocr,
        };
        docs::record_sent(&mut tx, s.tenant_id, &sent).await.unwrap();
    }
    // What the sync's track step records when LightRAG has processed them: the state and the
    // OCR check in one statement.
    docs::set_state(&mut tx, binding, id("exposed"), DocState::Processed, None, Some(true)).await.unwrap();
    docs::set_state(&mut tx, binding, id("hidden"), DocState::Processed, None, Some(false)).await.unwrap();
    docs::set_state(&mut tx, binding, id("plain"), DocState::Processed, None, None).await.unwrap();
    tx.commit().await.unwrap();
    // `processed` without the check, for a text with OCR text: the database refuses it.
    let mut tx = TenantTx::begin(&app.pool, s.tenant_id, Scope::System).await.unwrap();
    let e = docs::set_state(&mut tx, binding, id("refused"), DocState::Processed, None, None).await.unwrap_err();
    assert!(
        matches!(&e, sqlx::Error::Database(d) if d.constraint() == Some("rag_doc_processed_knows_ocr")),
        "processed without knowing the OCR exposure was stored: {e:?}"
    );
    drop(tx);

    let (st, status) = api.get_json(&format!("/api/knowledge-rag/status?kbId={kb}")).await;
    assert_eq!(st, StatusCode::OK, "{status}");
    let items = status["items"][0]["items"].as_array().unwrap();
    let item = |name: &str| -> &Value {
        let sid = id(name).to_string();
        items.iter().find(|i| i["sourceId"] == sid.as_str()).unwrap_or_else(|| panic!("{status}"))
    };
    let seen = |name: &str| {
        let i = item(name);
        (i["lightragStatus"].as_str().map(str::to_string), i["ocrText"].as_str().map(str::to_string), i["ocrTextExposed"].clone())
    };
    let want = |st: &str, ocr: &str, exposed: Value| (Some(st.to_string()), Some(ocr.to_string()), exposed);
    assert_eq!(seen("exposed"), want("processed", "exposed", json!(true)));
    assert_eq!(seen("hidden"), want("processed", "not_exposed", json!(false)));
    assert_eq!(seen("plain"), want("processed", "none", Value::Null));
    assert_eq!(seen("waiting"), want("pending", "unknown", Value::Null));
    assert_eq!(seen("refused"), want("pending", "unknown", Value::Null));
    // The rule over every item: processed never with the OCR text unknown.
    for i in items {
        assert!(!(i["lightragStatus"] == "processed" && i["ocrText"] == "unknown"), "{i}");
    }
    let counts = &status["items"][0]["counts"];
    assert_eq!((counts["processed"].as_u64(), counts["ocrNotExposed"].as_u64()), (Some(3), Some(1)), "{counts}");
}
