//! Tenants (teams), accounts and memberships: bootstrap from the CLI, first-run `/setup`,
//! and the member administration API and pages.

pub mod audit_log;
pub mod audited;
pub mod handlers;
pub mod invitations;
pub mod reset_pages;
pub mod resets;
pub mod settings;

use sqlx::PgPool;
use uuid::Uuid;

use crate::auth::directory::{self as q, Role};
use crate::{
    auth::password,
    db::{Scope, TenantTx},
    error::{AppError, AppResult, ResultExt},
};

/// Members and tenant settings (API and admin pages) and first-run `/setup`.
pub fn api_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, patch, post};
    use handlers as t;
    axum::Router::new()
        .route("/api/members", get(t::list_members).post(t::add_member))
        .route("/api/members/invitations", get(t::list_team_invitations))
        .route("/api/members/invitations/{id}", axum::routing::delete(t::withdraw_invitation))
        .route("/api/invitations", get(t::my_invitations))
        .route("/api/invitations/{id}/accept", post(t::accept_invitation))
        .route("/api/invitations/{id}/decline", post(t::decline_invitation))
        .route("/api/members/{id}", patch(t::update_member).delete(t::delete_member))
        .route("/api/tenant/settings", get(t::get_settings).patch(t::patch_settings))
        .route("/api/audit", get(audit_log::api_list))
        .route("/api/members/{id}/password-reset", post(reset_pages::issue_api))
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use crate::error::Items;
    use handlers as t;
    d.op("get", "/api/members").summary("The team's members").ok::<Items<q::Member>>(200);
    d.op("post", "/api/members")
        .summary("Invite an email into the team (admins); the answer never says whether it has an account")
        .body::<t::NewMember>()
        .ok::<t::Invited>(202)
        .errors(&[(409, &["conflict"])]);
    d.op("get", "/api/members/invitations")
        .summary("The team's open invitations (admins)")
        .ok::<Items<invitations::TeamInvitation>>(200);
    d.op("delete", "/api/members/invitations/{id}").summary("Withdraw an invitation (admins)").empty(204);
    d.op("get", "/api/invitations")
        .summary("The caller's own pending invitations, from every team (team, role and inviter once its link was opened)")
        .ok::<Items<crate::auth::directory::MyInvitation>>(200);
    d.op("post", "/api/invitations/{id}/accept")
        .summary("Accept an invitation with its link's token")
        .body::<t::AnswerBody>()
        .ok::<t::Accepted>(200)
        .errors(&[(409, &["conflict"])]);
    d.op("post", "/api/invitations/{id}/decline")
        .summary("Decline an invitation with its link's token")
        .body::<t::AnswerBody>()
        .empty(204)
        .errors(&[(409, &["conflict"])]);
    d.op("patch", "/api/members/{id}")
        .summary("Change a member's role (admins; owners make owners)")
        .body::<t::RoleChange>()
        .ok::<q::Member>(200)
        .errors(&[(409, &["conflict"])]);
    d.op("delete", "/api/members/{id}").summary("Remove a member (admins)").empty(204).errors(&[(409, &["conflict"])]);
    d.op("post", "/api/members/{id}/password-reset")
        .summary("A one-time password reset link for a member (admins; shown once, valid 24 h; not for accounts in other teams)")
        .ok::<reset_pages::ResetIssued>(201)
        .errors(&[(409, &["conflict"])]);
    d.op("get", "/api/audit")
        .summary("The team's audit log (admins): a page of rows, newest first, or with format=csv every matching row")
        .query::<audit_log::AuditQuery>()
        .ok::<crate::audit::queries::AuditPage>(200)
        .content(200, "text/csv", serde_json::json!({"type": "string"}), "with format=csv: every matching row (at most 50 000)");
    d.op("get", "/api/tenant/settings").summary("The team's settings").ok::<t::SettingsView>(200);
    d.op("patch", "/api/tenant/settings")
        .summary("Change the team's settings (admins)")
        .body::<t::SettingsPatch>()
        .ok::<t::SettingsView>(200);
}

pub fn page_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, post};
    use handlers as t;
    axum::Router::new()
        .route("/setup", get(t::setup_page).post(t::setup))
        .route("/admin/members", get(t::members_page).post(t::members_add))
        .route("/admin/members/{id}/role", post(t::members_role))
        .route("/admin/members/{id}/remove", get(t::members_remove_page).post(t::members_remove))
        .route("/admin/members/invitations/{id}/link", post(t::invitation_link_form))
        .route("/admin/members/invitations/{id}/withdraw", post(t::invitation_withdraw_form))
        .route("/join/{token}", get(t::join_page).post(t::join))
        .route("/join/{token}/accept", post(t::join_accept))
        .route("/join/{token}/decline", post(t::join_decline))
        .route("/invitations/{id}/accept", post(t::invitation_accept_form))
        .route("/invitations/{id}/decline", post(t::invitation_decline_form))
        .route("/admin/settings", get(t::settings_page).post(t::settings_save))
        .route("/admin/audit", get(audit_log::audit_page))
        .route("/admin/members/{id}/reset-link", post(reset_pages::issue_form))
        .route("/reset/{token}", get(reset_pages::reset_page).post(reset_pages::reset))
        .route("/admin/audit/export", get(audit_log::export))
}

#[derive(Debug, PartialEq, Eq)]
pub struct Bootstrapped {
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub created_tenant: bool,
    pub created_user: bool,
}

pub fn validate_email(email: &str) -> AppResult<String> {
    let e = email.trim();
    let ok = e.len() <= 254
        && e.split_once('@').is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !d.starts_with('.'))
        && !e.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok { Ok(e.to_string()) } else { Err(AppError::invalid("email", "not a valid email address")) }
}

pub fn validate_tenant_name(name: &str) -> AppResult<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 || n.chars().any(char::is_control) {
        return Err(AppError::invalid("tenant", "team name must be 1–100 characters"));
    }
    Ok(n.to_string())
}

/// Create the tenant if missing and its owner if missing (idempotent). An existing account
/// keeps its password and becomes an owner of the tenant, but only when no password or its
/// own password is given (see [`check_given_password`]).
pub async fn bootstrap(pool: &PgPool, tenant: &str, email: &str, pw: &str) -> AppResult<Bootstrapped> {
    let tenant = validate_tenant_name(tenant)?;
    let email = validate_email(email)?;
    let mut tx = pool.begin().await?;
    sqlx::query!("select pg_advisory_xact_lock(hashtext('mnote.bootstrap'))").execute(&mut *tx).await?;
    let (tenant_id, created_tenant) = match q::tenant_by_name(&mut *tx, &tenant).await? {
        Some(id) => (id, false),
        None => (q::insert_tenant(&mut *tx, &tenant).await?, true),
    };
    let (user_id, created_user) = match q::user_by_email(&mut *tx, &email).await? {
        Some(u) => {
            if !pw.is_empty() {
                check_given_password(&email, pw, u.password_hash).await?;
            }
            (u.id, false)
        }
        None => {
            password::validate_new_password(pw)?;
            (q::insert_user(&mut *tx, &email, &password::hash(pw.to_string()).await?).await?, true)
        }
    };
    tx.commit().await?;
    let mut tx = TenantTx::begin(pool, tenant_id, Scope::System).await?;
    let existing = q::role_of(&mut tx, user_id).await?;
    if existing != Some(Role::Owner) {
        q::add_membership(&mut tx, tenant_id, user_id, Role::Owner).await?;
    }
    tx.commit().await?;
    Ok(Bootstrapped { tenant_id, user_id, created_tenant, created_user })
}

/// First-run setup: only while the database has no users at all.
pub async fn first_run_setup(pool: &PgPool, tenant: &str, email: &str, pw: &str) -> AppResult<Bootstrapped> {
    password::validate_new_password(pw)?;
    let mut tx = pool.begin().await?;
    sqlx::query!("select pg_advisory_xact_lock(hashtext('mnote.bootstrap'))").execute(&mut *tx).await?;
    if q::any_users(&mut *tx).await? {
        return Err(AppError::NotFound);
    }
    tx.commit().await?;
    bootstrap(pool, tenant, email, pw).await
}

/// An operator gave `pw` for `email`, which already has an account: go on only when `pw` is
/// that account's password. Otherwise the operator believes they are creating an account
/// with a password they know, while the account may be someone else's (for instance made
/// through another team's invitation link) and keeps its own password (issue 31 item 1).
async fn check_given_password(email: &str, pw: &str, hash: String) -> AppResult<()> {
    if password::verify(pw.to_string(), Some(hash)).await? {
        return Ok(());
    }
    Err(AppError::Conflict(format!(
        "{email} already has an account, and the given password is not its password: nothing was changed and its \
         password stays unchanged. The account may be someone else's; to add it to a team anyway, as it is, use \
         `mnote user add` without --password-stdin"
    )))
}

/// Add an account to a tenant directly (creating the account when new) with the given role.
/// An existing account keeps its password and gets the role, but only when no password or its
/// own password is given ([`check_given_password`]): the operator never hands out a password
/// that is not the account's. Operator-only (`mnote user add`, tests): the API and pages
/// invite instead ([`invitations::invite`]), because this path needs no consent and its
/// answers reveal whether an account exists.
pub async fn add_user(pool: &PgPool, tenant_id: Uuid, email: &str, role: Role, pw: Option<&str>) -> AppResult<(Uuid, bool)> {
    let email = validate_email(email)?;
    let (user_id, created) = match q::user_by_email(pool, &email).await? {
        Some(u) => {
            if let Some(pw) = pw {
                check_given_password(&email, pw, u.password_hash).await?;
            }
            (u.id, false)
        }
        None => {
            let pw = pw.ok_or_else(|| AppError::invalid("password", "a new account needs a password"))?;
            password::validate_new_password(pw)?;
            let hash = password::hash(pw.to_string()).await?;
            (q::insert_user(pool, &email, &hash).await.on_unique("account exists")?, true)
        }
    };
    let mut tx = TenantTx::begin(pool, tenant_id, Scope::System).await?;
    q::add_membership(&mut tx, tenant_id, user_id, role).await?;
    tx.commit().await?;
    Ok((user_id, created))
}

#[cfg(test)]
mod tests {
    #[test]
    fn email_validation() {
        assert!(super::validate_email("a@b.co").is_ok());
        assert!(super::validate_email(" a@b.co ").is_ok());
        assert!(super::validate_email("ab.co").is_err());
        assert!(super::validate_email("a@b").is_err());
        assert!(super::validate_email("a b@c.de").is_err());
    }
}
