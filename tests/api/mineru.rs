//! The MinerU provider against a local server that follows mineru.net's Precision Extract
//! API v4 (batch upload flow): `POST /api/v4/file-urls/batch` → `PUT` to the pre-signed URL →
//! `GET /api/v4/extract-results/batch/{id}` (pending, running, done) → result zip with a
//! `*_content_list.json`. Also the tenant setting that turns it on, and the routing.

use std::{
    io::Write,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode as AxStatus, header},
    response::{IntoResponse, Response},
    routing::{get, post, put},
};
use mnote::{
    config::SecretString,
    db::{Scope, TenantTx},
    ingest::pipeline::Outcome,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::helpers::*;

const TOKEN: &str = "mineru-test-token-5f1c9a";

use crate::fixtures::testdata;

// ---- the fake MinerU --------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Ending {
    Done,
    Failed,
    /// The upload-URL request answers HTTP 503.
    Unavailable,
}

#[derive(Default)]
struct Seen {
    /// (Authorization header, JSON body) of every upload-URL request.
    submits: Vec<(Option<String>, Value)>,
    /// (Authorization, Content-Type, bytes) of every upload.
    uploads: Vec<(Option<String>, Option<String>, Vec<u8>)>,
    /// Authorization of every result query.
    polls: Vec<Option<String>>,
    /// Authorization of every zip download.
    downloads: Vec<Option<String>>,
}

impl Seen {
    fn requests(&self) -> usize {
        self.submits.len() + self.uploads.len() + self.polls.len() + self.downloads.len()
    }
}

#[derive(Clone)]
struct Fake {
    base: String,
    ending: Ending,
    /// The content list served in the result zip.
    content_list: Value,
    seen: Arc<Mutex<Seen>>,
}

fn auth_of(h: &HeaderMap) -> Option<String> {
    h.get(header::AUTHORIZATION).map(|v| v.to_str().unwrap_or("").to_string())
}

async fn submit(State(f): State<Fake>, h: HeaderMap, Json(body): Json<Value>) -> Response {
    f.seen.lock().unwrap().submits.push((auth_of(&h), body.clone()));
    if auth_of(&h).as_deref() != Some(&format!("Bearer {TOKEN}")) {
        // The gateway's own shape for a bad token.
        return Json(json!({"success": false, "msgCode": "A0202", "msg": "user authenticate failed", "data": null}))
            .into_response();
    }
    if f.ending == Ending::Unavailable {
        return (AxStatus::SERVICE_UNAVAILABLE, "upstream busy").into_response();
    }
    let name = body["files"][0]["name"].as_str().unwrap_or("x").to_string();
    Json(json!({
        "code": 0, "msg": "ok", "trace_id": "c876cd60b202f2396de1f9e39a1b0172",
        "data": {"batch_id": "2bb2f0ec-a336-4a0a-b61a-241afaf9cc87",
                 "file_urls": [format!("{}/oss/api-upload/{name}?Expires=1&OSSAccessKeyId=k&Signature=s%3D", f.base)]}
    }))
    .into_response()
}

async fn upload(State(f): State<Fake>, h: HeaderMap, body: Bytes) -> AxStatus {
    let ct = h.get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap_or("").to_string());
    f.seen.lock().unwrap().uploads.push((auth_of(&h), ct, body.to_vec()));
    AxStatus::OK
}

async fn results(State(f): State<Fake>, h: HeaderMap, Path(batch): Path<String>) -> Json<Value> {
    let n = {
        let mut seen = f.seen.lock().unwrap();
        seen.polls.push(auth_of(&h));
        seen.polls.len()
    };
    let name = f.seen.lock().unwrap().submits.last().map(|s| s.1["files"][0]["name"].as_str().unwrap_or("").to_string()).unwrap();
    let entry = match (n, f.ending) {
        (1, _) => json!({"file_name": name, "state": "pending", "err_msg": ""}),
        (2, _) => json!({"file_name": name, "state": "running", "err_msg": "",
                         "extract_progress": {"extracted_pages": 1, "total_pages": 2, "start_time": "2025-01-20 11:43:20"}}),
        (_, Ending::Failed) => {
            json!({"file_name": name, "state": "failed", "err_msg": "文件格式不支持，请上传符合要求的文件类型"})
        }
        _ => json!({"file_name": name, "state": "done", "err_msg": "",
                    "full_zip_url": format!("{}/cdn/pdf/018e53ad-d4f1-475d-b380-36bf24db9914.zip", f.base)}),
    };
    Json(json!({"code": 0, "msg": "ok", "trace_id": "t", "data": {"batch_id": batch, "extract_result": [entry]}}))
}

async fn zip(State(f): State<Fake>, h: HeaderMap) -> Vec<u8> {
    f.seen.lock().unwrap().downloads.push(auth_of(&h));
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    let opts = zip::write::SimpleFileOptions::default();
    w.start_file("full.md", opts).unwrap();
    w.write_all(b"# CHAPTER II.\n").unwrap();
    w.start_file("018e53ad_content_list.json", opts).unwrap();
    w.write_all(f.content_list.to_string().as_bytes()).unwrap();
    w.start_file("layout.json", opts).unwrap();
    w.write_all(
        json!({"pdf_info": [{"page_idx": 0, "page_size": [384, 471]}], "_backend": "pipeline", "_version_name": "2.6.4"})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    w.start_file("images/a8ecda1c.jpg", opts).unwrap();
    w.write_all(b"\xff\xd8\xff").unwrap();
    w.finish().unwrap();
    out.into_inner()
}

async fn spawn_fake(ending: Ending, content_list: Value) -> Fake {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let fake = Fake { base, ending, content_list, seen: Arc::default() };
    let app = Router::new()
        .route("/api/v4/file-urls/batch", post(submit))
        .route("/oss/api-upload/{name}", put(upload))
        .route("/api/v4/extract-results/batch/{id}", get(results))
        .route("/cdn/pdf/{file}", get(zip))
        .with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    fake
}

// ---- the app side -----------------------------------------------------------------------

struct Team {
    client: Client,
    tenant: Uuid,
    kb: String,
}

async fn team(app: &TestApp) -> Team {
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let client = app.api(s.tenant_id, s.user_id).await;
    std::fs::create_dir_all(app.docs.join("scans")).unwrap();
    let (st, _) = client
        .post_json("/api/grants", json!({"path": app.docs_path("scans"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (_, kb) = client.post_json("/api/kbs", json!({"name": "scans"})).await;
    Team { client, tenant: s.tenant_id, kb: kb["id"].as_str().unwrap().to_string() }
}

async fn enable_external(t: &Team, on: bool) {
    let (st, v) = t.client.send_json("PATCH", "/api/tenant/settings", json!({"externalParsingUpload": on})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["externalParsingUpload"], on);
}

/// Copy a test document into the granted directory and register it; returns the source id.
async fn add(app: &TestApp, t: &Team, from: &str, name: &str) -> String {
    std::fs::copy(testdata(from), app.docs.join("scans").join(name)).unwrap();
    let (st, s) =
        t.client.post_json(&format!("/api/kbs/{}/sources", t.kb), json!({"path": app.docs_path(&format!("scans/{name}"))})).await;
    assert!(st.is_success(), "{st} {s}");
    s["id"].as_str().unwrap().to_string()
}

async fn rows(app: &TestApp, tenant: Uuid, sql: &str, source: &str) -> Vec<(String, Value)> {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let r: Vec<(String, Value)> = sqlx::query_as(sql).bind(source).fetch_all(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    r
}

async fn evidence(app: &TestApp, tenant: Uuid, source: &str) -> Vec<(String, Value)> {
    rows(app, tenant, "select text, locator from evidence_block where source_id = $1::uuid order by ordinal", source).await
}

async fn artifact_count(app: &TestApp, tenant: Uuid, source: &str) -> i64 {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let n: i64 = sqlx::query_scalar("select count(*) from source_artifact where source_id = $1::uuid")
        .bind(source)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    n
}

fn near(a: &Value, expected: [f64; 4]) -> bool {
    let a: Vec<f64> = a.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    a.iter().zip(expected).all(|(x, e)| (x - e).abs() < 0.02)
}

fn scan_content_list() -> Value {
    json!([
        {"type": "text", "text": "CHAPTER II. ", "text_level": 1, "bbox": [250, 100, 750, 140], "page_idx": 0},
        {"type": "text", "text": "The Pool of Tears: curiouser and curiouser, cried Alice. ", "bbox": [100, 200, 900, 600], "page_idx": 0},
        {"type": "image", "img_path": "images/a8ecda1c.jpg", "image_caption": [], "image_footnote": [], "bbox": [100, 620, 900, 950], "page_idx": 0},
        {"type": "footer", "text": "22", "bbox": [480, 960, 520, 980], "page_idx": 0}
    ])
}

#[tokio::test]
async fn a_scanned_pdf_goes_through_the_mineru_upload_flow() {
    let fake = spawn_fake(Ending::Done, scan_content_list()).await;
    let app = spawn_app_with(|c| {
        c.mineru_token = Some(SecretString::new(TOKEN));
        c.mineru_url = fake.base.clone();
    })
    .await;
    let t = team(&app).await;
    enable_external(&t, true).await;
    let id = add(&app, &t, "pdf_scanned/ocr_c02-22.pdf", "chapter.pdf").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Indexed { blocks: 2 }]);

    // The API flow, as mineru.net documents it.
    {
        let seen = fake.seen.lock().unwrap();
        assert_eq!(seen.submits.len(), 1);
        let (auth, body) = &seen.submits[0];
        assert_eq!(auth.as_deref(), Some(format!("Bearer {TOKEN}").as_str()), "the token goes to the API as Bearer");
        let file = &body["files"][0];
        assert!(file["name"].as_str().unwrap().ends_with(".pdf"), "{body}");
        assert_eq!(file["is_ocr"], true);
        assert!(file["data_id"].as_str().unwrap().starts_with("mnote-"));
        assert!(!body.to_string().contains("chapter.pdf"), "the local file name is not sent: {body}");
        assert_eq!(seen.uploads.len(), 1);
        let (auth, ct, bytes) = &seen.uploads[0];
        assert_eq!((auth, ct), (&None, &None), "no token and no Content-Type on the pre-signed upload");
        assert_eq!(bytes, &std::fs::read(testdata("pdf_scanned/ocr_c02-22.pdf")).unwrap());
        assert_eq!(seen.polls.len(), 3, "pending, running, done");
        assert!(seen.polls.iter().all(|a| a.as_deref() == Some(format!("Bearer {TOKEN}").as_str())));
        assert_eq!(seen.downloads, vec![None], "the result zip is fetched without the token");
    }

    let (_, s) = t.client.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!((s["status"].as_str(), s["error"].is_null()), (Some("indexed"), true), "{s}");
    let provider = s["provider"].as_str().unwrap();
    assert!(provider.starts_with("mineru ") && provider.contains("pipeline, mineru 2.6.4)"), "{s}");

    // Blocks, 1-based pages, boxes: 0–1000 of the 384 × 470.88 pt page → points, top-left.
    let ev = evidence(&app, t.tenant, &id).await;
    assert_eq!(ev.len(), 2, "{ev:?}");
    let (title, loc) = &ev[0];
    assert_eq!(title, "CHAPTER II.");
    assert_eq!(loc["page"], 1);
    assert_eq!(loc["pageSize"], json!([384.0, 470.88]));
    assert!(near(&loc["bbox"], [96.0, 47.09, 288.0, 65.92]), "{loc}");
    assert_eq!(loc["quality"], "approximate");
    let (para, loc) = &ev[1];
    assert_eq!(para, "The Pool of Tears: curiouser and curiouser, cried Alice.");
    assert!(near(&loc["bbox"], [38.4, 94.18, 345.6, 282.53]), "{loc}");
    assert_eq!(loc["sectionPath"], json!(["CHAPTER II."]));

    // The token is nowhere in what the server stored or shows.
    let (st, sm) = t.client.get_json(&format!("/api/sources/{id}/source-map.json")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(sm["provider"], "mineru");
    assert_eq!(sm["pages"][0]["ocr"], true);
    let (_, settings) = t.client.get_json("/api/tenant/settings").await;
    assert_eq!(settings["mineruConfigured"], true);
    let stored = rows(&app, t.tenant, "select text, source_map from source_artifact where source_id = $1::uuid", &id).await;
    for text in [
        sm.to_string(),
        s.to_string(),
        settings.to_string(),
        format!("{stored:?}"),
        format!("{ev:?}"),
        format!("{:?}", app.config),
    ] {
        assert!(!text.contains(TOKEN), "token leaked: {text}");
    }
}

#[tokio::test]
async fn a_jpeg_is_converted_to_pixel_boxes() {
    let fake = spawn_fake(
        Ending::Done,
        json!([{"type": "text", "text": "MovieShots Dataset", "text_level": 1, "bbox": [20, 30, 500, 200], "page_idx": 0}]),
    )
    .await;
    let app = spawn_app_with(|c| {
        c.mineru_token = Some(SecretString::new(TOKEN));
        c.mineru_url = fake.base.clone();
    })
    .await;
    let t = team(&app).await;
    enable_external(&t, true).await;
    let id = add(&app, &t, "images/ocr_baiona_color.jpg", "shot.jpg").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Indexed { blocks: 1 }]);
    assert!(fake.seen.lock().unwrap().submits[0].1["files"][0]["name"].as_str().unwrap().ends_with(".jpg"));
    let ev = evidence(&app, t.tenant, &id).await;
    let loc = &ev[0].1;
    // 640 × 682 px image; MinerU's boxes are per mille of it.
    assert_eq!((loc["page"].as_u64(), &loc["pageSize"]), (Some(1), &json!([640.0, 682.0])));
    assert!(near(&loc["bbox"], [12.8, 20.46, 320.0, 136.4]), "{loc}");
}

#[tokio::test]
async fn enabled_without_a_token_fails_with_mineru_token_missing_and_writes_nothing() {
    let app = spawn_app().await; // no MNOTE_MINERU_TOKEN
    let t = team(&app).await;
    let (_, v) = t.client.get_json("/api/tenant/settings").await;
    assert_eq!((v["externalParsingUpload"].as_bool(), v["mineruConfigured"].as_bool()), (Some(false), Some(false)));
    enable_external(&t, true).await;
    let id = add(&app, &t, "images/ocr_baiona_color.jpg", "shot.jpg").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Failed { code: "mineru_token_missing".into() }]);
    let (_, s) = t.client.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("failed"), Some("mineru_token_missing")), "{s}");
    assert!(evidence(&app, t.tenant, &id).await.is_empty());
    assert_eq!(artifact_count(&app, t.tenant, &id).await, 0);
}

#[tokio::test]
async fn with_the_setting_off_or_a_text_pdf_the_local_providers_parse() {
    let fake = spawn_fake(Ending::Done, scan_content_list()).await;
    let app = spawn_app_with(|c| {
        c.mineru_token = Some(SecretString::new(TOKEN));
        c.mineru_url = fake.base.clone();
    })
    .await;
    let t = team(&app).await;
    // Off by default: the image is OCR'd locally.
    let img = add(&app, &t, "images/ocr_baiona_color.jpg", "shot.jpg").await;
    assert!(matches!(app.run_jobs().await.as_slice(), [Outcome::Indexed { .. }]));
    let (_, s) = t.client.get_json(&format!("/api/sources/{img}")).await;
    assert!(s["provider"].as_str().unwrap().starts_with("tesseract"), "{s}");
    // On, but a PDF with a text layer is no scan: pdfium parses it.
    enable_external(&t, true).await;
    let pdf = add(&app, &t, "pdf/pypdf_multilang.pdf", "multilang.pdf").await;
    assert!(matches!(app.run_jobs().await.as_slice(), [Outcome::Indexed { .. }]));
    let (_, s) = t.client.get_json(&format!("/api/sources/{pdf}")).await;
    assert!(s["provider"].as_str().unwrap().starts_with("pdfium"), "{s}");
    assert_eq!(fake.seen.lock().unwrap().requests(), 0, "MinerU was never called");
}

#[tokio::test]
async fn a_failed_mineru_task_is_a_permanent_error_with_its_message() {
    let fake = spawn_fake(Ending::Failed, json!([])).await;
    let app = spawn_app_with(|c| {
        c.mineru_token = Some(SecretString::new(TOKEN));
        c.mineru_url = fake.base.clone();
    })
    .await;
    let t = team(&app).await;
    enable_external(&t, true).await;
    let id = add(&app, &t, "pdf_scanned/ocr_c02-22.pdf", "chapter.pdf").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Failed { code: "mineru_failed".into() }]);
    let (_, s) = t.client.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!(s["error"]["code"], "mineru_failed");
    let msg = s["error"]["message"].as_str().unwrap();
    assert!(msg.contains("文件格式不支持"), "{msg}");
    assert!(!msg.contains(TOKEN));
    assert!(evidence(&app, t.tenant, &id).await.is_empty());
    assert_eq!(fake.seen.lock().unwrap().downloads.len(), 0);
}

#[tokio::test]
async fn an_unavailable_or_refusing_mineru_gives_stable_codes() {
    // 503: transient, the job is queued again with backoff.
    let fake = spawn_fake(Ending::Unavailable, json!([])).await;
    let app = spawn_app_with(|c| {
        c.mineru_token = Some(SecretString::new(TOKEN));
        c.mineru_url = fake.base.clone();
    })
    .await;
    let t = team(&app).await;
    enable_external(&t, true).await;
    let id = add(&app, &t, "images/ocr_baiona_color.jpg", "shot.jpg").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Retrying { code: "mineru_unavailable".into() }]);
    let (_, s) = t.client.get_json(&format!("/api/sources/{id}")).await;
    assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("pending"), Some("mineru_unavailable")), "{s}");

    // A wrong token: the gateway's A0202 is permanent, and the token is not repeated back.
    let fake = spawn_fake(Ending::Done, json!([])).await;
    let app = spawn_app_with(|c| {
        c.mineru_token = Some(SecretString::new("wrong-token-77"));
        c.mineru_url = fake.base.clone();
    })
    .await;
    let t = team(&app).await;
    enable_external(&t, true).await;
    let id = add(&app, &t, "images/ocr_baiona_color.jpg", "shot.jpg").await;
    assert_eq!(app.run_jobs().await, vec![Outcome::Failed { code: "mineru_unauthorized".into() }]);
    let (_, s) = t.client.get_json(&format!("/api/sources/{id}")).await;
    let msg = s["error"]["message"].as_str().unwrap();
    assert!(msg.contains("A0202") && !msg.contains("wrong-token-77"), "{msg}");
}

#[tokio::test]
async fn only_admins_change_the_setting_and_rls_enforces_it() {
    let app = spawn_app().await;
    let t = team(&app).await;
    let member = app.add_user(t.tenant, "member@acme.test", "member").await;
    let m = app.api(t.tenant, member).await;
    let (st, v) = m.get_json("/api/tenant/settings").await;
    assert_eq!((st, v["externalParsingUpload"].as_bool()), (StatusCode::OK, Some(false)));
    let (st, v) = m.send_json("PATCH", "/api/tenant/settings", json!({"externalParsingUpload": true})).await;
    assert_eq!((st, error_code(&v)), (StatusCode::FORBIDDEN, "forbidden"));
    let (st, _) = t.client.send_json("PATCH", "/api/tenant/settings", json!({"bogus": 1})).await;
    assert!(st.is_client_error());

    // Even a direct write as the member is refused by row-level security.
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::User(member)).await.unwrap();
    let r = mnote::tenants::settings::set_external_parsing_upload(&mut tx, t.tenant, member, true).await;
    assert!(r.unwrap_err().to_string().contains("row-level security"));
    drop(tx);
    // An admin of another team cannot write this team's row either.
    let other = app.bootstrap("other", "owner@other.test").await;
    let mut tx = TenantTx::begin(&app.pool, other.tenant_id, Scope::User(other.user_id)).await.unwrap();
    let r = mnote::tenants::settings::set_external_parsing_upload(&mut tx, t.tenant, other.user_id, true).await;
    assert!(r.is_err());
    drop(tx);

    // The admin page: a checkbox form with the CSRF token.
    let mut browser = app.login("owner@acme.test").await;
    let (st, html) = browser.page("/admin/settings").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains(r#"name="external_parsing_upload""#) && !html.contains("checked"), "{html}");
    let r = browser.post_form("/admin/settings", &[("external_parsing_upload", "on")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = browser.page("/admin/settings").await;
    assert!(html.contains("checked"));
    let (_, v) = t.client.get_json("/api/tenant/settings").await;
    assert_eq!(v["externalParsingUpload"], true);
    // Without the CSRF token the form is refused.
    let r = browser.http.post(format!("{}/admin/settings", browser.base)).form(&[("x", "y")]).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = browser.post_form("/admin/settings", &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, v) = t.client.get_json("/api/tenant/settings").await;
    assert_eq!(v["externalParsingUpload"], false);
    // A member gets no settings page.
    let mut mb = app.login("member@acme.test").await;
    let (st, _) = mb.page("/admin/settings").await;
    assert_eq!(st, StatusCode::FORBIDDEN);
}
