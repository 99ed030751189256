//! `/mcp` over HTTP: the rmcp streamable HTTP service (stateless, JSON responses), behind a
//! bearer-token guard, with every error of the HTTP layer as our JSON error body.

use std::sync::Arc;

use axum::{
    Router,
    extract::{FromRequestParts, Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::{Next, from_fn, from_fn_with_state},
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::never::NeverSessionManager,
};
use serde_json::json;

use super::caller::Caller;
use super::run_token;
use super::server::{McpServer, Shared};
use crate::{
    auth::{Auth, bearer_token},
    config::Config,
    error::AppError,
    state::AppState,
};

/// `/mcp`, to be merged outside the session, CSRF and HTML-error layers.
pub fn router(state: &AppState) -> Router<AppState> {
    let shared = Arc::new(Shared::new(state.clone()));
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(shared.clone())),
        Arc::new(NeverSessionManager::default()),
        transport_config(&state.config),
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(from_fn(json_errors))
        .layer(from_fn_with_state(state.clone(), guard))
        .merge(discovery())
}

/// The OAuth discovery paths MCP clients probe after a `401` (RFC 9728 protected-resource
/// metadata, RFC 8414 authorization-server metadata, OpenID Connect discovery, at the root and
/// under `/mcp`) and dynamic client registration (`POST /register`): this server runs no OAuth
/// authorization server, so each answers at once with a JSON `404` saying where tokens come
/// from, and the client stops there instead of trying the next guess.
const DISCOVERY_PATHS: [&str; 9] = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
    "/.well-known/openid-configuration/mcp",
    "/mcp/.well-known/openid-configuration",
    "/mcp/.well-known/oauth-authorization-server",
    "/register",
];

/// How to get a token, for every refusal of `/mcp` and every discovery path.
const TOKEN_HELP: &str = "this server takes API tokens issued out of band, not OAuth: create one in Settings → API tokens \
    (/settings/tokens) or with `mnote token create`, and send it as `Authorization: Bearer mnote_…`";

fn discovery() -> Router<AppState> {
    async fn no_oauth() -> Response {
        (StatusCode::NOT_FOUND, axum::Json(json!({"error": {"code": "not_found", "message": TOKEN_HELP}}))).into_response()
    }
    DISCOVERY_PATHS.iter().fold(Router::new(), |r, p| r.route(p, axum::routing::any(no_oauth)))
}

/// Stateless JSON (no sessions: any replica answers any request), the request size limit,
/// and the Host allow-list: loopback and the host of `MNOTE_PUBLIC_URL`.
fn transport_config(cfg: &Config) -> StreamableHttpServerConfig {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if let Some(host) =
        cfg.public_url.as_deref().and_then(|u| u.parse::<axum::http::Uri>().ok()).and_then(|u| u.host().map(str::to_string))
    {
        hosts.push(host.trim_start_matches('[').trim_end_matches(']').to_string());
    }
    StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(cfg.mcp_max_body_bytes)
        .with_allowed_hosts(hosts)
}

/// `host[:port]` with the scheme's default port made explicit, lowercased.
fn authority(host: &str, default_port: u16) -> Option<(String, u16)> {
    let a: axum::http::uri::Authority = host.trim().parse().ok()?;
    let name = a.host().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    Some((name, a.port_u16().unwrap_or(default_port)))
}

/// The `Host` values this server answers `/mcp` for: the host and port of `MNOTE_PUBLIC_URL`,
/// and the address it listens on (for a loopback or unspecified address: the loopback names,
/// on that port). Anything else (another port of the same machine, a rebound DNS name) is refused.
fn host_allowed(cfg: &Config, host: &str) -> bool {
    let Some((name, port)) = authority(host, 80) else { return false };
    if let Some(public) = cfg.public_url.as_deref().and_then(|u| u.parse::<axum::http::Uri>().ok()) {
        let default = if public.scheme_str() == Some("https") { 443 } else { 80 };
        if let Some(a) = public.authority()
            && authority(a.as_str(), default).is_some_and(|(n, p)| n == name && p == port)
        {
            return true;
        }
    }
    let bound = cfg.bind;
    if port != bound.port() {
        return false;
    }
    let ip = bound.ip();
    if ip.is_loopback() || ip.is_unspecified() {
        return matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1") || name == ip.to_string();
    }
    name == ip.to_string()
}

/// What citation URLs start with: `MNOTE_PUBLIC_URL`, else the address the server listens on
/// (loopback for an unspecified one); never the request's `Host`.
fn citation_base(cfg: &Config) -> String {
    cfg.public_url.clone().unwrap_or_else(|| cfg.local_base_url())
}

/// A refused credential: `401` with our error body saying how to get a token, and a
/// `WWW-Authenticate: Bearer` challenge (RFC 6750: `invalid_token` when a token was sent, no
/// error code when none was) with the same description.
fn refused(e: AppError, token_sent: bool) -> Response {
    let code = e.code();
    let message = match e {
        AppError::TokenExpired => format!("this API token has expired; {TOKEN_HELP}"),
        _ if token_sent => format!("this API token is not valid here (unknown, revoked or of another server); {TOKEN_HELP}"),
        _ => format!("an API token is required; {TOKEN_HELP}"),
    };
    let mut r = (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": {"code": code, "message": message}}))).into_response();
    // A header value is visible ASCII: the description without the non-ASCII of the message.
    let ascii: String =
        message.replace('→', "->").replace('…', "...").chars().filter(|c| c.is_ascii() && *c != '"' && *c != '\\').collect();
    let challenge = if token_sent {
        format!("Bearer realm=\"mnote\", error=\"invalid_token\", error_description=\"{ascii}\"")
    } else {
        format!("Bearer realm=\"mnote\", error_description=\"{ascii}\"")
    };
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// Bearer tokens only: no token (a session cookie does not count) or a bad, revoked or
/// foreign one is `401 unauthorized`; a body over the limit is `413 body_too_large`.
async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let host =
        parts.headers.get(header::HOST).and_then(|h| h.to_str().ok()).or_else(|| parts.uri.authority().map(|a| a.as_str()));
    if !host.is_some_and(|h| host_allowed(&state.config, h)) {
        return AppError::forbidden(
            "this Host is not this server (DNS rebinding protection): use MNOTE_PUBLIC_URL or the address the server listens on",
        )
        .into_response();
    }
    if bearer_token(&parts.headers).is_none() {
        return refused(AppError::Unauthorized, parts.headers.contains_key(header::AUTHORIZATION));
    }
    let limit = state.config.mcp_max_body_bytes;
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return AppError::BodyTooLarge { limit: limit as u64 }.into_response();
    }
    let authenticated = match bearer_token(&parts.headers).filter(|t| run_token::is_run_token(t)) {
        Some(token) => run_token::authenticate(&state, token).await.map(|(a, run)| (a, Some(run))),
        None => Auth::from_request_parts(&mut parts, &state).await.map(|a| (a, None)),
    };
    let (auth, run) = match authenticated {
        Ok(a) => a,
        Err(e @ (AppError::Unauthorized | AppError::TokenExpired)) => return refused(e, true),
        Err(e) => return e.into_response(),
    };
    let limit_key = format!("{}:{}", auth.tenant_id, auth.user_id);
    parts.extensions.insert(Caller { auth, limit_key, citation_base: citation_base(&state.config), run });
    next.run(Request::from_parts(parts, body)).await
}

/// The transport's own refusals (wrong Host, wrong Accept, body too large, GET/DELETE in
/// stateless mode, …) come as plain text: give them our JSON error body, same status.
async fn json_errors(req: Request, next: Next) -> Response {
    let r = next.run(req).await;
    let status = r.status();
    let is_json =
        r.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
    if status.is_success() || is_json || status.is_informational() || status.is_redirection() {
        return r;
    }
    let (parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.map(|b| String::from_utf8_lossy(&b).trim().to_string()).unwrap_or_default();
    let code = match status {
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::CONFLICT => "conflict",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::TOO_MANY_REQUESTS => "rate_limited",
        s if s.is_server_error() => "internal",
        _ => "invalid_input",
    };
    let message =
        if code == "internal" || text.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { text };
    let mut out = (status, axum::Json(json!({"error": {"code": code, "message": message}}))).into_response();
    for name in [header::ALLOW, header::WWW_AUTHENTICATE, header::RETRY_AFTER] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}
