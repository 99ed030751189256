//! Source API (register, upload, list, get, delete) and the KB page's form actions.

use axum::{
    Form, Json,
    extract::{Multipart, Path, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;
use uuid::Uuid;

use super::{RegisterRequest, Registered, Source, blobs::BlobWriter, queries};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult},
    kbs,
    state::AppState,
    web::{Page, flash},
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBody {
    path: String,
    grant_id: Option<Uuid>,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

pub async fn list_sources(State(state): State<AppState>, auth: Auth, Path(kb): Path<Uuid>) -> AppResult<Json<serde_json::Value>> {
    let mut tx = auth.tx(&state).await?;
    kbs::visible(&mut tx, &auth, kb).await?;
    let items = queries::list(&mut tx, kb).await?;
    tx.commit().await?;
    Ok(Json(json!({ "items": items })))
}

/// `POST /api/kbs/{kbId}/sources`: a file answers with the source, a directory with
/// `{items, createdCount, skippedCount, folderId}`; 201 when something new was registered.
pub async fn register_source(
    State(state): State<AppState>,
    auth: Auth,
    Path(kb): Path<Uuid>,
    ApiJson(b): ApiJson<RegisterBody>,
) -> AppResult<Response> {
    let mut tx = auth.tx(&state).await?;
    let r = super::register(
        &mut tx,
        &state.config,
        &auth,
        RegisterRequest { kb_id: kb, grant_id: b.grant_id, path: &b.path, include: &b.include, exclude: &b.exclude },
    )
    .await?;
    tx.commit().await?;
    let status = if r.created_count > 0 { StatusCode::CREATED } else { StatusCode::OK };
    Ok(if r.directory {
        (status, Json(json!(r))).into_response()
    } else {
        let Registered { mut items, .. } = r;
        (status, Json(json!(items.pop()))).into_response()
    })
}

pub async fn get_source(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<Source>> {
    let mut tx = auth.tx(&state).await?;
    let s = queries::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Json(s))
}

async fn delete(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<Uuid> {
    let mut tx = auth.tx(state).await?;
    let s = queries::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    kbs::managed(&mut tx, auth, s.kb_id).await?;
    queries::delete(&mut tx, id).await?;
    tx.commit().await?;
    Ok(s.kb_id)
}

pub async fn delete_source(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<StatusCode> {
    delete(&state, &auth, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Stream one multipart field to disk, hashing as it goes; refuse it past the size limit.
async fn store_upload(state: &AppState, field: &mut axum::extract::multipart::Field<'_>) -> AppResult<(i64, String)> {
    let limit = state.config.upload_max_bytes;
    let internal = |e: std::io::Error| AppError::Internal(e.into());
    let mut blob = BlobWriter::create(&state.config.uploads_dir()).await.map_err(internal)?;
    let result: AppResult<()> = async {
        loop {
            let chunk = match field.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(AppError::TooLarge { limit }),
                Err(e) => return Err(AppError::invalid("file", format!("upload interrupted: {e}"))),
            };
            if blob.size() + chunk.len() as u64 > limit {
                return Err(AppError::TooLarge { limit });
            }
            blob.write(&chunk).await.map_err(internal)?;
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        blob.discard().await;
        return Err(e);
    }
    let (size, sha) = blob.finish().await.map_err(internal)?;
    Ok((size as i64, sha))
}

/// Accept every `file` field of a multipart body into the KB.
async fn upload(state: &AppState, auth: &Auth, kb: Uuid, mut mp: Multipart) -> AppResult<Vec<(Source, bool)>> {
    {
        let mut tx = auth.tx(state).await?;
        kbs::managed(&mut tx, auth, kb).await?;
        tx.commit().await?;
    }
    let mut out = Vec::new();
    loop {
        let mut field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(AppError::TooLarge { limit: state.config.upload_max_bytes });
            }
            Err(e) => return Err(AppError::invalid("file", e.body_text())),
        };
        if field.name() != Some("file") {
            continue;
        }
        let name = super::upload_name(field.file_name().unwrap_or(""))?;
        let kind = super::kind_of(std::path::Path::new(&name))
            .ok_or_else(|| AppError::invalid("file", format!("{name}: unsupported file kind")))?;
        let (size, sha) = store_upload(state, &mut field).await?;
        let rel = format!("uploads/{name}");
        let mut tx = auth.tx(state).await?;
        let n = queries::NewSource {
            kb_id: kb,
            grant_id: None,
            resource_path: &rel,
            kind,
            size_bytes: size,
            mtime: Some(chrono::Utc::now()),
            sha256: &sha,
        };
        let (mut s, created) = queries::upsert(&mut tx, auth.tenant_id, auth.user_id, &n).await?;
        if !created && s.sha256 != sha {
            s = queries::replace_upload_content(&mut tx, s.id, size, &sha).await?;
        }
        if created || s.indexed_hash.as_deref() != Some(sha.as_str()) {
            crate::ingest::jobs::enqueue(&mut tx, auth.tenant_id, s.id).await?;
        }
        tx.commit().await?;
        out.push((s, created));
    }
    if out.is_empty() {
        return Err(AppError::invalid("file", "no file in the upload (multipart field `file`)"));
    }
    Ok(out)
}

pub async fn upload_sources(
    State(state): State<AppState>,
    auth: Auth,
    Path(kb): Path<Uuid>,
    mp: Multipart,
) -> AppResult<Response> {
    let done = upload(&state, &auth, kb, mp).await?;
    let any_new = done.iter().any(|(_, c)| *c);
    let items: Vec<Source> = done.into_iter().map(|(s, _)| s).collect();
    let status = if any_new { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({ "items": items }))).into_response())
}

// ---------------------------------------------------------------- page form actions

#[derive(Deserialize)]
pub struct RegisterForm {
    grant_id: Option<String>,
    path: String,
    #[serde(default)]
    include: String,
    #[serde(default)]
    exclude: String,
}

fn split_globs(s: &str) -> Vec<String> {
    s.split([',', '\n']).map(str::trim).filter(|g| !g.is_empty()).map(String::from).collect()
}

pub async fn register_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(kb): Path<Uuid>,
    Form(f): Form<RegisterForm>,
) -> AppResult<Redirect> {
    let grant_id = match f.grant_id.as_deref().filter(|g| !g.is_empty()) {
        Some(g) => Some(Uuid::parse_str(g).map_err(|_| AppError::invalid("grant_id", "choose a directory"))?),
        None => None,
    };
    let (include, exclude) = (split_globs(&f.include), split_globs(&f.exclude));
    let mut tx = page.auth.tx(&state).await?;
    let r = super::register(
        &mut tx,
        &state.config,
        &page.auth,
        RegisterRequest { kb_id: kb, grant_id, path: &f.path, include: &include, exclude: &exclude },
    )
    .await?;
    tx.commit().await?;
    let msg = page
        .ctx
        .t("sources.registered")
        .replace("{created}", &r.created_count.to_string())
        .replace("{total}", &r.items.len().to_string())
        .replace("{skipped}", &r.skipped_count.to_string());
    flash(&session, msg).await?;
    Ok(Redirect::to(&format!("/kbs/{kb}")))
}

pub async fn upload_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(kb): Path<Uuid>,
    mp: Multipart,
) -> AppResult<Redirect> {
    let done = upload(&state, &page.auth, kb, mp).await?;
    flash(&session, page.ctx.t("sources.uploaded").replace("{n}", &done.len().to_string())).await?;
    Ok(Redirect::to(&format!("/kbs/{kb}")))
}

pub async fn delete_form(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Redirect> {
    let kb = delete(&state, &page.auth, id).await?;
    Ok(Redirect::to(&format!("/kbs/{kb}")))
}

/// `GET /api/sources/{id}/source-map.json`: the stored artifact's source map (the indexed version).
pub async fn source_map(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Response> {
    let mut tx = auth.tx(&state).await?;
    queries::readable(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    let art = crate::ingest::index::load_artifact(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Json(art.source_map).into_response())
}
