//! Source API (register, upload, list, get, delete) and the KB page's form actions.

use axum::{
    Form, Json,
    extract::{Multipart, Path, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use uuid::Uuid;

use super::{RegisterRequest, Registered, Source, blobs::BlobWriter, queries};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult, Items},
    kbs,
    state::AppState,
    web::{Page, flash},
};

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBody {
    path: String,
    grant_id: Option<Uuid>,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

pub async fn list_sources(State(state): State<AppState>, auth: Auth, Path(kb): Path<Uuid>) -> AppResult<Json<Items<Source>>> {
    let mut tx = auth.tx(&state).await?;
    kbs::readable(&mut tx, &auth, kb).await?;
    let items = queries::list(&mut tx, kb).await?;
    tx.commit().await?;
    Ok(Json(items.into()))
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
        (status, Json(r)).into_response()
    } else {
        let Registered { mut items, .. } = r;
        (status, Json(items.pop())).into_response()
    })
}

pub async fn get_source(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<Source>> {
    let mut tx = auth.tx(&state).await?;
    let s = queries::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Json(s))
}

async fn delete(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<Source> {
    let mut tx = auth.tx(state).await?;
    let s = queries::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    kbs::managed(&mut tx, auth, s.kb_id).await?;
    queries::soft_delete(&mut tx, id, auth.user_id).await?;
    tx.commit().await?;
    Ok(s)
}

/// `DELETE /api/sources/{id}`: the source leaves the KB's list and search at once; it can be
/// restored during the grace period, then it is purged.
pub async fn delete_source(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<StatusCode> {
    delete(&state, &auth, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn impact(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<(Source, kbs::DeleteImpact)> {
    let mut tx = auth.tx(state).await?;
    let s = queries::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    kbs::managed(&mut tx, auth, s.kb_id).await?;
    let blocks = queries::block_count(&mut tx, id).await?;
    tx.commit().await?;
    Ok((s, kbs::DeleteImpact { sources: 1, blocks, grace_secs: state.config.delete_grace.as_secs() }))
}

/// `GET /api/sources/{id}/delete-preview`: `{sources: 1, blocks, graceSecs}`.
pub async fn delete_preview(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<Uuid>,
) -> AppResult<Json<kbs::DeleteImpact>> {
    Ok(Json(impact(&state, &auth, id).await?.1))
}

async fn restore(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<Source> {
    let mut tx = auth.tx(state).await?;
    let s = queries::get_removed(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    kbs::managed(&mut tx, auth, s.kb_id).await?;
    let s = queries::restore(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(s)
}

/// `POST /api/sources/{id}/restore`: a removed source (still in its grace period) is back in
/// its KB and in search, with its evidence as it was.
pub async fn restore_source(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Json<Source>> {
    Ok(Json(restore(&state, &auth, id).await?))
}

/// A removed source and when it will be purged for good.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemovedSource {
    source: Source,
    purge_after: Option<chrono::DateTime<chrono::Utc>>,
}

/// `GET /api/kbs/{id}/sources/removed`: the KB's removed sources, with their purge time.
pub async fn list_removed(
    State(state): State<AppState>,
    auth: Auth,
    Path(kb): Path<Uuid>,
) -> AppResult<Json<Items<RemovedSource>>> {
    let mut tx = auth.tx(&state).await?;
    kbs::readable(&mut tx, &auth, kb).await?;
    let items = queries::removed(&mut tx, kb).await?;
    tx.commit().await?;
    let items: Vec<_> =
        items.into_iter().map(|s| RemovedSource { purge_after: super::purge_after(&state.config, &s), source: s }).collect();
    Ok(Json(items.into()))
}

async fn retry(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<Source> {
    let mut tx = auth.tx(state).await?;
    let s = queries::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    kbs::managed(&mut tx, auth, s.kb_id).await?;
    if !super::queue::retry_now(&mut tx, auth.tenant_id, id).await? {
        return Err(AppError::Conflict("this source is being parsed right now".into()));
    }
    let s = queries::reset_for_retry(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(s)
}

/// `POST /api/sources/{id}/retry`: parse again now, with fresh attempts (a failed source, one
/// that kept its old version after a failed re-parse, or one that waits too long); 409 while
/// a worker is parsing it.
pub async fn retry_source(State(state): State<AppState>, auth: Auth, Path(id): Path<Uuid>) -> AppResult<Response> {
    let s = retry(&state, &auth, id).await?;
    Ok((StatusCode::ACCEPTED, Json(s)).into_response())
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

/// What an upload did with one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UploadOutcome {
    /// A new source.
    Created,
    /// An earlier upload of the same name got new content (parsed again).
    Updated,
    /// This KB already has a source with this content (the same name or another one):
    /// nothing was added.
    Duplicate,
}

/// Accept every `file` field of a multipart body into the KB.
async fn upload(state: &AppState, auth: &Auth, kb: Uuid, mut mp: Multipart) -> AppResult<Vec<(Source, UploadOutcome)>> {
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
        if let Some(existing) = queries::same_content(&mut tx, kb, &sha).await? {
            tx.commit().await?;
            out.push((existing, UploadOutcome::Duplicate));
            continue;
        }
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
        let outcome = if created {
            UploadOutcome::Created
        } else if s.sha256 != sha {
            s = queries::replace_upload_content(&mut tx, s.id, size, &sha).await?;
            UploadOutcome::Updated
        } else {
            UploadOutcome::Duplicate
        };
        if created || s.indexed_hash.as_deref() != Some(sha.as_str()) {
            super::queue::enqueue(&mut tx, auth.tenant_id, s.id).await?;
        }
        tx.commit().await?;
        out.push((s, outcome));
    }
    if out.is_empty() {
        return Err(AppError::invalid("file", "no file in the upload (multipart field `file`)"));
    }
    Ok(out)
}

/// One uploaded file: what became of it and its source.
#[derive(Serialize, schemars::JsonSchema)]
pub struct UploadResult {
    outcome: UploadOutcome,
    source: Source,
}

/// `POST /api/kbs/{id}/uploads`: the sources (`items`, as before) and each file's outcome.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Uploaded {
    items: Vec<Source>,
    results: Vec<UploadResult>,
}

pub async fn upload_sources(
    State(state): State<AppState>,
    auth: Auth,
    Path(kb): Path<Uuid>,
    mp: Multipart,
) -> AppResult<Response> {
    let done = upload(&state, &auth, kb, mp).await?;
    let any_new = done.iter().any(|(_, o)| *o == UploadOutcome::Created);
    let results: Vec<_> = done.iter().map(|(s, o)| UploadResult { outcome: *o, source: s.clone() }).collect();
    let items: Vec<Source> = done.into_iter().map(|(s, _)| s).collect();
    let status = if any_new { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(Uploaded { items, results })).into_response())
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

/// Why the register form's path (or directory) was refused, as the form says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathProblem {
    /// `..` or an absolute path leading out of the chosen directory.
    Outside,
    /// Nothing at that path (a typo).
    Missing,
    NotAFile,
    Unsupported,
    /// The directory chosen is not (or no longer) one of the user's.
    NoGrant,
    /// Any other refusal of the path (an unreadable file…).
    Unusable,
}

impl PathProblem {
    /// The refusals the form shows next to its path; anything else stays an error page.
    fn of(e: &AppError) -> Option<PathProblem> {
        match e {
            AppError::PathOutsideGrant => Some(PathProblem::Outside),
            AppError::Invalid { fields, .. } if fields.contains_key("grant_id") => Some(PathProblem::NoGrant),
            AppError::Invalid { fields, .. } => match fields.get("path").map(String::as_str)? {
                "no such file or directory" => Some(PathProblem::Missing),
                "not a regular file" => Some(PathProblem::NotAFile),
                m if m.starts_with("unsupported file kind") => Some(PathProblem::Unsupported),
                _ => Some(PathProblem::Unusable),
            },
            _ => None,
        }
    }

    fn key(self) -> &'static str {
        match self {
            PathProblem::Outside => "sources.path_error.outside",
            PathProblem::Missing => "sources.path_error.missing",
            PathProblem::NotAFile => "sources.path_error.not_a_file",
            PathProblem::Unsupported => "sources.path_error.unsupported",
            PathProblem::NoGrant => "sources.path_error.no_grant",
            PathProblem::Unusable => "sources.path_error.unusable",
        }
    }
}

/// Registering from the KB page: done → back to the page with a notice; a refused path (a
/// typo, a path leading out of the directory) → the same page, 422, the form filled in and the
/// message next to the path.
pub async fn register_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(kb): Path<Uuid>,
    Form(f): Form<RegisterForm>,
) -> AppResult<Response> {
    let grant_id = f.grant_id.as_deref().filter(|g| !g.is_empty()).map(Uuid::parse_str);
    let result = match grant_id {
        Some(Err(_)) => Err(AppError::invalid("grant_id", "choose a directory")),
        Some(Ok(g)) => register_from_form(&state, &page, kb, Some(g), &f).await,
        None => register_from_form(&state, &page, kb, None, &f).await,
    };
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            let Some(problem) = PathProblem::of(&e) else { return Err(e) };
            let form = super::pages::RegisterFormState {
                grant_id: grant_id.and_then(Result::ok),
                error: Some(page.ctx.t(problem.key())),
                path: f.path,
                include: f.include,
                exclude: f.exclude,
            };
            let mut resp = super::pages::kb_page_for(&state, page, kb, form).await?;
            *resp.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            return Ok(resp);
        }
    };
    let msg = page
        .ctx
        .t("sources.registered")
        .replace("{created}", &r.created_count.to_string())
        .replace("{total}", &page.ctx.count(r.items.len(), "file"))
        .replace("{skipped}", &r.skipped_count.to_string());
    flash(&session, msg).await?;
    Ok(Redirect::to(&format!("/kbs/{kb}")).into_response())
}

async fn register_from_form(
    state: &AppState,
    page: &Page,
    kb: Uuid,
    grant_id: Option<Uuid>,
    f: &RegisterForm,
) -> AppResult<Registered> {
    let (include, exclude) = (split_globs(&f.include), split_globs(&f.exclude));
    let mut tx = page.auth.tx(state).await?;
    let r = super::register(
        &mut tx,
        &state.config,
        &page.auth,
        RegisterRequest { kb_id: kb, grant_id, path: &f.path, include: &include, exclude: &exclude },
    )
    .await?;
    tx.commit().await?;
    Ok(r)
}

pub async fn upload_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(kb): Path<Uuid>,
    mp: Multipart,
) -> AppResult<Redirect> {
    let done = upload(&state, &page.auth, kb, mp).await?;
    let added = done.iter().filter(|(_, o)| *o != UploadOutcome::Duplicate).count();
    let dups: Vec<&str> = done.iter().filter(|(_, o)| *o == UploadOutcome::Duplicate).map(|(s, _)| s.file_name()).collect();
    let mut msg = page.ctx.t("sources.uploaded").replace("{n}", &page.ctx.count(added, "file"));
    if !dups.is_empty() {
        msg.push(' ');
        msg.push_str(&page.ctx.t("kbpage.already_in_kb").replace("{names}", &dups.join(", ")));
    }
    flash(&session, msg).await?;
    Ok(Redirect::to(&format!("/kbs/{kb}")))
}

/// `GET /sources/{id}/delete`: what removing the source does, and the button that does it.
pub async fn delete_confirm(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    let (s, impact) = impact(&state, &page.auth, id).await?;
    crate::web::render(crate::web::confirm::ConfirmPage {
        title: page.ctx.t("kbpage.remove_source_title").replace("{name}", s.file_name()),
        lines: vec![super::remove_message(&page.ctx, &s, &impact)],
        action: format!("/sources/{id}/delete"),
        ok_label: page.ctx.t("common.remove"),
        cancel_url: format!("/kbs/{}", s.kb_id),
        ctx: page.ctx,
    })
}

pub async fn delete_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    let s = delete(&state, &page.auth, id).await?;
    let days = kbs::grace_days(&page.ctx, state.config.delete_grace);
    flash(&session, page.ctx.t("kbpage.source_removed").replace("{name}", s.file_name()).replace("{days}", &days)).await?;
    Ok(Redirect::to(&format!("/kbs/{}#removed", s.kb_id)))
}

pub async fn restore_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    let s = restore(&state, &page.auth, id).await?;
    flash(&session, page.ctx.t("kbpage.source_restored").replace("{name}", s.file_name())).await?;
    Ok(Redirect::to(&format!("/kbs/{}", s.kb_id)))
}

pub async fn retry_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
) -> AppResult<Redirect> {
    let s = retry(&state, &page.auth, id).await?;
    flash(&session, page.ctx.t("kbpage.retry_queued").replace("{name}", s.file_name())).await?;
    Ok(Redirect::to(&format!("/kbs/{}#sources", s.kb_id)))
}
