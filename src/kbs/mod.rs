//! Knowledge bases: named collections of sources, `private` (owner + added members read it;
//! the team's owners and admins see that it exists, its owner and size, and may delete or
//! transfer it, but read none of it unless added) or `team` (every member reads); `manage` =
//! owner, added managers, and tenant admins of a KB they read.

pub mod handlers;
pub mod queries;

use uuid::Uuid;

use crate::{
    auth::Auth,
    error::{AppError, AppResult, ResultExt},
};
pub use queries::Kb;

/// KBs and KB members (API and forms); the dashboard and the KB page are `sources::pages`.
pub fn api_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, put};
    use handlers as k;
    axum::Router::new()
        .route("/api/kbs", get(k::list_kbs).post(k::create_kb))
        .route("/api/kbs/deleted", get(k::list_deleted))
        .route("/api/kbs/{id}", get(k::get_kb).patch(k::patch_kb).delete(k::delete_kb))
        .route("/api/kbs/{id}/delete-preview", get(k::delete_preview))
        .route("/api/kbs/{id}/restore", axum::routing::post(k::restore_kb))
        .route("/api/kbs/{id}/transfer", axum::routing::post(k::transfer_kb))
        .route("/api/kbs/{id}/members", get(k::list_kb_members))
        .route("/api/kbs/{id}/members/{user}", put(k::put_kb_member).delete(k::delete_kb_member))
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use crate::error::Items;
    use handlers as k;
    d.op("get", "/api/kbs").summary("The knowledge bases the caller can see").ok::<Items<Kb>>(200);
    d.op("post", "/api/kbs").summary("Create a knowledge base").body::<k::NewKb>().ok::<Kb>(201).errors(&[(409, &["conflict"])]);
    d.op("get", "/api/kbs/deleted").summary("Deleted knowledge bases and when they are purged").ok::<Items<k::DeletedKb>>(200);
    d.op("get", "/api/kbs/{id}").summary("One knowledge base").ok::<Kb>(200);
    d.op("patch", "/api/kbs/{id}")
        .summary("Rename, describe or change the visibility of a knowledge base")
        .body::<k::KbPatch>()
        .ok::<Kb>(200)
        .errors(&[(409, &["conflict"])]);
    d.op("delete", "/api/kbs/{id}").summary("Delete a knowledge base (restorable during the grace period)").empty(204);
    d.op("get", "/api/kbs/{id}/delete-preview").summary("What deleting the knowledge base takes away").ok::<DeleteImpact>(200);
    d.op("post", "/api/kbs/{id}/restore")
        .summary("Restore a deleted knowledge base")
        .ok::<Kb>(200)
        .errors(&[(409, &["conflict"])]);
    d.op("post", "/api/kbs/{id}/transfer")
        .summary("Give the knowledge base to another team member (its owner or a team admin)")
        .body::<k::KbTransfer>()
        .ok::<Kb>(200);
    d.op("get", "/api/kbs/{id}/members").summary("The knowledge base's added members").ok::<Items<queries::KbMember>>(200);
    d.op("put", "/api/kbs/{id}/members/{user}")
        .summary("Add a team member to the knowledge base (or change whether they manage it)")
        .body::<k::KbMemberBody>()
        .ok::<k::KbMemberSet>(200);
    d.op("delete", "/api/kbs/{id}/members/{user}").summary("Remove a member from the knowledge base").empty(204);
}

pub fn page_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, post};
    use handlers as k;
    axum::Router::new()
        .route("/kbs", post(k::create_form))
        .route("/kbs/{id}/edit", post(k::update_form))
        .route("/kbs/{id}/delete", get(k::delete_confirm).post(k::delete_form))
        .route("/kbs/{id}/restore", post(k::restore_form))
        .route("/kbs/{id}/transfer", post(k::transfer_form))
        .route("/kbs/{id}/members", post(k::member_form))
        .route("/kbs/{id}/members/{user}/remove", post(k::member_remove_form))
}

/// What deleting a KB (or removing a source) takes away, for the confirmation.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteImpact {
    /// Sources that leave lists and search.
    pub sources: i64,
    /// Evidence blocks (passages) that leave search.
    pub blocks: i64,
    /// How long it can be restored.
    pub grace_secs: u64,
}

/// The grace period in whole days, counted in the page's language ("7 days", "1 day"; at
/// least 1 when shorter than a day but not zero).
pub fn grace_days(ctx: &crate::web::PageCtx, grace: std::time::Duration) -> String {
    let d = grace.as_secs().div_ceil(86_400);
    ctx.count(d.max(u64::from(!grace.is_zero())), "day")
}

/// "12 sources become stale and leave search (3 400 passages) … restorable for 7 days".
pub fn delete_message(ctx: &crate::web::PageCtx, name: &str, i: &DeleteImpact) -> String {
    ctx.t("kbpage.delete_kb_message")
        .replace("{name}", name)
        .replace("{sources}", &ctx.count(i.sources, "source"))
        .replace("{blocks}", &ctx.count(i.blocks, "passage"))
        .replace("{days}", &grace_days(ctx, std::time::Duration::from_secs(i.grace_secs)))
}

pub fn validate_visibility(v: &str) -> AppResult<&str> {
    match v {
        "private" | "team" => Ok(v),
        _ => Err(AppError::invalid("visibility", "private or team")),
    }
}

pub fn validate_name(n: &str) -> AppResult<String> {
    let n = n.trim();
    if n.is_empty() || n.chars().count() > 200 || n.chars().any(char::is_control) {
        return Err(AppError::invalid("name", "name must be 1–200 characters"));
    }
    Ok(n.to_string())
}

/// A KB the caller can see (404 otherwise: no existence leak).
pub async fn visible(conn: &mut crate::db::TenantTx, auth: &Auth, id: Uuid) -> AppResult<Kb> {
    queries::get(conn, auth.user_id, auth.role.is_admin(), id).await?.ok_or(AppError::NotFound)
}

/// A KB whose contents the caller reads (404 otherwise, also for an admin who only sees that a
/// private KB exists: its contents answer as if it did not).
pub async fn readable(conn: &mut crate::db::TenantTx, auth: &Auth, id: Uuid) -> AppResult<Kb> {
    visible(conn, auth, id).await.and_then(|kb| if kb.can_read { Ok(kb) } else { Err(AppError::NotFound) })
}

/// A KB the caller may delete or restore: 404 when invisible, 403 otherwise.
pub fn deletable(kb: Kb) -> AppResult<Kb> {
    if !kb.can_delete {
        return Err(AppError::forbidden("you cannot delete this knowledge base"));
    }
    Ok(kb)
}

/// A KB the caller may manage: 404 when invisible, 403 when only readable.
pub async fn managed(conn: &mut crate::db::TenantTx, auth: &Auth, id: Uuid) -> AppResult<Kb> {
    let kb = visible(conn, auth, id).await?;
    if !kb.can_manage {
        return Err(AppError::forbidden("you cannot manage this knowledge base"));
    }
    Ok(kb)
}

pub async fn create(
    conn: &mut crate::db::TenantTx,
    auth: &Auth,
    name: &str,
    description: &str,
    visibility: &str,
    owner: Option<Uuid>,
) -> AppResult<Kb> {
    let name = validate_name(name)?;
    let visibility = validate_visibility(visibility)?;
    let owner = owner.unwrap_or(auth.user_id);
    if owner != auth.user_id {
        auth.require_admin()?;
    }
    let id = queries::insert(conn, auth.tenant_id, &name, description.trim(), visibility, owner)
        .await
        .on_unique("a knowledge base with this name exists")
        .on_foreign_key(|| AppError::invalid("ownerId", "not a member of this team"))?;
    visible(conn, auth, id).await
}
