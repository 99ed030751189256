//! CSRF protection (synchroniser token kept in the session).
//!
//! Every state-changing request authenticated by cookie must carry the session's token, in the
//! `x-csrf-token` header, a `csrf_token` form field, or — for multipart forms (uploads) — a
//! `csrf_token` field that is the body's *first* part (read from the start of the stream; the
//! rest of the upload is not buffered). Never in the query string: URLs end up in logs,
//! history and `Referer` headers (issue #14 item 7). It must not come from another site (`Sec-Fetch-Site: cross-site`, or an
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
/// How far into a multipart body the `csrf_token` part must have ended.
const MAX_MULTIPART_PREFIX: usize = 16 * 1024;

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

/// The `boundary` parameter of a `multipart/form-data` content type.
fn multipart_boundary(content_type: &str) -> Option<String> {
    let (mime, params) = content_type.split_once(';')?;
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case("boundary").then(|| v.trim().trim_matches('"').to_string()).filter(|b| !b.is_empty())
    })
}

/// What the start of a multipart body says about its first part.
#[derive(Debug, PartialEq, Eq)]
enum FirstPart {
    /// Not enough bytes yet.
    Incomplete,
    /// The first part is the `csrf_token` field, with this value.
    Token(String),
    /// The first part is something else (or the body is not well formed).
    Other,
}

/// Parse the first part of a multipart body from its first bytes.
fn parse_first_part(buf: &[u8], boundary: &str) -> FirstPart {
    let open = format!("--{boundary}\r\n");
    let Some(start) = find(buf, open.as_bytes()) else {
        return if buf.len() < open.len() + 2 { FirstPart::Incomplete } else { FirstPart::Other };
    };
    let rest = &buf[start + open.len()..];
    let Some(head_end) = find(rest, b"\r\n\r\n") else { return FirstPart::Incomplete };
    let Ok(head) = std::str::from_utf8(&rest[..head_end]) else { return FirstPart::Other };
    let is_token = head.split("\r\n").any(|line| {
        let Some((name, value)) = line.split_once(':') else { return false };
        name.trim().eq_ignore_ascii_case("content-disposition")
            && value
                .split(';')
                .skip(1)
                .any(|p| p.split_once('=').is_some_and(|(k, v)| k.trim() == "name" && v.trim().trim_matches('"') == FIELD))
    });
    if !is_token {
        return FirstPart::Other;
    }
    let value = &rest[head_end + 4..];
    let close = format!("\r\n--{boundary}");
    match find(value, close.as_bytes()) {
        Some(end) => match std::str::from_utf8(&value[..end]) {
            Ok(v) => FirstPart::Token(v.to_string()),
            Err(_) => FirstPart::Other,
        },
        None => FirstPart::Incomplete,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Read the start of a multipart body (at most [`MAX_MULTIPART_PREFIX`] bytes) for a first
/// `csrf_token` part; give back the whole body, the bytes read put back in front of the rest
/// of the stream, so an upload is never buffered.
async fn first_multipart_field(body: Body, boundary: &str) -> Result<(Option<String>, Body), axum::Error> {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    let token = loop {
        match parse_first_part(&buf, boundary) {
            FirstPart::Token(t) => break Some(t),
            FirstPart::Other => break None,
            FirstPart::Incomplete if buf.len() >= MAX_MULTIPART_PREFIX => break None,
            FirstPart::Incomplete => match stream.next().await {
                Some(chunk) => buf.extend_from_slice(&chunk?),
                None => break None,
            },
        }
    };
    let prefix = futures_util::stream::once(async move { Ok::<_, axum::Error>(axum::body::Bytes::from(buf)) });
    Ok((token, Body::from_stream(prefix.chain(stream))))
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
    let mut provided = req.headers().get(HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    let content_type = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let req = if provided.is_some() {
        req
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
            return AppError::invalid("body", "form too large").into_response();
        };
        provided = from_pairs(&String::from_utf8_lossy(&bytes));
        Request::from_parts(parts, Body::from(bytes))
    } else if let Some(boundary) = multipart_boundary(&content_type) {
        let (parts, body) = req.into_parts();
        let (token, body) = match first_multipart_field(body, &boundary).await {
            Ok(r) => r,
            Err(e) => return AppError::invalid("body", format!("reading the form: {e}")).into_response(),
        };
        provided = token;
        Request::from_parts(parts, body)
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
    fn the_token_is_read_from_the_first_multipart_part_only() {
        assert_eq!(multipart_boundary("multipart/form-data; boundary=----x1"), Some("----x1".into()));
        assert_eq!(multipart_boundary("Multipart/Form-Data; boundary=\"a b\""), Some("a b".into()));
        assert_eq!(multipart_boundary("application/json"), None);
        let body = "--B\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\ntok\r\n--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.md\"\r\n\r\n# a\r\n--B--\r\n";
        assert_eq!(parse_first_part(body.as_bytes(), "B"), FirstPart::Token("tok".into()));
        assert_eq!(parse_first_part(&body.as_bytes()[..50], "B"), FirstPart::Incomplete);
        let file_first = "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"csrf_token\"\r\n\r\nx\r\n--B--\r\n";
        assert_eq!(parse_first_part(file_first.as_bytes(), "B"), FirstPart::Other);
        assert_eq!(parse_first_part(b"garbage garbage garbage", "B"), FirstPart::Other);
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
