//! The KB page: its sources, uploads, members, grants.

use askama::Template;
use axum::{
    extract::{Path, State},
    response::Response,
};

use uuid::Uuid;

use super::{Source, queries};
use crate::{
    auth::directory::{self as tq, Member},
    error::AppResult,
    grants::{self, Grant, Permission},
    kbs::{self, Kb},
    state::AppState,
    web::{Page, PageCtx, render},
};

#[derive(Template)]
#[template(path = "kbs/show.html")]
struct KbPage {
    ctx: PageCtx,
    kb: Kb,
    sources: Vec<Source>,
    /// Removed sources (restorable) with their purge time.
    removed: Vec<(Source, String)>,
    /// Evidence blocks per source (what removing it takes out of search).
    block_counts: std::collections::HashMap<Uuid, i64>,
    /// The grants to register from, each with its picker label.
    grants: Vec<(Grant, String)>,
    kb_members: Vec<kbs::queries::KbMember>,
    team: Vec<Member>,
    upload_max_mb: u64,
    upload_max_bytes: u64,
    /// The upload input's `accept`: the kinds the server takes.
    accept: String,
    grace_days: String,
    delete_message: String,
    stuck_after: std::time::Duration,
    /// The assistant panel.
    ai: crate::web::ai_panel::AiPanel,
    /// The "Register from a directory" form as it was sent, when it was refused.
    register: RegisterFormState,
}

/// The register form's values and its path's error (a refused form comes back filled in).
#[derive(Default)]
pub struct RegisterFormState {
    pub grant_id: Option<Uuid>,
    pub path: String,
    pub include: String,
    pub exclude: String,
    pub error: Option<String>,
}

impl RegisterFormState {
    fn selected(&self, grant: &Uuid) -> bool {
        self.grant_id.as_ref() == Some(grant)
    }
}

pub async fn kb_page(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    kb_page_for(&state, page, id, RegisterFormState::default()).await
}

/// The KB page, with the register form as given (its values and message when refused).
pub async fn kb_page_for(state: &AppState, page: Page, id: Uuid, register: RegisterFormState) -> AppResult<Response> {
    let mut tx = page.auth.tx(state).await?;
    let kb = kbs::visible(&mut tx, &page.auth, id).await?;
    let sources = queries::list(&mut tx, id).await?;
    let removed = queries::removed(&mut tx, id).await?;
    let block_counts = queries::block_counts(&mut tx, id).await?;
    // A private KB an admin only sees exist: its size is counted for them (no block is theirs to read).
    let kb_blocks = if kb.can_read { block_counts.values().sum() } else { kbs::queries::block_count(&mut tx, id).await? };
    let grants = grants::queries::active_for_user(&mut tx, page.auth.user_id)
        .await?
        .into_iter()
        .filter(|g| g.permission == Permission::ReadIndex)
        .collect::<Vec<_>>();
    let labels = grants::picker_labels(&grants.iter().map(|g| g.root_path.as_str()).collect::<Vec<_>>());
    let grants = grants.into_iter().zip(labels).collect();
    let kb_members = kbs::queries::members(&mut tx, id).await?;
    let mut team = if kb.can_manage || kb.can_transfer { tq::members(&mut tx).await? } else { Vec::new() };
    // An admin outside a private KB may give it to someone else, never to themselves.
    if !kb.can_read {
        team.retain(|m| m.user_id != page.auth.user_id);
    }
    tx.commit().await?;
    let upload_max_mb = state.config.upload_max_bytes.div_ceil(1024 * 1024);
    let grace_days = kbs::grace_days(&page.ctx, state.config.delete_grace);
    let impact =
        kbs::DeleteImpact { sources: kb.source_count, blocks: kb_blocks, grace_secs: state.config.delete_grace.as_secs() };
    let delete_message = kbs::delete_message(&page.ctx, &kb.name, &impact);
    let removed = removed
        .into_iter()
        .map(|r| {
            let when = super::purge_after(&state.config, &r).map(|p| p.format("%Y-%m-%d %H:%M UTC").to_string());
            (r, when.unwrap_or_default())
        })
        .collect();
    let ai = crate::web::ai_panel::AiPanel::for_kb(page.ctx.lang, id);
    render(KbPage {
        ctx: page.ctx,
        kb,
        sources,
        removed,
        block_counts,
        grants,
        kb_members,
        team,
        upload_max_mb,
        upload_max_bytes: state.config.upload_max_bytes,
        accept: super::ACCEPTED_EXTENSIONS.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(","),
        grace_days,
        delete_message,
        stuck_after: super::events::stuck_after(&state.config),
        ai,
        register,
    })
}
