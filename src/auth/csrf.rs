//! CSRF protection (synchroniser token kept in the session).
//!
//! Every state-changing request authenticated by cookie must carry the session's token, in the
//! `x-csrf-token` header, a `csrf_token` query parameter (multipart forms) or a `csrf_token`
//! form field. Requests with an `Authorization` header are exempt: browsers never add one on
//! their own, and the bearer token itself is checked by the `Auth` extractor.

use axum::{
    body::{Body, to_bytes},
    extract::Request,
    http::{Method, header::CONTENT_TYPE},
    middleware::Next,
    response::{IntoResponse, Response},
};
use base64::Engine;
use tower_sessions::Session;

use crate::error::AppError;

pub const KEY: &str = "csrf";
pub const FIELD: &str = "csrf_token";
pub const HEADER: &str = "x-csrf-token";
const MAX_FORM_BYTES: usize = 1024 * 1024;

/// The session's CSRF token, created on first use.
pub async fn token(session: &Session) -> Result<String, AppError> {
    if let Some(t) = session.get::<String>(KEY).await.map_err(super::session_err)? {
        return Ok(t);
    }
    let mut raw = [0u8; 24];
    getrandom::fill(&mut raw).expect("OS random source");
    let t = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    session.insert(KEY, &t).await.map_err(super::session_err)?;
    Ok(t)
}

fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn from_pairs(raw: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw).ok()?.into_iter().find_map(|(k, v)| (k == FIELD).then_some(v))
}

pub async fn guard(req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        || req.headers().contains_key(axum::http::header::AUTHORIZATION)
    {
        return next.run(req).await;
    }
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        return AppError::CsrfFailed.into_response();
    };
    let expected = match session.get::<String>(KEY).await {
        Ok(Some(t)) => t,
        Ok(None) => return AppError::CsrfFailed.into_response(),
        Err(e) => return super::session_err(e).into_response(),
    };
    let mut provided = req
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().query().and_then(from_pairs));
    let is_form = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/x-www-form-urlencoded"));
    let req = if provided.is_none() && is_form {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
            return AppError::invalid("body", "form too large").into_response();
        };
        provided = from_pairs(&String::from_utf8_lossy(&bytes));
        Request::from_parts(parts, Body::from(bytes))
    } else {
        req
    };
    match provided {
        Some(p) if same(&p, &expected) => next.run(req).await,
        _ => AppError::CsrfFailed.into_response(),
    }
}
