//! The dashboard's "Getting started": the next real steps of this person, by role, each ticked
//! only by what happened in this team — never by a step someone else's work makes look done.
//!
//! An admin: grant a folder → create a knowledge base → add documents → connect a model →
//! invite a teammate → ask the assistant. A member: (when nothing is readable yet: ask an admin
//! for a folder) → search → ask the assistant → create a knowledge base of their own → connect
//! their tools with an API token. The list stays until every step is done or it is hidden.

use axum::response::Redirect;
use serde::Deserialize;
use tower_sessions::Session;

use crate::{
    agents::config as agent_config,
    auth::{Auth, directory, tokens},
    db::TenantTx,
    error::AppResult,
    journal::store as runs,
    kbs::Kb,
    sources,
    tenants::invitations,
    web::{
        Page,
        onboarding::{CHECKLIST_HIDDEN_KEY, SEARCHED_KEY, mark_searched},
    },
};

/// One step: its words (`kbpage.step.<key>`), where it leads, whether it is done.
#[derive(Clone, Debug)]
pub struct Step {
    pub key: &'static str,
    pub href: Option<String>,
    pub done: bool,
}

/// The checklist of one person.
#[derive(Clone, Debug)]
pub struct Checklist {
    pub steps: Vec<Step>,
}

impl Checklist {
    pub fn done(&self) -> bool {
        self.steps.iter().all(|s| s.done)
    }
}

fn step(key: &'static str, href: Option<String>, done: bool) -> Step {
    Step { key, href, done }
}

/// The checklist as it stands for this user (`visible`: the KBs the dashboard lists), or
/// `None` when they hid it.
pub async fn checklist(tx: &mut TenantTx, auth: &Auth, session: &Session, visible: &[Kb]) -> AppResult<Option<Checklist>> {
    let flag = |k: &'static str| async move { session.get::<bool>(k).await.map_err(crate::auth::session_err) };
    if flag(CHECKLIST_HIDDEN_KEY).await?.unwrap_or(false) {
        return Ok(None);
    }
    let searched = flag(SEARCHED_KEY).await?.unwrap_or(false);
    let steps = if auth.role.is_admin() {
        admin_steps(tx, auth, visible).await?
    } else {
        member_steps(tx, auth, visible, searched).await?
    };
    Ok(Some(Checklist { steps }))
}

async fn admin_steps(tx: &mut TenantTx, auth: &Auth, visible: &[Kb]) -> AppResult<Vec<Step>> {
    let granted = !crate::grants::queries::active_for_user(tx, auth.user_id).await?.is_empty();
    let first_kb = visible.iter().find(|k| k.can_manage).map(|k| format!("/kbs/{}#sources-card", k.id));
    let documents = sources::queries::any_indexed(tx).await?;
    let model = agent_config::any_endpoint(tx).await?;
    let teammates = directory::members(tx).await?.len() > 1 || !invitations::pending_for_team(tx).await?.is_empty();
    let asked = runs::any_run_of(tx, auth.user_id).await?;
    Ok(vec![
        step("grant", Some("/admin/grants".into()), granted),
        step("kb", Some("#new-kb".into()), !visible.is_empty()),
        step("documents", first_kb, documents),
        step("model", Some("/settings/agents?tab=hermes".into()), model),
        step("invite", Some("/admin/members".into()), teammates),
        step("ask", Some("/ai".into()), asked),
    ])
}

async fn member_steps(tx: &mut TenantTx, auth: &Auth, visible: &[Kb], searched: bool) -> AppResult<Vec<Step>> {
    let granted = !crate::grants::queries::active_for_user(tx, auth.user_id).await?.is_empty();
    let asked = runs::any_run_of(tx, auth.user_id).await?;
    let own_kb = visible.iter().any(|k| k.can_manage);
    let token = !tokens::list_for_user(tx, auth.user_id).await?.is_empty();
    let mut steps = Vec::new();
    // Only while there is nothing to read: the one thing only an admin can do.
    if visible.is_empty() && !granted {
        steps.push(step("grant_member", None, false));
    }
    steps.push(step("search", Some("/start/search".into()), searched));
    steps.push(step("ask", Some("/ai".into()), asked));
    if granted {
        steps.push(step("own_kb", Some("#new-kb".into()), own_kb));
    }
    steps.push(step("token", Some("/settings/tokens".into()), token));
    Ok(steps)
}

#[derive(Deserialize)]
pub struct StartSearch {
    #[serde(default)]
    q: String,
}

/// `GET /start/search?q=`: the dashboard's search box and the checklist's search step; marks
/// the step done for this session and goes on to `/search`.
pub async fn start_search(
    session: Session,
    _page: Page,
    axum::extract::Query(p): axum::extract::Query<StartSearch>,
) -> AppResult<Redirect> {
    mark_searched(&session).await?;
    let q = p.q.trim();
    Ok(Redirect::to(&if q.is_empty() { "/search".to_string() } else { format!("/search?q={}", crate::web::urlencode(q)) }))
}

/// `POST /start/hide`: hide the getting-started checklist (for this session).
pub async fn hide_checklist(session: Session, _page: Page) -> AppResult<Redirect> {
    session.insert(CHECKLIST_HIDDEN_KEY, true).await.map_err(crate::auth::session_err)?;
    Ok(Redirect::to("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_done_only_when_every_step_is() {
        let mut c = Checklist { steps: vec![step("search", None, true), step("ask", None, false)] };
        assert!(!c.done());
        c.steps[1].done = true;
        assert!(c.done());
    }
}
