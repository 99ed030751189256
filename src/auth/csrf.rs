//! CSRF protection (synchroniser token kept in the session).
//!
//! An anonymous visitor with nothing in their session (the sign-in and setup forms) gets no
//! session row just for a form token (issue #14 item 11: every idle `GET /login` wrote one):
//! their token is a random value in the `mnote_csrf` cookie (HttpOnly, SameSite=Strict), set
//! when a page first uses it, and their forms are checked against that cookie (double submit:
//! another site can neither read nor set it). A signed-in session always uses its stored token.
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
        HeaderMap, HeaderValue, Method,
        header::{CONTENT_TYPE, COOKIE as COOKIE_HEADER, HOST, ORIGIN, SET_COOKIE},
    },
    middleware::Next,
    response::{IntoResponse, Response},
};
use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
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

/// The cookie holding an anonymous visitor's token.
pub const COOKIE: &str = "mnote_csrf";

/// The browser token of the request being served: the `mnote_csrf` cookie's value, or a new
/// one that is set as the cookie if a page uses it. Set by [`guard`] around every request.
struct BrowserToken {
    value: String,
    from_cookie: bool,
    used: AtomicBool,
}

tokio::task_local! {
    static BROWSER: Arc<BrowserToken>;
}

fn random_token() -> Result<String, AppError> {
    let mut raw = [0u8; 24];
    getrandom::fill(&mut raw).map_err(|e| AppError::Internal(anyhow::anyhow!("OS random source: {e}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw))
}

/// The CSRF token for the forms of the page being rendered: the session's (created on first
/// use), or — while the session holds nothing and is not stored — the browser cookie's, so an
/// anonymous page view writes no session row (an anonymous error page gets no token at all).
pub async fn token(session: &Session) -> Result<String, AppError> {
    if let Some(t) = session.get::<String>(KEY).await.map_err(super::session_err)? {
        return Ok(t);
    }
    if session.id().is_none() && session.is_empty().await {
        let browser = BROWSER.try_with(|b| {
            b.used.store(true, Ordering::Relaxed);
            b.value.clone()
        });
        // Outside the guard (the HTML error pages render after it): no token rather than a
        // stored one, which would replace the token the visitor's open sign-in form carries.
        return Ok(browser.unwrap_or_default());
    }
    let t = random_token()?;
    session.insert(KEY, &t).await.map_err(super::session_err)?;
    Ok(t)
}

/// The value of the `mnote_csrf` cookie, if it looks like one of ours.
fn browser_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(k, v)| (k == COOKIE).then(|| v.trim().to_string()))
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
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

/// Check the request (see the module docs) and serve it with its browser token in scope; set
/// the `mnote_csrf` cookie when a page used a token the browser does not have yet.
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let cookie = browser_cookie(req.headers());
    let value = match &cookie {
        Some(v) => v.clone(),
        None => match random_token() {
            Ok(v) => v,
            Err(e) => return e.into_response(),
        },
    };
    let browser = Arc::new(BrowserToken { value, from_cookie: cookie.is_some(), used: AtomicBool::new(false) });
    let secure = if state.config.cookie_secure { "; Secure" } else { "" };
    let mut resp = BROWSER.scope(browser.clone(), check(state, req, next, cookie)).await;
    if browser.used.load(Ordering::Relaxed) && !browser.from_cookie {
        let c = format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{secure}", browser.value);
        if let Ok(v) = HeaderValue::from_str(&c) {
            resp.headers_mut().append(SET_COOKIE, v);
        }
    }
    resp
}

async fn check(state: AppState, req: Request, next: Next, cookie: Option<String>) -> Response {
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
        // No stored token: an anonymous visitor's forms carry the browser cookie's. Never for
        // a signed-in session (its token is in the session, rotated at sign-in).
        Ok(None) => match (session.get::<serde_json::Value>(super::USER_ID).await, cookie) {
            (Ok(None), Some(c)) => c,
            (Err(e), _) => return super::session_err(e).into_response(),
            _ => return AppError::CsrfFailed.into_response(),
        },
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
