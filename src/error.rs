//! One error type for the whole service. It renders as `{"error":{code,message}}` JSON; the
//! `web::html_errors` layer (on the page routes only) turns it into an HTML page.

use std::collections::BTreeMap;

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("authentication required")]
    Unauthorized,
    /// `token_expired` (401): an API token past its `expires_at`.
    #[error("this API token has expired; create a new one")]
    TokenExpired,
    #[error("{0}")]
    Forbidden(String),
    #[error("CSRF token missing or invalid")]
    CsrfFailed,
    /// Signed in, but no team chosen yet (a user in several tenants picks one after login).
    #[error("choose a team first (/tenants)")]
    NoTenant,
    #[error("path is outside every directory granted to you")]
    PathOutsideGrant,
    /// `path_outside_grant` (403) for a team the operator gave no grantable roots yet
    /// (MNOTE_TENANT_ROOTS=strict): the message names the command that fixes it.
    #[error("this team has no grantable roots; the operator adds one with `mnote tenant roots add --tenant <team> --path <dir>`")]
    NoTenantRoots,
    /// `hard_link_refused` (403): a granted file with several hard links outside the data
    /// directory could be a second name of a file outside the grant (MNOTE_ALLOW_HARD_LINKS).
    #[error("the file has several hard links; the server refuses to read it")]
    HardLinkRefused,
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("{message}")]
    Invalid { message: String, fields: BTreeMap<String, String> },
    #[error("too many attempts; try again in {retry_after_secs} seconds")]
    RateLimited { retry_after_secs: u64 },
    /// A per-user limit on live things (`too_many_tokens`, `too_many_streams`, `too_many_runs`;
    /// 429): the caller must let one go (revoke a token, close a stream, wait for a run).
    #[error("{message}")]
    LimitReached { code: &'static str, message: String },
    #[error("upload exceeds the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    /// A JSON body over [`JSON_BODY_LIMIT`] (`body_too_large`, 413).
    #[error("request body exceeds the limit of {limit} bytes")]
    BodyTooLarge { limit: u64 },
    #[error("{0}")]
    Upstream(String),
    /// A model provider's failure with its own stable code (`llm_unauthorized`,
    /// `llm_unavailable`, `llm_timeout`, `llm_bad_response`): 502, a timeout 504.
    #[error("{message}")]
    Provider { code: &'static str, message: String },
    /// `410 Gone` (`file_missing`): the source is known but its original file is gone.
    #[error("{0}")]
    FileMissing(String),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type AppResult<T> = Result<T, AppError>;

/// What the HTML error middleware needs to render a page (kept in response extensions).
#[derive(Clone, Debug)]
pub struct ErrorInfo {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Where a browser should go instead of seeing an error page.
    pub redirect_to: Option<&'static str>,
}

impl AppError {
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        AppError::Invalid { fields: BTreeMap::from([(field.to_string(), message.clone())]), message }
    }

    pub fn limit(code: &'static str, message: impl Into<String>) -> Self {
        AppError::LimitReached { code, message: message.into() }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        AppError::Forbidden(message.into())
    }

    pub fn code(&self) -> &'static str {
        match self {
            AppError::Unauthorized => "unauthorized",
            AppError::TokenExpired => "token_expired",
            AppError::Forbidden(_) | AppError::NoTenant => "forbidden",
            AppError::CsrfFailed => "csrf_failed",
            AppError::PathOutsideGrant | AppError::NoTenantRoots => "path_outside_grant",
            AppError::HardLinkRefused => "hard_link_refused",
            AppError::NotFound => "not_found",
            AppError::Conflict(_) => "conflict",
            AppError::Invalid { .. } => "invalid_input",
            AppError::Sqlx(e) if is_invalid_text(e) => "invalid_input",
            AppError::RateLimited { .. } => "rate_limited",
            AppError::LimitReached { code, .. } => code,
            AppError::TooLarge { .. } => "file_too_large",
            AppError::BodyTooLarge { .. } => "body_too_large",
            AppError::Upstream(_) => "upstream_unavailable",
            AppError::Provider { code, .. } => code,
            AppError::FileMissing(_) => "file_missing",
            AppError::Sqlx(e) if is_unavailable(e) => "upstream_unavailable",
            AppError::Sqlx(sqlx::Error::ColumnDecode { .. }) => "stored_value_unreadable",
            AppError::Sqlx(_) | AppError::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Unauthorized | AppError::TokenExpired => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_)
            | AppError::NoTenant
            | AppError::CsrfFailed
            | AppError::PathOutsideGrant
            | AppError::NoTenantRoots
            | AppError::HardLinkRefused => StatusCode::FORBIDDEN,
            AppError::NotFound => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Sqlx(e) if is_invalid_text(e) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::RateLimited { .. } | AppError::LimitReached { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::TooLarge { .. } | AppError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::Upstream(_) => StatusCode::BAD_GATEWAY,
            AppError::Provider { code: "llm_timeout", .. } => StatusCode::GATEWAY_TIMEOUT,
            AppError::Provider { .. } => StatusCode::BAD_GATEWAY,
            AppError::FileMissing(_) => StatusCode::GONE,
            AppError::Sqlx(e) if is_unavailable(e) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Sqlx(_) | AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message shown to the client: server-side failures stay opaque.
    pub fn public_message(&self) -> String {
        match self.code() {
            "internal" => "internal error".into(),
            "invalid_input" if matches!(self, AppError::Sqlx(_)) => NUL_MESSAGE.into(),
            "stored_value_unreadable" => "a stored value of this record does not read as its type".into(),
            "upstream_unavailable" if matches!(self, AppError::Sqlx(_)) => {
                "the database is unavailable; try again shortly".into()
            }
            _ => self.to_string(),
        }
    }
}

/// What a client is told about text Postgres cannot store.
const NUL_MESSAGE: &str = "text must not contain NUL (\\u0000) characters";

/// The database is not there for this request: no connection in time, a broken one, or a
/// backend ended under it (`57P01` admin shutdown / `pg_terminate_backend`, `57P02` crash,
/// `57P03` not accepting connections, class `08` connection exceptions).
fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(d) => {
            d.code().is_some_and(|c| matches!(c.as_ref(), "57P01" | "57P02" | "57P03") || c.starts_with("08"))
        }
        _ => false,
    }
}

/// Text Postgres refuses to store: a NUL character (`22021` in `text`, `22P05` in `jsonb`).
/// Validators reject NUL where JSON enters ([`ApiJson`]); this catches every other path
/// (query strings, path segments, forms).
fn is_invalid_text(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.code().is_some_and(|c| matches!(c.as_ref(), "22021" | "22P05")))
}

/// The JSON pointer of the first string (or key) in `v` that holds a NUL character.
fn nul_at(v: &serde_json::Value, at: &str) -> Option<String> {
    match v {
        serde_json::Value::String(s) => s.contains('\0').then(|| at.to_string()),
        serde_json::Value::Array(items) => items.iter().enumerate().find_map(|(i, x)| nul_at(x, &format!("{at}/{i}"))),
        serde_json::Value::Object(m) => m.iter().find_map(|(k, x)| {
            let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
            if k.contains('\0') { Some(here) } else { nul_at(x, &here) }
        }),
        _ => None,
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        if status.is_server_error() {
            tracing::error!(error.code = code, error = ?self, "request failed: {self:#}");
        }
        let message = self.public_message();
        let fields = match &self {
            AppError::Invalid { fields, .. } => Some(fields.clone()),
            _ => None,
        };
        let body = ErrorBody { error: ErrorDetail { code: code.to_string(), message: message.clone(), fields } };
        let mut resp = (status, Json(body)).into_response();
        if let AppError::RateLimited { retry_after_secs } = &self {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                retry_after_secs.to_string().parse().expect("digits are a valid header"),
            );
        }
        let redirect_to = match &self {
            AppError::Unauthorized => Some("/login"),
            AppError::NoTenant => Some("/tenants"),
            _ => None,
        };
        resp.extensions_mut().insert(ErrorInfo { status, code, message, redirect_to });
        resp
    }
}

/// The body of every error answer: `{"error": {"code", "message"}}` (and `fields` for
/// `invalid_input`).
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "Error")]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct ErrorDetail {
    /// The stable code (`not_found`, `invalid_input`, …): what clients branch on.
    pub code: String,
    /// For people; server-side failures say only `internal error`.
    pub message: String,
    /// `invalid_input` from a validator: the message of each invalid field, by field name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fields: Option<BTreeMap<String, String>>,
}

/// Map a constraint violation to a client error at the call site; other errors pass through.
/// Works on `sqlx` results and on `AppResult`s, so the mappings chain.
pub trait ResultExt<T>: Sized {
    fn on_constraint(self, kind: sqlx::error::ErrorKind, err: impl FnOnce() -> AppError) -> AppResult<T>;

    /// A unique violation becomes `Conflict(message)`.
    fn on_unique(self, message: &str) -> AppResult<T> {
        self.on_constraint(sqlx::error::ErrorKind::UniqueViolation, || AppError::Conflict(message.to_string()))
    }

    /// A foreign-key violation becomes `err()`.
    fn on_foreign_key(self, err: impl FnOnce() -> AppError) -> AppResult<T> {
        self.on_constraint(sqlx::error::ErrorKind::ForeignKeyViolation, err)
    }
}

impl<T, E: Into<AppError>> ResultExt<T> for Result<T, E> {
    fn on_constraint(self, kind: sqlx::error::ErrorKind, err: impl FnOnce() -> AppError) -> AppResult<T> {
        self.map_err(|e| match e.into() {
            AppError::Sqlx(sqlx::Error::Database(d)) if d.kind() == kind => err(),
            other => other,
        })
    }
}

/// A list answer of the API: `{"items": [...]}`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "{T}List")]
pub struct Items<T> {
    pub items: Vec<T>,
}

impl<T> From<Vec<T>> for Items<T> {
    fn from(items: Vec<T>) -> Self {
        Items { items }
    }
}

/// `Json<T>` whose rejections (bad JSON, wrong fields, wrong content type) are our
/// `invalid_input` error instead of axum's plain-text answer.
pub struct ApiJson<T>(pub T);

/// The largest JSON body accepted (axum's default body limit).
pub const JSON_BODY_LIMIT: usize = 2 * 1024 * 1024;

impl<T, S> axum::extract::FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::Bytes::from_request(axum::extract::Request::from_parts(parts.clone(), body), state).await {
            Ok(b) => b,
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(AppError::BodyTooLarge { limit: JSON_BODY_LIMIT as u64 });
            }
            Err(rejection) => return Err(AppError::Invalid { message: rejection.body_text(), fields: BTreeMap::new() }),
        };
        // NUL cannot be stored (Postgres refuses it in text and jsonb): refused up front, with
        // the field named, instead of failing deep in a statement. Only bodies that spell
        // `\u0000` are parsed a second time.
        if bytes.windows(6).any(|w| w.eq_ignore_ascii_case(b"\\u0000"))
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes)
            && let Some(at) = nul_at(&v, "")
        {
            let field = at.trim_start_matches('/').replace('/', ".");
            return Err(AppError::invalid(&field, NUL_MESSAGE));
        }
        let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            // Over the body limit (axum's default, 2 MiB): 413, not a validation error.
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(AppError::BodyTooLarge { limit: JSON_BODY_LIMIT as u64 })
            }
            Err(rejection) => Err(AppError::Invalid { message: rejection.body_text(), fields: BTreeMap::new() }),
        }
    }
}

/// axum's own extractor rejections (a `Path` segment that is not a UUID, a `Query` that does
/// not parse, …) answer `400 text/plain`: on the JSON routes they become our `invalid_input`.
/// A NUL character (`%00`) anywhere in the query string or the path is refused here, before
/// any extractor, for every route alike (`invalid_input`, the parameter named in `fields`):
/// a handler never sees one, whatever it does with the text.
pub async fn json_rejections(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if let Some(field) = nul_in_uri(req.uri()) {
        return AppError::invalid(&field, NUL_MESSAGE).into_response();
    }
    let r = next.run(req).await;
    let plain = r
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    if !plain || !matches!(r.status(), StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY) {
        return r;
    }
    let text = axum::body::to_bytes(r.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = if text.is_empty() { "the request's path or query is not valid".to_string() } else { text };
    AppError::Invalid { message, fields: BTreeMap::new() }.into_response()
}

/// The first query parameter (by its name as sent) or `path` whose text holds a NUL. A NUL
/// can only arrive percent-encoded (`%00`): a raw one is not a valid URI.
fn nul_in_uri(uri: &axum::http::Uri) -> Option<String> {
    let has_nul = |s: &str| s.contains("%00");
    if has_nul(uri.path()) {
        return Some("path".into());
    }
    uri.query()?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (has_nul(name) || has_nul(value))
            .then(|| if name.is_empty() || has_nul(name) { "query".into() } else { name.to_string() })
    })
}

#[cfg(test)]
mod tests {
    use super::nul_in_uri;

    #[test]
    fn nul_is_found_in_any_query_parameter_or_the_path() {
        let at = |u: &str| nul_in_uri(&u.parse().unwrap());
        assert_eq!(at("/api/search/documents?q=%00").as_deref(), Some("q"));
        assert_eq!(at("/api/x?limit=5&q=a%00b").as_deref(), Some("q"));
        assert_eq!(at("/api/x?a%00=1").as_deref(), Some("query"));
        assert_eq!(at("/api/sessions/a%00b/runs").as_deref(), Some("path"));
        // `%2500` is the text `%00`, not a NUL.
        assert_eq!(at("/api/x?q=%2500&limit=5"), None);
        assert_eq!(at("/api/x"), None);
    }
}
