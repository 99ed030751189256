//! The dashboard (`/`): getting started, the user's knowledge bases, recent sources and the
//! knowledge bases they may restore.

use askama::Template;
use axum::{extract::State, response::Response};
use tower_sessions::Session;

use super::start;
use crate::{
    error::AppResult,
    kbs::{self, Kb},
    sources::{self, Source},
    state::AppState,
    web::{Page, PageCtx, render},
};

#[derive(Template)]
#[template(path = "kbs/dashboard.html")]
struct DashboardPage {
    ctx: PageCtx,
    kbs: Vec<Kb>,
    recent: Vec<(Source, String)>,
    /// Deleted KBs the user may restore, with their purge time.
    deleted: Vec<(Kb, String)>,
    checklist: Option<start::Checklist>,
}

pub async fn dashboard(State(state): State<AppState>, session: Session, page: Page) -> AppResult<Response> {
    let mut tx = page.auth.tx(&state).await?;
    let visible = kbs::queries::list(&mut tx, page.auth.user_id, page.auth.role.is_admin()).await?;
    let recent = sources::queries::recent(&mut tx, 10).await?;
    let deleted = kbs::queries::deleted(&mut tx, page.auth.user_id, page.auth.role.is_admin()).await?;
    let checklist = start::checklist(&mut tx, &page.auth, &session, &visible).await?;
    tx.commit().await?;
    let grace = chrono::Duration::from_std(state.config.delete_grace).unwrap_or(chrono::Duration::MAX);
    let deleted = deleted
        .into_iter()
        .filter(|k| k.can_manage)
        .map(|k| {
            let purge = k.deleted_at.and_then(|d| d.checked_add_signed(grace));
            let when = purge.map(|p| p.format("%Y-%m-%d %H:%M UTC").to_string()).unwrap_or_default();
            (k, when)
        })
        .collect();
    render(DashboardPage { ctx: page.ctx, kbs: visible, recent, deleted, checklist: checklist.filter(|c| !c.done()) })
}
