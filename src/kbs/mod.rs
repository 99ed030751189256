//! Knowledge bases: named collections of sources, `private` (owner + added members) or
//! `team` (every member reads); `manage` = owner, added managers, tenant admins.

pub mod handlers;
pub mod queries;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::{
    auth::Auth,
    error::{AppError, AppResult},
};
pub use queries::Kb;

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
pub async fn visible(conn: &mut PgConnection, auth: &Auth, id: Uuid) -> AppResult<Kb> {
    queries::get(conn, auth.user_id, auth.role.is_admin(), id).await?.ok_or(AppError::NotFound)
}

/// A KB the caller may manage: 404 when invisible, 403 when only readable.
pub async fn managed(conn: &mut PgConnection, auth: &Auth, id: Uuid) -> AppResult<Kb> {
    let kb = visible(conn, auth, id).await?;
    if !kb.can_manage {
        return Err(AppError::forbidden("you cannot manage this knowledge base"));
    }
    Ok(kb)
}

pub async fn create(
    conn: &mut PgConnection,
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
    let id = match queries::insert(conn, auth.tenant_id, &name, description.trim(), visibility, owner).await {
        Ok(id) => id,
        Err(sqlx::Error::Database(d)) if d.is_unique_violation() => {
            return Err(AppError::Conflict("a knowledge base with this name exists".into()));
        }
        Err(sqlx::Error::Database(d)) if d.is_foreign_key_violation() => {
            return Err(AppError::invalid("ownerId", "not a member of this team"));
        }
        Err(e) => return Err(e.into()),
    };
    visible(conn, auth, id).await
}
