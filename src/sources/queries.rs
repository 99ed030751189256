//! SQL for sources. Rows are visible only through a visible KB (policy `source_kb_visible`).

use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::evidence::SourceKind;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Source {
    pub id: Uuid,
    pub kb_id: Uuid,
    pub origin: String,
    pub grant_id: Option<Uuid>,
    pub resource_path: String,
    pub kind: String,
    pub size_bytes: i64,
    pub mtime: Option<chrono::DateTime<chrono::Utc>>,
    pub sha256: String,
    pub status: String,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub provider: Option<String>,
    /// sha256 of the version whose evidence is in the index (None before the first parse).
    pub indexed_hash: Option<String>,
    pub pages: Option<i32>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let error = self.error_code.as_ref().map(|c| json!({"code": c, "message": self.error_message}));
        json!({
            "id": self.id, "kbId": self.kb_id, "origin": self.origin, "grantId": self.grant_id,
            "resourcePath": self.resource_path, "kind": self.kind, "sizeBytes": self.size_bytes,
            "mtime": self.mtime, "sha256": self.sha256, "status": self.status, "error": error,
            "provider": self.provider, "indexedHash": self.indexed_hash, "pages": self.pages, "createdAt": self.created_at, "updatedAt": self.updated_at,
        })
        .serialize(s)
    }
}

impl Source {
    pub fn file_name(&self) -> &str {
        self.resource_path.rsplit('/').next().unwrap_or(&self.resource_path)
    }
}

const COLS: &str = "id, kb_id, origin, grant_id, resource_path, kind, size_bytes, mtime, sha256, status,
    error_code, error_message, provider, indexed_hash, pages, created_at, updated_at";

/// What registration knows about a file.
#[derive(Clone, Debug)]
pub struct NewSource<'a> {
    pub kb_id: Uuid,
    pub grant_id: Option<Uuid>,
    pub resource_path: &'a str,
    pub kind: SourceKind,
    pub size_bytes: i64,
    pub mtime: Option<chrono::DateTime<chrono::Utc>>,
    pub sha256: &'a str,
}

/// Insert, or return the existing source for the same (KB, grant, path): registration is
/// idempotent. The bool is true when a row was created.
pub async fn upsert(conn: &mut PgConnection, tenant: Uuid, by: Uuid, n: &NewSource<'_>) -> sqlx::Result<(Source, bool)> {
    let origin = if n.grant_id.is_some() { "grant" } else { "upload" };
    let created: Option<Source> = sqlx::query_as(&format!(
        "insert into source (tenant_id, id, kb_id, origin, grant_id, resource_path, kind, size_bytes, mtime, sha256, created_by)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         on conflict (tenant_id, kb_id, grant_id, resource_path) do nothing
         returning {COLS}"
    ))
    .bind(tenant)
    .bind(Uuid::new_v4())
    .bind(n.kb_id)
    .bind(origin)
    .bind(n.grant_id)
    .bind(n.resource_path)
    .bind(n.kind)
    .bind(n.size_bytes)
    .bind(n.mtime)
    .bind(n.sha256)
    .bind(by)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(s) = created {
        return Ok((s, true));
    }
    let existing = sqlx::query_as(&format!(
        "select {COLS} from source where kb_id = $1 and grant_id is not distinct from $2 and resource_path = $3"
    ))
    .bind(n.kb_id)
    .bind(n.grant_id)
    .bind(n.resource_path)
    .fetch_one(conn)
    .await?;
    Ok((existing, false))
}

/// An upload replacing an earlier upload of the same name gets the new content.
pub async fn replace_upload_content(conn: &mut PgConnection, id: Uuid, size: i64, sha256: &str) -> sqlx::Result<Source> {
    sqlx::query_as(&format!(
        "update source set size_bytes = $2, sha256 = $3, mtime = now(),
             status = case when sha256 = $3 then status else 'pending' end
         where id = $1 returning {COLS}"
    ))
    .bind(id)
    .bind(size)
    .bind(sha256)
    .fetch_one(conn)
    .await
}

pub async fn list(conn: &mut PgConnection, kb: Uuid) -> sqlx::Result<Vec<Source>> {
    sqlx::query_as(&format!("select {COLS} from source where kb_id = $1 order by resource_path")).bind(kb).fetch_all(conn).await
}

/// Most recently changed sources across the KBs the caller can see.
pub async fn recent(conn: &mut PgConnection, limit: i64) -> sqlx::Result<Vec<(Source, String)>> {
    let rows: Vec<RecentRow> = sqlx::query_as(&format!(
        "select {cols}, k.name as kb_name from source s join kb k on k.tenant_id = s.tenant_id and k.id = s.kb_id
         order by s.updated_at desc limit $1",
        cols = COLS.split(',').map(|c| format!("s.{}", c.trim())).collect::<Vec<_>>().join(", ")
    ))
    .bind(limit)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.source, r.kb_name)).collect())
}

#[derive(sqlx::FromRow)]
struct RecentRow {
    #[sqlx(flatten)]
    source: Source,
    kb_name: String,
}

/// The one rule every reader of a source's text, map or bytes applies (as SQL on the alias
/// `s`): a source under a revoked grant is not readable, whatever its status says.
pub const GRANT_ACTIVE: &str = "(s.grant_id is null or exists (select 1 from dir_grant g \
     where g.tenant_id = s.tenant_id and g.id = s.grant_id and g.revoked_at is null))";

/// A source the caller may read: visible (RLS) and not under a revoked grant.
pub async fn readable(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Source>> {
    sqlx::query_as(&format!("select {COLS} from source s where s.id = $1 and {GRANT_ACTIVE}")).bind(id).fetch_optional(conn).await
}

pub async fn get(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Source>> {
    sqlx::query_as(&format!("select {COLS} from source where id = $1")).bind(id).fetch_optional(conn).await
}

pub async fn delete(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<bool> {
    Ok(sqlx::query("delete from source where id = $1").bind(id).execute(conn).await?.rows_affected() == 1)
}

/// Remember a registered directory so files added later can be picked up.
#[allow(clippy::too_many_arguments)]
pub async fn upsert_folder(
    conn: &mut PgConnection,
    tenant: Uuid,
    kb: Uuid,
    grant: Uuid,
    dir: &str,
    include: &[String],
    exclude: &[String],
    by: Uuid,
) -> sqlx::Result<Uuid> {
    sqlx::query_scalar(
        "insert into kb_folder (tenant_id, id, kb_id, grant_id, dir_path, include_globs, exclude_globs, created_by)
         values ($1, $2, $3, $4, $5, $6, $7, $8)
         on conflict (tenant_id, kb_id, grant_id, dir_path)
         do update set include_globs = excluded.include_globs, exclude_globs = excluded.exclude_globs
         returning id",
    )
    .bind(tenant)
    .bind(Uuid::new_v4())
    .bind(kb)
    .bind(grant)
    .bind(dir)
    .bind(include)
    .bind(exclude)
    .bind(by)
    .fetch_one(conn)
    .await
}
