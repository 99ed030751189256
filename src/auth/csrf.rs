//! CSRF protection (synchroniser token kept in the session).
//!
//! Every state-changing request authenticated by cookie must carry the session's token, in the
//! `x-csrf-token` header, a `csrf_token` query parameter (multipart forms) or a `csrf_token`
//! form field, and must not come from another site (`Sec-Fetch-Site: cross-site`, or an
//! `Origin` other than the request's host). Only a request authenticated by a *valid* bearer
//! token is exempt, and such a request never acts as the cookie's user (`SignedIn` refuses
//! it): another `Authorization` scheme, or a wrong token, does not skip the check.

use axum::{
    body::{Body, to_bytes},
    extract::{Request, State},
    http::{
        HeaderMap, Method,
        header::{CONTENT_TYPE, HOST, ORIGIN},
    },
    middleware::Next,
    response::{IntoResponse, Response},
};
use base64::Engine;
use tower_sessions::Session;

use crate::{error::AppError, state::AppState};

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

fn from_pairs(raw: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw).ok()?.into_iter().find_map(|(k, v)| (k == FIELD).then_some(v))
}

/// Whether the request carries `Authorization: Bearer <token>` with a token that is valid now.
async fn valid_bearer(state: &AppState, headers: &HeaderMap) -> Result<bool, AppError> {
    let Some(token) = super::bearer_token(headers) else { return Ok(false) };
    let Some(tenant) = super::tokens::tenant_of(token) else { return Ok(false) };
    let mut tx = crate::db::TenantTx::begin(&state.pool, tenant, crate::db::Scope::System).await?;
    let ok = super::tokens::authenticate(&mut tx, token).await?.is_some();
    tx.commit().await?;
    Ok(ok)
}

/// A request a browser sent from another site: `Sec-Fetch-Site: cross-site`, or an `Origin`
/// whose host is not the request's.
fn cross_site(headers: &HeaderMap) -> bool {
    let header = |h| headers.get(h).and_then(|v: &axum::http::HeaderValue| v.to_str().ok());
    if header("sec-fetch-site") == Some("cross-site") {
        return true;
    }
    match (header(ORIGIN.as_str()), header(HOST.as_str())) {
        (Some("null"), _) => true,
        (Some(origin), Some(host)) => reqwest::Url::parse(origin)
            .ok()
            .and_then(|u| u.host_str().map(|h| (h.to_string(), u.port())))
            .is_none_or(|(h, port)| {
                let authority = match port {
                    Some(p) => format!("{h}:{p}"),
                    None => h,
                };
                !authority.eq_ignore_ascii_case(host)
            }),
        _ => false,
    }
}

pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    if super::bearer_token(req.headers()).is_some() {
        // A bearer request is its token's, valid or not: it never falls back to the cookie.
        return match valid_bearer(&state, req.headers()).await {
            Ok(true) => next.run(req).await,
            Ok(false) => AppError::Unauthorized.into_response(),
            Err(e) => e.into_response(),
        };
    }
    if cross_site(req.headers()) {
        return AppError::CsrfFailed.into_response();
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
        Some(p) if crate::platform::secret::constant_time_eq(p.as_bytes(), expected.as_bytes()) => next.run(req).await,
        _ => AppError::CsrfFailed.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn requests_from_other_sites_are_recognised() {
        assert!(!cross_site(&headers(&[("host", "mnote.example:8080"), ("origin", "http://mnote.example:8080")])));
        assert!(!cross_site(&headers(&[("host", "mnote.example"), ("origin", "https://mnote.example")])));
        assert!(!cross_site(&headers(&[("host", "mnote.example"), ("sec-fetch-site", "same-origin")])));
        assert!(!cross_site(&headers(&[("host", "mnote.example")])), "no browser headers: a CLI or test client");
        assert!(cross_site(&headers(&[("host", "mnote.example"), ("origin", "https://evil.example")])));
        assert!(cross_site(&headers(&[("host", "mnote.example:8080"), ("origin", "http://mnote.example:9090")])));
        assert!(cross_site(&headers(&[("host", "mnote.example"), ("origin", "null")])));
        assert!(cross_site(&headers(&[("host", "mnote.example"), ("sec-fetch-site", "cross-site")])));
    }
}
