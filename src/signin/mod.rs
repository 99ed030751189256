//! The pages of signing in and of the signed-in person's own settings (sign-in, sign-out,
//! the team chooser, the language, API tokens, the password). They render with the layout, so
//! they live above `web`; the session, tokens and passwords themselves are `auth`'s.

pub mod account;
pub mod pages;

use crate::state::AppState;

pub fn page_router() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    use pages as p;
    axum::Router::new()
        .route("/login", get(p::login_page).post(p::login))
        .route("/logout", post(p::logout))
        .route("/tenants", get(p::tenants_page))
        .route("/tenants/switch", post(p::switch_tenant))
        .route("/language", post(p::set_language))
        .route("/settings/tokens", get(p::tokens_page).post(p::tokens_create_form))
        .route("/settings/tokens/{id}/revoke", post(p::tokens_revoke_form))
        .route("/settings/account", get(account::account_page))
        .route("/settings/account/password", post(account::change_password_form))
}
