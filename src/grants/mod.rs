//! Directory grants: an admin lets one member (or all) use a server directory, with
//! permission `read` or `read_index` (SPEC §3a). Every file reference afterwards goes
//! through [`resolve_for_index`] and is stored relative to the grant root.

pub mod handlers;
pub mod paths;
pub mod queries;
pub mod roots;

use std::path::PathBuf;

use uuid::Uuid;

use crate::{
    auth::Auth,
    auth::directory as tq,
    config::Config,
    error::{AppError, AppResult},
};
pub use queries::Grant;

/// Grants API and the admin grants page.
pub fn api_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::get;
    use handlers as g;
    axum::Router::new()
        .route("/api/grants", get(g::list_grants).post(g::create_grant))
        .route("/api/grants/{id}", get(g::get_grant).delete(g::revoke_grant))
        .route("/api/grants/{id}/impact", get(g::grant_impact))
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use handlers as g;
    d.op("get", "/api/grants")
        .summary("Directory grants (admins: all; members: their own)")
        .ok::<crate::error::Items<Grant>>(200);
    d.op("post", "/api/grants")
        .summary("Grant a directory to a member, by email or to all members (admins)")
        .body::<g::NewGrant>()
        .ok::<Grant>(201)
        .ok::<Grant>(200)
        .errors(&[(403, &["path_outside_grant"]), (409, &["conflict"])]);
    d.op("get", "/api/grants/{id}").summary("One grant").ok::<Grant>(200);
    d.op("delete", "/api/grants/{id}").summary("Revoke a grant (its sources become stale)").ok::<g::Revoked>(200);
    d.op("get", "/api/grants/{id}/impact").summary("What revoking the grant would do").ok::<queries::RevokeImpact>(200);
}

pub fn page_router() -> axum::Router<crate::state::AppState> {
    use axum::routing::get;
    use handlers as g;
    axum::Router::new()
        .route("/admin/grants", get(g::grants_page).post(g::grants_add))
        .route("/admin/grants/{id}/revoke", get(g::grants_revoke_page).post(g::grants_revoke))
}

/// What a grant allows (`dir_grant.permission`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Open and read the files under the directory.
    Read,
    /// Also register them in a KB, which indexes them.
    ReadIndex,
}

impl std::str::FromStr for Permission {
    type Err = AppError;
    fn from_str(s: &str) -> AppResult<Self> {
        match s {
            "read" => Ok(Permission::Read),
            "read_index" => Ok(Permission::ReadIndex),
            _ => Err(AppError::invalid("permission", "read or read_index")),
        }
    }
}

crate::db::text_column!(Permission);

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Permission {
    pub fn parse(s: &str) -> AppResult<Self> {
        s.parse()
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::ReadIndex => "read_index",
        }
    }
}

/// Who receives a grant.
#[derive(Clone, Debug)]
pub enum Grantee {
    AllMembers,
    Email(String),
    User(Uuid),
}

/// Create a grant (admins only). Granting the same thing twice returns the existing grant.
pub async fn create(
    conn: &mut crate::db::TenantTx,
    cfg: &Config,
    auth: &Auth,
    path: &str,
    grantee: Grantee,
    permission: Permission,
) -> AppResult<(Grant, bool)> {
    auth.require_admin()?;
    let root = paths::grantable_dir(path, &cfg.grantable_roots, &cfg.data_dir)?;
    // The operator's per-tenant roots, not only the shared MNOTE_GRANTABLE_ROOTS.
    roots::check(conn, cfg, &root).await?;
    let root = root.to_str().ok_or_else(|| AppError::invalid("path", "path is not valid UTF-8"))?;
    let user = match grantee {
        Grantee::AllMembers => None,
        Grantee::User(id) => {
            Some(tq::member(conn, id).await?.ok_or_else(|| AppError::invalid("userId", "not a member of this team"))?.user_id)
        }
        Grantee::Email(e) => Some(
            tq::member_by_email(conn, &e).await?.ok_or_else(|| AppError::invalid("email", "not a member of this team"))?.user_id,
        ),
    };
    if let Some(g) = queries::find_active(conn, root, user, permission).await? {
        return Ok((g, false));
    }
    Ok((queries::insert(conn, auth.tenant_id, root, user, permission, auth.user_id).await?, true))
}

/// A path resolved inside one of the caller's grants.
#[derive(Clone, Debug)]
pub struct GrantedPath {
    pub grant: Grant,
    pub root: PathBuf,
    pub abs: PathBuf,
    pub rel: String,
}

/// Resolve a path the caller wants to register: `grant_id` + root-relative path, or an
/// absolute path inside one of their `read_index` grants (the most specific grant wins).
/// A grant whose root is no longer one of the tenant's roots ([`roots::check`]) is skipped.
pub async fn resolve_for_index(
    conn: &mut crate::db::TenantTx,
    cfg: &Config,
    user: Uuid,
    grant_id: Option<Uuid>,
    path: &str,
) -> AppResult<GrantedPath> {
    let grants: Vec<Grant> =
        queries::active_for_user(conn, user).await?.into_iter().filter(|g| g.permission == Permission::ReadIndex).collect();
    let candidates: Vec<&Grant> = match grant_id {
        Some(id) => {
            let g = grants.iter().find(|g| g.id == id).ok_or(AppError::PathOutsideGrant)?;
            vec![g]
        }
        None => {
            if !std::path::Path::new(path.trim()).is_absolute() {
                return Err(AppError::invalid("path", "give an absolute path, or grantId with a relative path"));
            }
            grants.iter().collect()
        }
    };
    let mut refused = None;
    for g in candidates {
        let root = PathBuf::from(&g.root_path);
        if let Err(e) = roots::check(conn, cfg, &root).await {
            refused = Some(e);
            continue;
        }
        match paths::confine(&root, path) {
            Ok(c) => return Ok(GrantedPath { grant: g.clone(), root, abs: c.abs, rel: c.rel }),
            Err(AppError::PathOutsideGrant) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(refused.unwrap_or(AppError::PathOutsideGrant))
}

/// How a grant reads in a picker: its folder's name, with as many parent folders as it takes
/// to tell it apart from the other grants listed (the full server path is for admins' pages).
pub fn picker_labels(paths: &[&str]) -> Vec<String> {
    let parts: Vec<Vec<&str>> = paths.iter().map(|p| p.split('/').filter(|s| !s.is_empty()).collect()).collect();
    let tail = |p: &[&str], n: usize| p[p.len().saturating_sub(n)..].join("/");
    parts
        .iter()
        .map(|p| {
            let mut n = 1;
            while n < p.len() && parts.iter().filter(|q| q.len() >= n && tail(q, n) == tail(p, n)).count() > 1 {
                n += 1;
            }
            if p.is_empty() { "/".to_string() } else { tail(p, n) }
        })
        .collect()
}

#[cfg(test)]
mod picker_tests {
    use super::picker_labels;

    #[test]
    fn a_grant_reads_as_its_folder_with_parents_only_where_two_share_a_name() {
        let got = picker_labels(&["/srv/share/finance", "/srv/share/team/notes", "/srv/share/legal/notes", "/"]);
        assert_eq!(got, ["finance", "team/notes", "legal/notes", "/"]);
    }
}
