//! SQL for sources. Rows are visible only through a visible KB (policy `source_kb_visible`).

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::{TenantTx, include_deleted};

use crate::evidence::{SourceKind, SourceStatus};

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Source {
    pub id: Uuid,
    pub kb_id: Uuid,
    pub origin: String,
    pub grant_id: Option<Uuid>,
    pub resource_path: String,
    pub kind: SourceKind,
    pub size_bytes: i64,
    pub mtime: Option<chrono::DateTime<chrono::Utc>>,
    pub sha256: String,
    pub status: SourceStatus,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub provider: Option<String>,
    /// sha256 of the version whose evidence is in the index (None before the first parse).
    pub indexed_hash: Option<String>,
    pub pages: Option<i32>,
    /// The parse stopped at the row cap: the rows kept (the rest of the file is not indexed).
    pub truncated_rows: Option<i32>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// The open job's phase (`queued`, `reading`, `parsing`, `indexing`), None without one.
    pub progress_phase: Option<String>,
    pub progress_done: Option<i32>,
    pub progress_total: Option<i32>,
    /// When the running attempt began.
    pub progress_started_at: Option<chrono::DateTime<chrono::Utc>>,
    pub progress_attempt: Option<i32>,
    /// Removed (restorable until the purge); such rows are only read by the trash views.
    pub deleted_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A source's ingest progress, as the API and the KB page's live status show it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressView {
    pub phase: String,
    pub done: Option<i32>,
    pub total: Option<i32>,
    pub attempt: Option<i32>,
    pub max_attempts: i32,
    pub started_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Seconds since the attempt began (by the database's clock when read).
    pub elapsed_secs: Option<i64>,
}

/// A source as the API writes it (`error` = `{code, message}` of the last failure).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SourceView<'a> {
    id: Uuid,
    kb_id: Uuid,
    origin: &'a str,
    grant_id: Option<Uuid>,
    resource_path: &'a str,
    kind: SourceKind,
    size_bytes: i64,
    mtime: Option<chrono::DateTime<chrono::Utc>>,
    sha256: &'a str,
    status: SourceStatus,
    error: Option<SourceError<'a>>,
    provider: Option<&'a str>,
    indexed_hash: Option<&'a str>,
    pages: Option<i32>,
    /// The parse stopped at the per-file row cap (spreadsheets, CSV): the rows kept; the
    /// rest of the file is not in the index.
    truncated_rows: Option<i32>,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
    progress: Option<ProgressView>,
    deleted_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Why the last parse failed.
#[derive(Serialize, schemars::JsonSchema)]
struct SourceError<'a> {
    code: &'a str,
    message: Option<&'a str>,
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SourceView {
            id: self.id,
            kb_id: self.kb_id,
            origin: &self.origin,
            grant_id: self.grant_id,
            resource_path: &self.resource_path,
            kind: self.kind,
            size_bytes: self.size_bytes,
            mtime: self.mtime,
            sha256: &self.sha256,
            status: self.status,
            error: self.error_code.as_deref().map(|code| SourceError { code, message: self.error_message.as_deref() }),
            provider: self.provider.as_deref(),
            indexed_hash: self.indexed_hash.as_deref(),
            pages: self.pages,
            truncated_rows: self.truncated_rows,
            created_at: self.created_at,
            updated_at: self.updated_at,
            progress: self.progress(),
            deleted_at: self.deleted_at,
        }
        .serialize(s)
    }
}

impl schemars::JsonSchema for Source {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Source".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <SourceView<'_> as schemars::JsonSchema>::json_schema(g)
    }
}

impl Source {
    pub fn file_name(&self) -> &str {
        self.resource_path.rsplit('/').next().unwrap_or(&self.resource_path)
    }

    /// The open job's progress, if any.
    pub fn progress(&self) -> Option<ProgressView> {
        let phase = self.progress_phase.clone()?;
        Some(ProgressView {
            phase,
            done: self.progress_done,
            total: self.progress_total,
            attempt: self.progress_attempt,
            max_attempts: super::queue::MAX_ATTEMPTS,
            started_at: self.progress_started_at,
            elapsed_secs: self.progress_started_at.map(|t| (chrono::Utc::now() - t).num_seconds().max(0)),
        })
    }

    /// Whether the retry action applies: a failure a new attempt can mend (also one that kept
    /// the old version), or a source waiting or parsing for longer than a parse may take
    /// (`stuck_after`).
    pub fn retryable(&self, stuck_after: std::time::Duration) -> bool {
        if let Some(code) = &self.error_code {
            return super::retry_helps(code);
        }
        if self.status == SourceStatus::Failed {
            return true;
        }
        let waited = self.progress_started_at.unwrap_or(self.updated_at);
        matches!(self.status, SourceStatus::Pending | SourceStatus::Parsing)
            && (chrono::Utc::now() - waited).to_std().is_ok_and(|d| d > stuck_after)
    }
}

// Every statement below that returns `Source` rows names the same columns (the query macros
// need the whole statement as one literal).

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
    let created = sqlx::query_as!(
        Source,
        r#"insert into source (tenant_id, id, kb_id, origin, grant_id, resource_path, kind, size_bytes, mtime, sha256, created_by)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         on conflict (tenant_id, kb_id, grant_id, resource_path) do nothing
         returning id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _""#,
        tenant,
        Uuid::new_v4(),
        n.kb_id,
        origin,
        n.grant_id,
        n.resource_path,
        n.kind as _,
        n.size_bytes,
        n.mtime as _,
        n.sha256,
        by,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(s) = created {
        return Ok((s, true));
    }
    let existing = sqlx::query_as!(
        Source,
        r#"select id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from source where tenant_id = $4 and kb_id = $1 and grant_id is not distinct from $2 and resource_path = $3"#,
        n.kb_id,
        n.grant_id,
        n.resource_path,
        tenant,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(s) = existing {
        return Ok((s, false));
    }
    // Registering a removed source again restores it (it counts as new).
    let id = removed_at_path(conn, tenant, n.kb_id, n.grant_id, n.resource_path).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok((restore_in(conn, tenant, id).await?.ok_or(sqlx::Error::RowNotFound)?, true))
}

/// The removed (soft-deleted) source at this path, if any.
pub async fn removed_at_path(
    conn: &mut PgConnection,
    tenant: Uuid,
    kb: Uuid,
    grant: Option<Uuid>,
    path: &str,
) -> sqlx::Result<Option<Uuid>> {
    include_deleted(conn, true).await?;
    let id = sqlx::query_scalar!(
        "select id from source where tenant_id = $4 and kb_id = $1 and grant_id is not distinct from $2 and resource_path = $3
             and deleted_at is not null",
        kb,
        grant,
        path,
        tenant,
    )
    .fetch_optional(&mut *conn)
    .await?;
    include_deleted(conn, false).await?;
    Ok(id)
}

/// Remove a source: hidden from every reader at once, restorable until purged.
pub async fn soft_delete(tx: &mut TenantTx, id: Uuid, by: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    include_deleted(tx, true).await?;
    let r = sqlx::query!(
        "update source set deleted_at = now(), deleted_by = $2 where tenant_id = $3 and id = $1 and deleted_at is null",
        id,
        by,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    include_deleted(tx, false).await?;
    Ok(r.rows_affected() == 1)
}

/// Bring a removed source back (its evidence was never deleted: it is searchable again).
pub async fn restore(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<Source>> {
    let tenant = tx.tenant_id();
    restore_in(tx, tenant, id).await
}

/// [`restore`] on a connection of a transaction in `tenant`.
async fn restore_in(conn: &mut PgConnection, tenant: Uuid, id: Uuid) -> sqlx::Result<Option<Source>> {
    include_deleted(conn, true).await?;
    let r = sqlx::query_as!(
        Source,
        r#"update source set deleted_at = null, deleted_by = null where tenant_id = $2 and id = $1 and deleted_at is not null
         returning id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _""#,
        id,
        tenant,
    )
    .fetch_optional(&mut *conn)
    .await?;
    include_deleted(conn, false).await?;
    Ok(r)
}

/// A removed source of a visible KB.
pub async fn get_removed(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<Source>> {
    let tenant = tx.tenant_id();
    include_deleted(tx, true).await?;
    let r = sqlx::query_as!(
        Source,
        r#"select id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from source s where s.tenant_id = $2 and s.id = $1 and s.deleted_at is not null
             and exists (select 1 from kb where kb.tenant_id = s.tenant_id and kb.id = s.kb_id and kb.deleted_at is null)"#,
        id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await?;
    include_deleted(tx, false).await?;
    Ok(r)
}

/// The removed sources of a KB, most recent first.
pub async fn removed(tx: &mut TenantTx, kb: Uuid) -> sqlx::Result<Vec<Source>> {
    let tenant = tx.tenant_id();
    include_deleted(tx, true).await?;
    let r = sqlx::query_as!(
        Source,
        r#"select id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from source where tenant_id = $2 and kb_id = $1 and deleted_at is not null order by deleted_at desc"#,
        kb,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    include_deleted(tx, false).await?;
    Ok(r)
}

/// A source of this KB with exactly this content (an upload that is already there).
pub async fn same_content(tx: &mut TenantTx, kb: Uuid, sha256: &str) -> sqlx::Result<Option<Source>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Source,
        r#"select id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from source where tenant_id = $3 and kb_id = $1 and sha256 = $2 order by created_at limit 1"#,
        kb,
        sha256,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// Before a retry: the error goes; a source without an indexed version waits again.
pub async fn reset_for_retry(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<Source>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Source,
        r#"update source set error_code = null, error_message = null,
             status = case when indexed_hash is null and status <> 'stale' then 'pending' else status end
         where tenant_id = $2 and id = $1 returning id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _""#,
        id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// Evidence blocks per source of a KB.
pub async fn block_counts(tx: &mut TenantTx, kb: Uuid) -> sqlx::Result<std::collections::HashMap<Uuid, i64>> {
    let tenant = tx.tenant_id();
    let rows = sqlx::query!(
        r#"select source_id, count(*) as "n!" from evidence_block where tenant_id = $2 and kb_id = $1 group by source_id"#,
        kb,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows.into_iter().map(|r| (r.source_id, r.n)).collect())
}

/// Whether any visible source is indexed (the dashboard checklist's "add documents").
pub async fn any_indexed(tx: &mut TenantTx) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(r#"select exists (select 1 from source where tenant_id = $1 and status = 'indexed') as "any!""#, tenant)
        .fetch_one(&mut **tx)
        .await
}

/// How many evidence blocks of a source are searchable (what removing it takes out of search).
pub async fn block_count(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<i64> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(r#"select count(*) as "n!" from evidence_block where tenant_id = $2 and source_id = $1"#, id, tenant)
        .fetch_one(&mut **tx)
        .await
}

/// An upload replacing an earlier upload of the same name gets the new content.
pub async fn replace_upload_content(tx: &mut TenantTx, id: Uuid, size: i64, sha256: &str) -> sqlx::Result<Source> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Source,
        r#"update source set size_bytes = $2, sha256 = $3, mtime = now(),
             status = case when sha256 = $3 then status else 'pending' end
         where tenant_id = $4 and id = $1 returning id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _""#,
        id,
        size,
        sha256,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

pub async fn list(tx: &mut TenantTx, kb: Uuid) -> sqlx::Result<Vec<Source>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Source,
        r#"select id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from source where tenant_id = $2 and kb_id = $1 order by resource_path"#,
        kb,
        tenant,
    )
    .fetch_all(&mut **tx)
        .await
}

/// Most recently changed sources across the KBs the caller can see.
pub async fn recent(tx: &mut TenantTx, limit: i64) -> sqlx::Result<Vec<(Source, String)>> {
    let tenant = tx.tenant_id();
    // Sources whose KB is visible (policy `source_kb_visible`), then those KBs' names.
    let sources = sqlx::query_as!(
        Source,
        r#"select id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from source where tenant_id = $2 order by updated_at desc limit $1"#,
        limit,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    let kb_ids: Vec<Uuid> = sources.iter().map(|s| s.kb_id).collect();
    let names: std::collections::HashMap<Uuid, String> =
        sqlx::query!("select id, name from kb where tenant_id = $2 and id = any($1)", &kb_ids, tenant)
            .fetch_all(&mut **tx)
            .await?
            .into_iter()
            .map(|k| (k.id, k.name))
            .collect();
    Ok(sources
        .into_iter()
        .filter_map(|s| {
            let name = names.get(&s.kb_id)?.clone();
            Some((s, name))
        })
        .collect())
}

/// A source the caller may read: visible (RLS) and not under a revoked grant.
pub async fn readable(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<Source>> {
    let tenant = tx.tenant_id();
    // A view's columns are nullable to the macros: `!` says which ones are not.
    sqlx::query_as!(
        Source,
        r#"select id as "id!", kb_id as "kb_id!", origin as "origin!", grant_id, resource_path as "resource_path!",
             kind as "kind!: _", size_bytes as "size_bytes!", mtime as "mtime: _", sha256 as "sha256!", status as "status!: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows,
             created_at as "created_at!: _", updated_at as "updated_at!: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from readable_source s where s.tenant_id = $2 and s.id = $1"#,
        id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

pub async fn get(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<Option<Source>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Source,
        r#"select id, kb_id, origin, grant_id, resource_path, kind as "kind: _", size_bytes, mtime as "mtime: _", sha256, status as "status: _",
             error_code, error_message, provider, indexed_hash, pages, truncated_rows, created_at as "created_at: _", updated_at as "updated_at: _",
             progress_phase, progress_done, progress_total, progress_started_at as "progress_started_at: _", progress_attempt,
             deleted_at as "deleted_at: _"
         from source where tenant_id = $2 and id = $1"#,
        id,
        tenant,
    )
    .fetch_optional(&mut **tx)
        .await
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
    sqlx::query_scalar!(
        "insert into kb_folder (tenant_id, id, kb_id, grant_id, dir_path, include_globs, exclude_globs, created_by)
         values ($1, $2, $3, $4, $5, $6, $7, $8)
         on conflict (tenant_id, kb_id, grant_id, dir_path)
         do update set include_globs = excluded.include_globs, exclude_globs = excluded.exclude_globs
         returning id",
        tenant,
        Uuid::new_v4(),
        kb,
        grant,
        dir,
        include,
        exclude,
        by,
    )
    .fetch_one(conn)
    .await
}
