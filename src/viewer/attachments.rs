//! `GET /sources/{id}/attachments/{part}`: one attachment of an e-mail as a download under its
//! own name — the original a cited attachment block came from (a PDF at its page, a workbook,
//! a deck), or one the service cannot read (a zip), listed in the message. `part` is the block
//! ids' prefix (`a2`, `a2_a1` through a forwarded message). Never rendered here: always
//! `Content-Disposition: attachment`, `application/octet-stream`, `nosniff`, sandboxed.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use crate::auth::Auth;
use crate::error::{AppError, AppResult};
use crate::evidence::SourceKind;
use crate::state::AppState;

pub async fn attachment(
    State(state): State<AppState>,
    auth: Auth,
    ip: crate::auth::ClientIp,
    Path((id, part)): Path<(Uuid, String)>,
) -> AppResult<Response> {
    let mut tx = auth.read_tx(&state).await?;
    let source = super::visible_source(&mut tx, id).await?;
    if source.kind != SourceKind::Email {
        return Err(AppError::NotFound);
    }
    let file = super::original_file(&mut tx, &state.config, &source).await?;
    tx.commit().await?;
    let Some(file) = file else { return Err(super::handlers::file_missing(&source)) };
    let max = state.config.parse_max_bytes;
    let found = tokio::task::spawn_blocking(move || -> Result<Option<(String, Vec<u8>)>, AppError> {
        use std::io::Read as _;
        let mut bytes = Vec::new();
        file.take(max + 1).read_to_end(&mut bytes).map_err(|e| AppError::Internal(e.into()))?;
        if bytes.len() as u64 > max {
            return Err(AppError::TooLarge { limit: max });
        }
        // The original no longer reads as a message (changed since it was indexed).
        crate::ingest::email::attachment_of(&bytes, &part).map_err(|e| AppError::Conflict(format!("{}: {}", e.code, e.message)))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    let Some((name, bytes)) = found else { return Err(AppError::NotFound) };
    // A download of an original, as `/download` is: audited.
    let mut tx = auth.tx(&state).await?;
    let target = format!("source:{id} {} › {name}", source.file_name());
    auth.audit(&mut tx, &ip, crate::audit::Action::SourceDownload, target, "attachment").await?;
    tx.commit().await?;
    let mut resp = (axum::http::StatusCode::OK, Body::from(bytes)).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    if let Ok(v) = HeaderValue::from_str(&super::content_disposition("attachment", &name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("default-src 'none'; sandbox"));
    Ok(resp)
}
