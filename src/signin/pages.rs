//! Signing in and out, choosing a team, the language, and the API tokens page.

use askama::Template;
use axum::{
    Form,
    extract::{Query, State},
    http::HeaderMap,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use tower_sessions::Session;
use uuid::Uuid;

use crate::{
    audit::{self, Action, Actor, Entry, Outcome},
    auth::{
        Auth, ClientIp, LOCALE, SignedIn, TENANT_ID, Via,
        account::start_session,
        directory::{self as tq, MyInvitation, TenantChoice},
        handlers::{SignedInOpt, token_expiry, token_name},
        password,
        rate_limit::{self, Peer, client_ip},
        session_err,
    },
    db::TenantTx,
    error::{AppError, AppResult},
    state::AppState,
    web::{
        AnonCtx, Lang, Page, PageCtx,
        confirm::{ConfirmForm, ConfirmPage},
        render, safe_next,
    },
};

#[derive(Template)]
#[template(path = "auth/login.html")]
struct LoginPage {
    ctx: PageCtx,
    next: String,
    email: String,
    error: Option<String>,
    /// A notice above the form (e.g. `/setup` was already done).
    notice: Option<String>,
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
    /// `done`: the visitor came from `/setup`, which is finished.
    #[serde(default)]
    setup: Option<String>,
    /// `1`: the visitor's session ended while they were using a page (`web::html_errors`).
    #[serde(default)]
    expired: Option<String>,
}

pub async fn login_page(State(state): State<AppState>, AnonCtx(ctx): AnonCtx, Query(q): Query<NextQuery>) -> AppResult<Response> {
    if !tq::any_users(&state.pool).await? {
        return Ok(Redirect::to("/setup").into_response());
    }
    let notice = match (q.setup.as_deref(), q.expired.as_deref()) {
        (Some("done"), _) => Some(ctx.t("setup.already_done")),
        (_, Some("1")) => Some(ctx.t("assist.session_expired")),
        _ => None,
    };
    render(LoginPage { ctx, next: safe_next(q.next.as_deref()), email: String::new(), error: None, notice })
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    next: Option<String>,
}

pub async fn login(
    State(state): State<AppState>,
    session: Session,
    AnonCtx(ctx): AnonCtx,
    headers: HeaderMap,
    peer: Peer,
    Form(f): Form<LoginForm>,
) -> AppResult<Response> {
    let ip = client_ip(state.config.trust_proxy, &headers, peer.0);
    let email = f.email.trim().to_string();
    let next = safe_next(f.next.as_deref());
    let page = |ctx: PageCtx, error: String| LoginPage {
        ctx,
        next: next.clone(),
        email: email.clone(),
        error: Some(error),
        notice: None,
    };
    let attempt = match rate_limit::reserve(&state.pool, &state.config, &email, &ip).await {
        Ok(a) => a,
        Err(e) => {
            if let AppError::RateLimited { retry_after_secs } = &e {
                audit_failure_later(&state, &email, &ip, "password, rate limited");
                let msg = ctx.t("login.rate_limited").replace("{secs}", &retry_after_secs.to_string());
                let mut resp = render(page(ctx, msg))?;
                *resp.status_mut() = e.status();
                return Ok(resp);
            }
            return Err(e);
        }
    };
    let user = tq::user_by_email(&state.pool, &email).await?;
    let ok = password::verify(f.password, user.as_ref().map(|u| u.password_hash.clone())).await?;
    rate_limit::finish(&state.pool, attempt, ok).await?;
    match &user {
        Some(u) if ok => {
            let actor = Actor { user_id: Some(u.id), email: u.email.clone(), ip: Some(ip.clone()) };
            audit_sign_in(&state, u.id, actor, Outcome::Success, "password").await?;
        }
        _ => audit_failure_later(&state, &email, &ip, "password"),
    }
    let Some(user) = user.filter(|_| ok) else {
        tracing::info!(client.ip = %ip, "login failed for {email}");
        let mut resp = render(page(ctx.clone(), ctx.t("login.invalid")))?;
        *resp.status_mut() = axum::http::StatusCode::UNAUTHORIZED;
        return Ok(resp);
    };
    // New session id and a new CSRF token at privilege change (session fixation; a token
    // seen before sign-in is worth nothing after it).
    start_session(&session, &state.pool, user.id).await?;
    if let Some(l) = user.locale.as_deref() {
        session.insert(LOCALE, l).await.map_err(session_err)?;
    }
    let mut tx = TenantTx::begin_user_only(&state.pool, user.id).await?;
    let tenants = tq::tenants_of_user(&mut tx, user.id).await?;
    let invited = !tq::pending_for_user(&mut tx).await?.is_empty();
    tx.commit().await?;
    tracing::info!(user.id = %user.id, "login succeeded for {email}");
    if let [only] = tenants.as_slice() {
        session.insert(TENANT_ID, only.id).await.map_err(session_err)?;
        // Open invitations are shown on the team picker, so the person sees them at once.
        if !invited {
            return Ok(Redirect::to(&next).into_response());
        }
    }
    // Back to the invitation link that sent the person here to sign in (they accept there).
    if next.starts_with("/join/") {
        return Ok(Redirect::to(&next).into_response());
    }
    Ok(Redirect::to(&format!("/tenants?next={}", crate::web::urlencode(&next))).into_response())
}

/// A password sign-in of an existing account, one row in each of its teams (their admins see
/// their member's sign-ins and the failed attempts on it); an unknown e-mail belongs to no
/// team and is only logged.
async fn audit_sign_in(state: &AppState, user: Uuid, actor: Actor, outcome: Outcome, detail: &str) -> AppResult<()> {
    let mut tx = TenantTx::begin_user_only(&state.pool, user).await?;
    let tenants = tq::tenants_of_user(&mut tx, user).await?;
    tx.commit().await?;
    for t in tenants {
        let mut tx = TenantTx::begin(&state.pool, t.id, crate::db::Scope::User(user)).await?;
        let mut e = Entry::new(actor.clone(), Action::SignIn, actor.email.clone()).detail(detail);
        e.outcome = outcome;
        audit::record(&mut tx, &e).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// A failed (or refused) sign-in of `email`, recorded after the answer when it is an account:
/// an unknown e-mail writes nothing, so waiting for these rows (or even looking the account
/// up) would let the answer's time tell which e-mails have accounts (the password check takes
/// the same time either way for that reason). Nobody proved who they are: no actor id.
fn audit_failure_later(state: &AppState, email: &str, ip: &str, detail: &'static str) {
    let (state, email, ip) = (state.clone(), email.to_string(), ip.to_string());
    tokio::spawn(async move {
        let recorded: AppResult<()> = async {
            let Some(u) = tq::user_by_email(&state.pool, &email).await? else { return Ok(()) };
            let actor = Actor { user_id: None, email: u.email, ip: Some(ip) };
            audit_sign_in(&state, u.id, actor, Outcome::Failure, detail).await
        }
        .await;
        if let Err(e) = recorded {
            tracing::warn!("recording a failed sign-in in the audit log failed: {e}");
        }
    });
}

/// Sign out: the session ends; with a team chosen, that team's audit log records it.
pub async fn logout(State(state): State<AppState>, session: Session, auth: Option<Auth>, ip: ClientIp) -> AppResult<Redirect> {
    if let Some(a) = auth.filter(|a| a.via == Via::Session) {
        let mut tx = a.tx(&state).await?;
        a.audit(&mut tx, &ip, Action::SignOut, a.email.clone(), "").await?;
        tx.commit().await?;
    }
    session.flush().await.map_err(session_err)?;
    Ok(Redirect::to("/login"))
}

#[derive(Template)]
#[template(path = "auth/tenants.html")]
struct TenantsPage {
    ctx: PageCtx,
    tenants: Vec<TenantChoice>,
    invitations: Vec<MyInvitation>,
    current: Option<Uuid>,
    next: String,
}

impl TenantsPage {
    fn is_current(&self, id: &Uuid) -> bool {
        self.current == Some(*id)
    }
}

pub async fn tenants_page(
    State(state): State<AppState>,
    who: SignedIn,
    AnonCtx(ctx): AnonCtx,
    Query(q): Query<NextQuery>,
) -> AppResult<Response> {
    let mut tx = TenantTx::begin_user_only(&state.pool, who.user_id).await?;
    let tenants = tq::tenants_of_user(&mut tx, who.user_id).await?;
    let invitations = tq::pending_for_user(&mut tx).await?;
    tx.commit().await?;
    render(TenantsPage { ctx, tenants, invitations, current: who.tenant_id, next: safe_next(q.next.as_deref()) })
}

#[derive(Deserialize)]
pub struct SwitchForm {
    tenant_id: Uuid,
    next: Option<String>,
}

pub async fn switch_tenant(
    State(state): State<AppState>,
    session: Session,
    who: SignedIn,
    Form(f): Form<SwitchForm>,
) -> AppResult<Redirect> {
    let mut tx = TenantTx::begin_user_only(&state.pool, who.user_id).await?;
    let member = tq::tenants_of_user(&mut tx, who.user_id).await?.iter().any(|t| t.id == f.tenant_id);
    tx.commit().await?;
    if !member {
        return Err(AppError::NotFound);
    }
    session.insert(TENANT_ID, f.tenant_id).await.map_err(session_err)?;
    Ok(Redirect::to(&safe_next(f.next.as_deref())))
}

#[derive(Deserialize)]
pub struct LangForm {
    lang: String,
    next: Option<String>,
}

/// Save the UI language (for the session, and for the account when signed in).
pub async fn set_language(
    State(state): State<AppState>,
    session: Session,
    who: Option<SignedInOpt>,
    Form(f): Form<LangForm>,
) -> AppResult<Redirect> {
    let lang = Lang::parse(&f.lang).ok_or_else(|| AppError::invalid("lang", "en or zh-CN"))?;
    session.insert(LOCALE, lang.code()).await.map_err(session_err)?;
    if let Some(SignedInOpt(w)) = who {
        tq::set_locale(&state.pool, w.user_id, Some(lang.code())).await?;
    }
    Ok(Redirect::to(&safe_next(f.next.as_deref())))
}

#[derive(Template)]
#[template(path = "settings/tokens.html")]
struct TokensPage {
    ctx: PageCtx,
    tokens: Vec<crate::auth::tokens::ApiToken>,
    new_token: Option<String>,
    error: Option<String>,
    name: String,
    /// A ready-to-copy MCP client configuration (the token a placeholder).
    mcp_snippet: String,
}

/// What an MCP client's configuration (`mcpServers`, docs/MCP.md) needs: this server's `/mcp`
/// and the token as a bearer header, `mnote_…` standing for the token.
fn mcp_snippet(origin: Option<&str>) -> String {
    let url = format!("{}/mcp", origin.unwrap_or("http://127.0.0.1:8080"));
    let config = serde_json::json!({
        "mcpServers": { "mnote": { "url": url, "headers": { "Authorization": "Bearer mnote_…" } } }
    });
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

async fn tokens_page_for(
    state: &AppState,
    page: Page,
    headers: &HeaderMap,
    new_token: Option<String>,
    error: Option<String>,
    name: String,
) -> AppResult<Response> {
    let mut tx = page.auth.tx(state).await?;
    let tokens = crate::auth::tokens::list_for_user(&mut tx, page.auth.user_id).await?;
    tx.commit().await?;
    let mcp_snippet = mcp_snippet(crate::web::site_origin(state, headers).as_deref());
    render(TokensPage { ctx: page.ctx, tokens, new_token, error, name, mcp_snippet })
}

pub async fn tokens_page(State(state): State<AppState>, session: Session, page: Page, headers: HeaderMap) -> AppResult<Response> {
    // Shown once: the plaintext travels through the session only until this page renders.
    let new_token = session.remove::<String>("new_token").await.map_err(session_err)?;
    tokens_page_for(&state, page, &headers, new_token, None, String::new()).await
}

/// The tokens form: `expires` is a number of days or `never` (the default).
#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    expires: String,
}

pub async fn tokens_create_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    ip: ClientIp,
    headers: HeaderMap,
    Form(b): Form<TokenForm>,
) -> AppResult<Response> {
    let parsed = token_name(&b.name).and_then(|name| {
        let days = match b.expires.trim() {
            "" | "never" => None,
            d => Some(d.parse::<i64>().map_err(|_| AppError::invalid("expiresInDays", "a number of days"))?),
        };
        Ok((name, token_expiry(days)?))
    });
    let (name, days) = match parsed {
        Ok(v) => v,
        Err(e) => {
            let msg = crate::web::form_error(page.ctx.lang, &e);
            let status = e.status();
            let mut r = tokens_page_for(&state, page, &headers, None, Some(msg), b.name).await?;
            *r.status_mut() = status;
            return Ok(r);
        }
    };
    let mut tx = page.auth.tx(&state).await?;
    if let Err(e) = crate::auth::tokens::ensure_room(&mut tx, page.auth.user_id).await {
        drop(tx);
        let msg = crate::web::form_error(page.ctx.lang, &e);
        let status = e.status();
        let mut r = tokens_page_for(&state, page, &headers, None, Some(msg), b.name).await?;
        *r.status_mut() = status;
        return Ok(r);
    }
    let (rec, plain) = crate::auth::tokens::create_expiring(&mut tx, page.auth.tenant_id, page.auth.user_id, &name, days).await?;
    page.auth.audit(&mut tx, &ip, Action::TokenCreate, format!("token:{} {}", rec.id, rec.name), "").await?;
    tx.commit().await?;
    session.insert("new_token", plain).await.map_err(session_err)?;
    Ok(Redirect::to("/settings/tokens").into_response())
}

/// `POST /settings/tokens/{id}/revoke`: with `confirm=yes` (the dialog, or the confirmation
/// page) it revokes; without (no JavaScript), it shows the confirmation page first.
pub async fn tokens_revoke_form(
    State(state): State<AppState>,
    page: Page,
    ip: ClientIp,
    axum::extract::Path(id): axum::extract::Path<Uuid>,
    Form(f): Form<ConfirmForm>,
) -> AppResult<Response> {
    let mut tx = page.auth.tx(&state).await?;
    if !f.confirmed() {
        let tokens = crate::auth::tokens::list_for_user(&mut tx, page.auth.user_id).await?;
        tx.commit().await?;
        let t = tokens.into_iter().find(|t| t.id == id && t.revoked_at.is_none()).ok_or(AppError::NotFound)?;
        return render(ConfirmPage {
            title: page.ctx.t("assist.token_revoke_title"),
            lines: vec![page.ctx.t("assist.token_revoke_confirm").replace("{name}", &t.name)],
            action: format!("/settings/tokens/{id}/revoke"),
            ok_label: page.ctx.t("tokens.revoke"),
            cancel_url: "/settings/tokens".into(),
            ctx: page.ctx,
        });
    }
    if crate::auth::tokens::revoke(&mut tx, page.auth.user_id, id).await? {
        page.auth.audit(&mut tx, &ip, Action::TokenRevoke, format!("token:{id}"), "").await?;
    }
    tx.commit().await?;
    Ok(Redirect::to("/settings/tokens").into_response())
}
