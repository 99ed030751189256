//! Knowledge bases and sources: the flow a team goes through after sign-in.

use reqwest::{StatusCode, multipart};
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn create_grant_register_a_directory_and_list_its_files() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.login("owner@acme.test").await.with_csrf().await;
    app.write_doc("team/guide.md", "# Guide\n\n使用线程作用域可以借用栈上的数据。\n");
    app.write_doc("team/reports/q1.pdf", "%PDF-1.4 not really");
    app.write_doc("team/reports/notes.txt", "plain");
    app.write_doc("team/tool.exe", "MZ");
    app.write_doc("team/drafts/wip.md", "# wip");
    let (st, g) =
        c.post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"})).await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (st, kb) = c.post_json("/api/kbs", json!({"name": "Handbook", "visibility": "team", "description": "team docs"})).await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!((kb["name"].as_str(), kb["canManage"].as_bool()), (Some("Handbook"), Some(true)));
    let kb_id = kb["id"].as_str().unwrap();
    let url = format!("/api/kbs/{kb_id}/sources");
    let (st, r) = c.post_json(&url, json!({"grantId": g["id"], "path": "", "exclude": ["drafts/**"]})).await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    assert_eq!(r["createdCount"], 3);
    assert_eq!(r["skippedCount"], 2, "tool.exe (unsupported) and drafts/wip.md (excluded)");
    assert!(r["folderId"].is_string());

    let (st, list) = c.get_json(&url).await;
    assert_eq!(st, StatusCode::OK);
    let items = list["items"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str)> = items
        .iter()
        .map(|s| (s["resourcePath"].as_str().unwrap(), s["kind"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        vec![("guide.md", "markdown", "pending"), ("reports/notes.txt", "text", "pending"), ("reports/q1.pdf", "pdf", "pending")]
    );
    let guide = &items[0];
    let bytes = std::fs::read(app.docs.join("team/guide.md")).unwrap();
    assert_eq!(guide["sizeBytes"].as_u64(), Some(bytes.len() as u64));
    use sha2::Digest;
    assert_eq!(guide["sha256"].as_str().unwrap(), format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes))));
    assert!(guide["error"].is_null());
    assert!(guide["mtime"].is_string());

    // Registering again is idempotent: same ids, nothing new.
    let (st, again) = c.post_json(&url, json!({"grantId": g["id"], "path": "", "exclude": ["drafts/**"]})).await;
    assert_eq!((st, again["createdCount"].as_u64()), (StatusCode::OK, Some(0)));
    let (st, one) = c.post_json(&url, json!({"path": app.docs_path("team/guide.md")})).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(one["id"], guide["id"]);
    let (_, list) = c.get_json(&url).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 3);

    // Single files of unsupported kinds are refused clearly.
    let (st, e) = c.post_json(&url, json!({"path": app.docs_path("team/tool.exe")})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
    // A missing file inside the grant:
    let (st, e) = c.post_json(&url, json!({"path": app.docs_path("team/missing.md")})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));

    // Get and delete one source.
    let id = guide["id"].as_str().unwrap();
    let (st, got) = c.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!((st, got["resourcePath"].as_str()), (StatusCode::OK, Some("guide.md")));
    assert_eq!(c.delete(&format!("/api/sources/{id}")).await, StatusCode::NO_CONTENT);
    assert_eq!(c.get_json(&format!("/api/sources/{id}")).await.0, StatusCode::NOT_FOUND);
    assert!(app.docs.join("team/guide.md").exists(), "deleting a source never deletes the file");
    let _ = s;
}

#[tokio::test]
async fn uploads_are_stored_by_content_hash_and_limited_in_size() {
    let app = spawn_app_with(|c| c.upload_max_bytes = 64 * 1024).await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let (_, kb) = c.post_json("/api/kbs", json!({"name": "uploads"})).await;
    let kb = kb["id"].as_str().unwrap();
    let upload = |name: &str, body: Vec<u8>| {
        let form = multipart::Form::new().part("file", multipart::Part::bytes(body).file_name(name.to_string()));
        c.http.post(format!("{}/api/kbs/{kb}/uploads", app.base)).bearer_auth(c.bearer.as_ref().unwrap()).multipart(form).send()
    };
    let (st, r) = json_of(upload("../../报告.md", "# 报告\n\n线程作用域".as_bytes().to_vec()).await.unwrap()).await;
    assert_eq!(st, StatusCode::CREATED, "{r}");
    let src = &r["items"][0];
    assert_eq!((src["resourcePath"].as_str(), src["origin"].as_str()), (Some("uploads/报告.md"), Some("upload")));
    let hex = src["sha256"].as_str().unwrap().trim_start_matches("sha256:").to_string();
    let blob = app.config.data_dir.join("uploads").join(&hex[..2]).join(&hex);
    assert_eq!(std::fs::read(&blob).unwrap(), "# 报告\n\n线程作用域".as_bytes());

    // Too large: a clear 413, no source, no stray file.
    let (st, e) = json_of(upload("big.md", vec![b'a'; 100 * 1024]).await.unwrap()).await;
    assert_eq!((st, error_code(&e)), (StatusCode::PAYLOAD_TOO_LARGE, "file_too_large"));
    let (st, e) = json_of(upload("huge.md", vec![b'a'; 3 * 1024 * 1024]).await.unwrap()).await;
    assert_eq!((st, error_code(&e)), (StatusCode::PAYLOAD_TOO_LARGE, "file_too_large"), "{e}");
    let (_, list) = c.get_json(&format!("/api/kbs/{kb}/sources")).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let tmp = app.config.data_dir.join("uploads/tmp");
    assert_eq!(std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0), 0, "partial upload left behind");

    // Unsupported kinds and empty bodies are refused.
    let (st, e) = json_of(upload("virus.exe", b"MZ".to_vec()).await.unwrap()).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
    // Same name again with new content replaces the content of the same source.
    let (st, r2) = json_of(upload("报告.md", b"# v2".to_vec()).await.unwrap()).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(r2["items"][0]["id"], src["id"]);
    assert_ne!(r2["items"][0]["sha256"], src["sha256"]);
}

#[tokio::test]
async fn kb_crud_and_validation() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let (st, e) = c.post_json("/api/kbs", json!({"name": "  "})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
    let (st, e) = c.post_json("/api/kbs", json!({"name": "x", "visibility": "public"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"));
    let (st, kb) = c.post_json("/api/kbs", json!({"name": "One"})).await;
    assert_eq!(st, StatusCode::CREATED);
    let (st, e) = c.post_json("/api/kbs", json!({"name": "One"})).await;
    assert_eq!((st, error_code(&e)), (StatusCode::CONFLICT, "conflict"));
    let id = kb["id"].as_str().unwrap();
    let (st, k) = c.send_json("PATCH", &format!("/api/kbs/{id}"), json!({"name": "Renamed", "visibility": "private"})).await;
    assert_eq!((st, k["name"].as_str(), k["visibility"].as_str()), (StatusCode::OK, Some("Renamed"), Some("private")));
    assert_eq!(c.delete(&format!("/api/kbs/{id}")).await, StatusCode::NO_CONTENT);
    assert_eq!(c.get_json(&format!("/api/kbs/{id}")).await.0, StatusCode::NOT_FOUND);
    let (st, e) = c.get_json("/api/kbs/not-a-uuid").await;
    assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{e}");
    let (st, e) = c.get_json("/api/nothing-here").await;
    assert_eq!((st, error_code(&e)), (StatusCode::NOT_FOUND, "not_found"));
}
