//! Browser plumbing: the language of a request, the layout context every page gets, and the
//! layer that renders `AppError`s as pages on the page routes.

pub mod ai_panel;
pub mod confirm;
pub mod onboarding;
pub mod pages;

use askama::Template;
use axum::{
    extract::{FromRequestParts, Request, State},
    http::{HeaderMap, header, request::Parts},
    middleware::Next,
    response::{Html, IntoResponse, Redirect, Response},
};
use tower_sessions::Session;

use crate::{
    auth::directory as tq,
    auth::{self, Auth},
    error::{AppError, ErrorInfo},
    state::AppState,
};

/// The static assets, compiled into the binary: URL, content type, body.
const ASSETS: &[(&str, &str, &str)] = &[
    ("/static/app.css", "text/css; charset=utf-8", include_str!("../../static/app.css")),
    // Page AI: a run's journal streamed into the page, resumed after a reload.
    ("/static/ai-run.js", "text/javascript; charset=utf-8", include_str!("../../static/ai-run.js")),
    // The agent settings' provider presets (optional).
    ("/static/agent-connect.js", "text/javascript; charset=utf-8", include_str!("../../static/agent-connect.js")),
    // Live source status on the KB page (server-sent events).
    ("/static/kb-live.js", "text/javascript; charset=utf-8", include_str!("../../static/kb-live.js")),
    // Keyboard shortcuts and the copy buttons of `/search` (optional).
    ("/static/rag-live.js", "text/javascript; charset=utf-8", include_str!("../../static/rag-live.js")),
    ("/static/search.js", "text/javascript; charset=utf-8", include_str!("../../static/search.js")),
    // Keyboard page navigation and zoom in the viewer (optional).
    ("/static/viewer.js", "text/javascript; charset=utf-8", include_str!("../../static/viewer.js")),
    // Every page (optional): copy buttons, confirmation dialogs, the narrow-screen menu.
    ("/static/ui.js", "text/javascript; charset=utf-8", include_str!("../../static/ui.js")),
    // The tab icon (`<link rel="icon">` of every page), also where browsers look without one.
    ("/static/favicon.svg", "image/svg+xml", include_str!("../../static/favicon.svg")),
    ("/favicon.ico", "image/svg+xml", include_str!("../../static/favicon.svg")),
];

/// `GET /static/*`: one route per asset, cached for an hour.
pub fn page_router() -> axum::Router<AppState> {
    ASSETS.iter().fold(axum::Router::new(), |r, &(path, content_type, body)| {
        r.route(
            path,
            axum::routing::get(move || async move {
                ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "public, max-age=3600")], body)
            }),
        )
    })
}

/// UI language: the user's saved preference (kept in the session), else `Accept-Language`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    ZhCn,
}

impl Lang {
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhCn => "zh-CN",
        }
    }

    pub fn parse(s: &str) -> Option<Lang> {
        let s = s.trim().to_ascii_lowercase();
        if s.starts_with("zh") {
            Some(Lang::ZhCn)
        } else if s.starts_with("en") {
            Some(Lang::En)
        } else {
            None
        }
    }

    /// Best supported language from an `Accept-Language` header.
    pub fn from_accept_language(h: &str) -> Lang {
        let mut best: Option<(f32, Lang)> = None;
        for part in h.split(',') {
            let mut it = part.split(';');
            let tag = it.next().unwrap_or("");
            let q = it.find_map(|p| p.trim().strip_prefix("q=")).and_then(|q| q.parse::<f32>().ok()).unwrap_or(1.0);
            if let Some(l) = Lang::parse(tag)
                && best.is_none_or(|(bq, _)| q > bq)
            {
                best = Some((q, l));
            }
        }
        best.map(|(_, l)| l).unwrap_or(Lang::En)
    }

    pub fn from_headers(h: &HeaderMap) -> Lang {
        h.get(header::ACCEPT_LANGUAGE).and_then(|v| v.to_str().ok()).map(Lang::from_accept_language).unwrap_or(Lang::En)
    }

    /// Translate a catalogue key (`locales/*.yml`).
    pub fn t(&self, key: &str) -> String {
        rust_i18n::t!(key, locale = self.code()).into_owned()
    }

    /// "1 passage", "12 passages": `count.<noun>_one` for one, else `count.<noun>`, with
    /// `{n}` filled in.
    pub fn count(&self, n: i64, noun: &str) -> String {
        let key = if n == 1 { format!("count.{noun}_one") } else { format!("count.{noun}") };
        self.t(&key).replace("{n}", &n.to_string())
    }

    /// An agent's name in this language (`agents.name.<id>`), else `fallback`.
    pub fn agent_name(&self, id: &str, fallback: &str) -> String {
        self.t_opt(&format!("agents.name.{id}")).unwrap_or_else(|| fallback.to_string())
    }

    /// Translate a key the catalogue may not have: `None` when it has not.
    pub fn t_opt(&self, key: &str) -> Option<String> {
        let v = self.t(key);
        (v != key && v != format!("{}.{key}", self.code())).then_some(v)
    }
}

/// The message a form shows for `e`, in `lang`: a validation error by its field
/// (`form_error.field.<field>`), else by its message (`form_error.message.<words>`), else by
/// its code (`form_error.<code>`), else the server's own message (specific, but English).
pub fn form_error(lang: Lang, e: &AppError) -> String {
    if let AppError::Invalid { fields, .. } = e
        && let Some(m) = fields.keys().next().and_then(|f| lang.t_opt(&format!("form_error.field.{f}")))
    {
        return m;
    }
    if let Some(m) = lang.t_opt(&format!("form_error.message.{}", message_key(&e.public_message()))) {
        return m;
    }
    lang.t_opt(&format!("form_error.{}", e.code())).unwrap_or_else(|| e.public_message())
}

/// A catalogue key for a server message: lowercase ASCII words joined by `_` (at most 60).
pub fn message_key(message: &str) -> String {
    let mut k = String::new();
    for w in message.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        if !k.is_empty() {
            k.push('_');
        }
        k.push_str(&w.to_ascii_lowercase());
        if k.len() >= 60 {
            break;
        }
    }
    k
}

async fn lang_of(parts: &Parts) -> Lang {
    if let Some(s) = parts.extensions.get::<Session>()
        && let Ok(Some(code)) = s.get::<String>(auth::LOCALE).await
        && let Some(l) = Lang::parse(&code)
    {
        return l;
    }
    Lang::from_headers(&parts.headers)
}

impl<S: Send + Sync> FromRequestParts<S> for Lang {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(lang_of(parts).await)
    }
}

/// The signed-in user as the navigation bar shows them.
#[derive(Clone, Debug)]
pub struct NavUser {
    pub email: String,
    pub tenant_name: String,
    pub is_admin: bool,
    pub multi_tenant: bool,
}

impl NavUser {
    /// The navigation of `a`, a signed-in user.
    async fn of(state: &AppState, a: &Auth) -> Result<NavUser, AppError> {
        let tenant_name = tq::tenant_name(&state.pool, a.tenant_id).await?.unwrap_or_default();
        let mut tx = crate::db::TenantTx::begin_user_only(&state.pool, a.user_id).await?;
        let n = tq::tenants_of_user(&mut tx, a.user_id).await?.len();
        tx.commit().await?;
        Ok(NavUser { email: a.email.clone(), tenant_name, is_admin: a.role.is_admin(), multi_tenant: n > 1 })
    }
}

/// Everything the base layout needs.
#[derive(Clone, Debug)]
pub struct PageCtx {
    pub lang: Lang,
    pub csrf: String,
    pub user: Option<NavUser>,
    pub path: String,
    /// A one-time notice shown at the top of the page.
    pub flash: Option<String>,
    /// The notice is a refusal ([`flash_error`]): shown in the error style.
    pub flash_error: bool,
}

impl PageCtx {
    pub fn t(&self, key: &str) -> String {
        self.lang.t(key)
    }

    /// "1 passage", "12 passages" (see [`Lang::count`]).
    pub fn count(&self, n: impl TryInto<i64>, noun: &str) -> String {
        self.lang.count(n.try_into().unwrap_or(i64::MAX), noun)
    }

    /// Translate `prefix.key` (e.g. `status.indexed`).
    pub fn tk(&self, prefix: &str, key: &str) -> String {
        self.lang.t(&format!("{prefix}.{key}"))
    }

    pub fn is_zh(&self) -> bool {
        self.lang == Lang::ZhCn
    }

    /// Whether the signed-in user is an admin of the team (what only admins may see).
    pub fn is_admin(&self) -> bool {
        self.user.as_ref().is_some_and(|u| u.is_admin)
    }

    /// An agent's name in this language (`agents.name.<id>`), else `fallback` (its own name).
    pub fn agent_name(&self, id: &str, fallback: &str) -> String {
        self.lang.agent_name(id, fallback)
    }

    /// What ends a label before its value: ": ", in Chinese the full-width "：".
    pub fn colon(&self) -> &'static str {
        if self.is_zh() { "：" } else { ": " }
    }

    /// Is `prefix` the current section (for the active nav item)?
    pub fn at(&self, prefix: &str) -> bool {
        if prefix == "/" { self.path == "/" } else { self.path.starts_with(prefix) }
    }

    pub async fn build(parts: &mut Parts, state: &AppState, auth: Option<&Auth>) -> Result<Self, AppError> {
        let mut lang = lang_of(parts).await;
        // A signed-in user's UI language preference (`ai.common.ui_language`, kept on the
        // account) wins over the session's, so a change through the API shows on the next page.
        if let Some(a) = auth
            && let Some(l) = tq::user_by_id(&state.pool, a.user_id).await?.and_then(|u| u.locale).as_deref().and_then(Lang::parse)
        {
            lang = l;
        }
        let session = parts.extensions.get::<Session>().cloned();
        let csrf = match &session {
            Some(s) => auth::csrf::token(s).await?,
            None => String::new(),
        };
        // A page's own background re-read (`BACKGROUND_HEADER`, e.g. the KB page's live status)
        // must not consume the notice meant for the page the browser is navigating to.
        let (flash, flash_error) = match &session {
            Some(_) if parts.headers.contains_key(BACKGROUND_HEADER) => (None, false),
            Some(s) => {
                let text = s.remove::<String>(FLASH_KEY).await.map_err(auth::session_err)?;
                let error = s.remove::<bool>(FLASH_ERROR_KEY).await.map_err(auth::session_err)?.unwrap_or(false);
                (text, error)
            }
            None => (None, false),
        };
        let user = match auth {
            None => None,
            Some(a) => {
                let nav = NavUser::of(state, a).await?;
                // An error page rendered for this request keeps the navigation.
                if let Some(slot) = parts.extensions.get::<NavSlot>() {
                    slot.set(nav.clone());
                }
                Some(nav)
            }
        };
        Ok(PageCtx { lang, csrf, user, path: parts.uri.path().to_string(), flash, flash_error })
    }
}

/// Where [`PageCtx::build`] leaves the signed-in user's navigation for [`html_errors`], so an
/// error page keeps the header of the page that failed.
#[derive(Clone, Default)]
pub struct NavSlot(std::sync::Arc<std::sync::Mutex<Option<NavUser>>>);

impl NavSlot {
    fn set(&self, nav: NavUser) {
        if let Ok(mut g) = self.0.lock() {
            *g = Some(nav);
        }
    }
    fn take(&self) -> Option<NavUser> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

/// A page handler's view of the request: a signed-in tenant user plus the layout context.
pub struct Page {
    pub auth: Auth,
    pub ctx: PageCtx,
}

impl FromRequestParts<AppState> for Page {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        let auth = Auth::from_request_parts(parts, state).await?;
        let ctx = PageCtx::build(parts, state, Some(&auth)).await?;
        Ok(Page { auth, ctx })
    }
}

/// Layout context for pages that do not need a signed-in user (login, setup).
pub struct AnonCtx(pub PageCtx);

impl FromRequestParts<AppState> for AnonCtx {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        Ok(AnonCtx(PageCtx::build(parts, state, None).await?))
    }
}

/// Sent by a page's scripts when they re-read a page in the background: such a request leaves
/// the one-time notice ([`flash`]) in the session.
pub const BACKGROUND_HEADER: &str = "x-mnote-background";

const FLASH_KEY: &str = "flash";
const FLASH_ERROR_KEY: &str = "flash_error";

/// Set a one-time notice for the next page.
pub async fn flash(session: &Session, msg: impl Into<String>) -> Result<(), AppError> {
    session.remove::<bool>(FLASH_ERROR_KEY).await.map_err(auth::session_err)?;
    session.insert(FLASH_KEY, msg.into()).await.map_err(auth::session_err)
}

/// Set a one-time notice for the next page that says a form was refused (the error style).
pub async fn flash_error(session: &Session, msg: impl Into<String>) -> Result<(), AppError> {
    session.insert(FLASH_ERROR_KEY, true).await.map_err(auth::session_err)?;
    session.insert(FLASH_KEY, msg.into()).await.map_err(auth::session_err)
}

/// Render a template, mapping a template failure to an internal error.
pub fn render(t: impl Template) -> Result<Response, AppError> {
    let html = t.render().map_err(|e| AppError::Internal(anyhow::anyhow!("template: {e}")))?;
    Ok(Html(html).into_response())
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    ctx: PageCtx,
    status: u16,
    code: &'static str,
    title: String,
    message: String,
}

/// The layer of the page routes (`startup` applies it to them only; `/api` keeps the JSON
/// body): errors become pages and 401 a redirect to the login page.
pub async fn html_errors(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let path_and_query = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
    let is_get = matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD);
    // Where the person was: the page a form was sent from (same site only), for a form whose
    // session ended; a page they asked for themselves.
    let back = if is_get { path_and_query.clone() } else { same_site_referer(req.headers()).unwrap_or_else(|| "/".into()) };
    let had_session = sent_cookie(req.headers(), SESSION_COOKIE);
    let (mut parts, body) = req.into_parts();
    let lang = lang_of(&parts).await;
    let slot = NavSlot::default();
    parts.extensions.insert(slot.clone());
    // The request's headers and session, to find the signed-in user's navigation when the
    // failure came before a page built it (no such route, a refusal by an extractor).
    let mut probe = Request::new(()).into_parts().0;
    probe.uri = parts.uri.clone();
    probe.headers = parts.headers.clone();
    probe.extensions = parts.extensions.clone();
    let session = parts.extensions.get::<Session>().cloned();
    // API clients following a page URL with a bearer token (e.g. a citation) keep the JSON error.
    let api_client = auth::has_bearer(&parts);
    let resp = next.run(Request::from_parts(parts, body)).await;
    let Some(info) = resp.extensions().get::<ErrorInfo>().cloned() else {
        return resp;
    };
    if api_client {
        return resp;
    }
    let signed_in = match &session {
        Some(s) => matches!(s.get::<serde_json::Value>(auth::USER_ID).await, Ok(Some(_))),
        None => false,
    };
    match info.redirect_to {
        Some("/login") => return to_login(&back, had_session),
        Some(to) => return Redirect::to(to).into_response(),
        None => {}
    }
    // A form of a signed-in page sent after its session ended (idle expiry — the browser may
    // have dropped the cookie by then —, signed out elsewhere) is not a forgery to report but a
    // sign-in to ask for: the sign-in page, then back to the page the form was on. Nothing of
    // the form was done. A signed-in session's wrong token, and the forms for visitors
    // (sign-in, setup, invitation links), keep the error page.
    if info.code == "csrf_failed" && !is_get && !signed_in && !visitor_form(&path) {
        return to_login(&back, true);
    }
    let csrf = match &session {
        Some(s) => auth::csrf::token(s).await.unwrap_or_default(),
        None => String::new(),
    };
    let user = match slot.take() {
        Some(nav) => Some(nav),
        None if signed_in => match Auth::from_request_parts(&mut probe, &state).await {
            Ok(a) => NavUser::of(&state, &a).await.ok(),
            Err(_) => None,
        },
        None => None,
    };
    let ctx = PageCtx { lang, csrf, user, path, flash: None, flash_error: false };
    let title = lang.t(&format!("error.{}", info.code));
    // Generic outcomes get a translated explanation; specific ones keep the server's message.
    let message = match info.code {
        "not_found" | "internal" | "stored_value_unreadable" | "csrf_failed" | "path_outside_grant" | "upstream_unavailable" => {
            lang.t(&format!("error.hint.{}", info.code))
        }
        _ => lang
            .t_opt(&format!("form_error.message.{}", message_key(&info.message)))
            .or_else(|| lang.t_opt(&format!("error.hint.{}", info.code)))
            .unwrap_or(info.message),
    };
    let page = ErrorPage { ctx, status: info.status.as_u16(), code: info.code, title, message };
    match page.render() {
        Ok(html) => (info.status, Html(html)).into_response(),
        Err(_) => resp,
    }
}

/// `path` as an absolute link for a person to open elsewhere: under [`site_origin`], else
/// the path alone.
pub fn absolute_link(state: &AppState, headers: &HeaderMap, path: String) -> String {
    match site_origin(state, headers) {
        Some(origin) => format!("{origin}{path}"),
        None => path,
    }
}

/// This site's origin (`https://host[:port]`) for links people copy elsewhere:
/// `MNOTE_PUBLIC_URL`, else the request's `Host` (when it is a plain host) with the scheme the
/// session cookie implies; `None` when neither is usable.
pub fn site_origin(state: &AppState, headers: &HeaderMap) -> Option<String> {
    if let Some(base) = state.config.public_url.as_deref() {
        return Some(base.trim_end_matches('/').to_string());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let plain = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c));
    plain.then(|| format!("{}://{host}", if state.config.cookie_secure { "https" } else { "http" }))
}

/// The session cookie's name (`startup` names the session layer's cookie with it).
pub const SESSION_COOKIE: &str = "mnote_session";

/// `/login?next=<back>`, with `expired=1` when the request came with a session that has ended
/// (the sign-in page then says so).
fn to_login(back: &str, expired: bool) -> Response {
    let next = urlencode(&safe_next(Some(back)));
    let flag = if expired { "&expired=1" } else { "" };
    Redirect::to(&format!("/login?next={next}{flag}")).into_response()
}

/// The forms a visitor without a session sends (their CSRF token is the browser cookie's).
fn visitor_form(path: &str) -> bool {
    matches!(path, "/login" | "/setup" | "/language") || path.starts_with("/join/")
}

/// Whether the request carries cookie `name`.
fn sent_cookie(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|pair| pair.trim().split_once('=').is_some_and(|(k, _)| k == name))
}

/// The path (and query) of the `Referer` when it is a page of this site (same host and port
/// as the request's `Host`), else `None`.
pub fn same_site_referer(headers: &HeaderMap) -> Option<String> {
    let referer = headers.get(header::REFERER)?.to_str().ok()?;
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let u = reqwest::Url::parse(referer).ok()?;
    let authority = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str()?),
        None => u.host_str()?.to_string(),
    };
    if !authority.eq_ignore_ascii_case(host) {
        return None;
    }
    let mut out = u.path().to_string();
    if let Some(q) = u.query() {
        out.push('?');
        out.push_str(q);
    }
    Some(safe_next(Some(&out)))
}

pub fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("", s)]).map(|e| e[1..].to_string()).unwrap_or_default()
}

/// What every HTML page may load: its own scripts, styles and images only (the pages have no
/// inline scripts or `<style>` elements; `style` attributes position the viewer's highlight).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     style-src-attr 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self'; connect-src 'self'; object-src 'none'; \
     base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

/// Security headers: `nosniff` on every response; on HTML also `Cache-Control: no-store`, the
/// CSP above, no framing (`X-Frame-Options: DENY` for browsers without `frame-ancestors`) and
/// a same-origin referrer. JSON answers are `no-store` unless they say otherwise.
pub async fn security_headers(req: Request, next: Next) -> Response {
    use axum::http::{HeaderValue, header};
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    let html = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/html"));
    if html {
        // Pages hold the signed-in user's data (and a CSRF token): never stored, so after
        // sign-out Back cannot show the previous user's pages.
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    }
    let json = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
    if json && !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// Only same-site relative targets are followed after login: a path that starts with one
/// `/`, holds no control character (browsers drop tabs and newlines, so `/\t/evil.example`
/// would become `//evil.example`) and no backslash, and that resolves against this origin to
/// this origin. Anything else is `/`.
pub fn safe_next(next: Option<&str>) -> String {
    const BASE: &str = "http://mnote.invalid";
    let Some(n) = next else { return "/".into() };
    if !n.starts_with('/') || n.starts_with("//") || n.contains('\\') || n.chars().any(char::is_control) {
        return "/".into();
    }
    match reqwest::Url::parse(BASE).and_then(|b| b.join(n)) {
        Ok(u) if u.origin() == reqwest::Url::parse(BASE).expect("base").origin() && !u.path().starts_with("//") => {
            let mut out = u.path().to_string();
            if let Some(q) = u.query() {
                out.push('?');
                out.push_str(q);
            }
            if let Some(f) = u.fragment() {
                out.push('#');
                out.push_str(f);
            }
            out
        }
        _ => "/".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language() {
        assert_eq!(Lang::from_accept_language("zh-CN,zh;q=0.9,en;q=0.8"), Lang::ZhCn);
        assert_eq!(Lang::from_accept_language("en-US,en;q=0.9,zh;q=0.5"), Lang::En);
        assert_eq!(Lang::from_accept_language("fr-FR, zh-TW;q=0.3"), Lang::ZhCn);
        assert_eq!(Lang::from_accept_language("fr"), Lang::En);
    }

    #[test]
    fn next_is_same_site_only() {
        assert_eq!(safe_next(Some("/kbs/1")), "/kbs/1");
        assert_eq!(safe_next(Some("//evil.com")), "/");
        assert_eq!(safe_next(Some("https://evil.com")), "/");
        assert_eq!(safe_next(Some("/\\evil.com")), "/");
        assert_eq!(safe_next(None), "/");
        for hostile in ["/\t/evil.example/x", "/\n/evil.example", "/\r\n//evil.example", "/\u{7f}x", "/%09/x/../..//evil.example"]
        {
            let n = safe_next(Some(hostile));
            assert!(!n.contains("evil.example") || !n.starts_with("//"), "{hostile:?} -> {n:?}");
            assert!(n.starts_with('/') && !n.starts_with("//") && !n.chars().any(char::is_control), "{hostile:?} -> {n:?}");
        }
        assert_eq!(safe_next(Some("/\t/evil.example/x")), "/");
        assert_eq!(safe_next(Some("/kbs/1?q=a%20b#hl")), "/kbs/1?q=a%20b#hl");
    }

    #[test]
    fn the_referer_counts_only_from_this_site() {
        let h = |referer: &str, host: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::REFERER, referer.parse().unwrap());
            m.insert(header::HOST, host.parse().unwrap());
            m
        };
        assert_eq!(
            same_site_referer(&h("http://mnote.example:8080/ai?session=s1", "mnote.example:8080")),
            Some("/ai?session=s1".into())
        );
        assert_eq!(same_site_referer(&h("https://mnote.example/kbs/1", "mnote.example")), Some("/kbs/1".into()));
        assert_eq!(same_site_referer(&h("https://evil.example/kbs/1", "mnote.example")), None);
        assert_eq!(same_site_referer(&h("http://mnote.example:9090/x", "mnote.example:8080")), None);
        assert_eq!(same_site_referer(&HeaderMap::new()), None);
        let mut c = HeaderMap::new();
        c.insert(header::COOKIE, "a=1; mnote_session=xyz".parse().unwrap());
        assert!(sent_cookie(&c, SESSION_COOKIE) && !sent_cookie(&c, "mnote"));
    }

    #[test]
    fn chinese_uses_one_register_and_plain_words() {
        let zh = include_str!("../../locales/zh-CN.yml");
        assert!(!zh.contains('您'), "the Chinese catalogue says 你, never 您");
        // The built-in agent's own Chinese words too.
        let agent = include_str!("../agents/builtin/lang.rs");
        assert!(!agent.contains('您'), "the built-in agent says 你, never 您");
        assert!(!zh.contains("搜索证据"), "搜索, not 搜索证据");
    }

    #[test]
    fn form_errors_are_translated_by_field_then_message_then_code() {
        let e = AppError::invalid("password", "password must be at least 10 characters");
        assert_eq!(form_error(Lang::En, &e), "The password must be at least 10 characters.");
        assert_eq!(form_error(Lang::ZhCn, &e), "密码至少需要 10 个字符。");
        let e = AppError::Conflict("this invitation has expired".into());
        assert_eq!(form_error(Lang::ZhCn, &e), "此邀请已过期。");
        assert_eq!(form_error(Lang::En, &AppError::PathOutsideGrant).split(' ').next(), Some("That"));
        // Unknown to the catalogue: the server's own message.
        let e = AppError::invalid("zzz", "something specific");
        assert_eq!(form_error(Lang::ZhCn, &e), "something specific");
        assert_eq!(message_key("Only an owner can make owners"), "only_an_owner_can_make_owners");
        assert_eq!(Lang::En.t_opt("no.such.key"), None);
    }

    #[test]
    fn counted_nouns_agree_with_their_number_in_both_languages() {
        assert_eq!(Lang::En.count(1, "passage"), "1 passage");
        assert_eq!(Lang::En.count(0, "passage"), "0 passages");
        assert_eq!(Lang::En.count(12, "document"), "12 documents");
        assert_eq!(Lang::En.count(1, "kb"), "1 knowledge base");
        assert_eq!(Lang::ZhCn.count(1, "document"), "1 个文档");
        for noun in ["passage", "document", "source", "day", "file", "token", "grant", "kb"] {
            for lang in [Lang::En, Lang::ZhCn] {
                for n in [1, 2] {
                    assert!(!lang.count(n, noun).contains("count."), "{lang:?} {noun} {n}");
                }
            }
        }
    }

    #[test]
    fn catalogue_has_both_languages() {
        assert_eq!(Lang::En.t("nav.dashboard"), "Dashboard");
        assert_ne!(Lang::ZhCn.t("nav.dashboard"), "Dashboard");
        assert!(!Lang::ZhCn.t("nav.dashboard").contains("nav."));
    }
}
