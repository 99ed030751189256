//! Every JSON request body answers malformed JSON with our JSON error, not axum's plain text.

use reqwest::StatusCode;
use serde_json::Value;
use uuid::Uuid;

use crate::helpers::*;

#[tokio::test]
async fn malformed_json_bodies_get_the_json_invalid_input_error() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    let token = c.bearer.clone().unwrap();
    let any = Uuid::new_v4();
    for (method, path) in [
        (reqwest::Method::POST, format!("/api/kbs/{any}/sources")),
        (reqwest::Method::PATCH, "/api/tenant/settings".to_string()),
        (reqwest::Method::PATCH, format!("/api/members/{any}")),
    ] {
        let r = c
            .http
            .request(method.clone(), format!("{}{path}", c.base))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body("{\"path\": ")
            .send()
            .await
            .unwrap();
        let st = r.status();
        assert!(
            r.headers()["content-type"].to_str().unwrap().starts_with("application/json"),
            "{method} {path}: {:?}",
            r.headers()
        );
        let v: Value = r.json().await.unwrap();
        assert_eq!((st, error_code(&v)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{method} {path}: {v}");
        assert!(v["error"]["message"].is_string(), "{v}");
    }
}
