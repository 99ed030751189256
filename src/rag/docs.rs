//! `rag_doc`: the LightRAG document mirroring each source of a bound KB, and the sources a
//! binding should hold.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::TenantTx;

use crate::evidence::SourceKind;

/// LightRAG's view of a document, as we track it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DocState {
    /// Sent; LightRAG has not finished parsing it (its `pending`, `parsing`, `analyzing`).
    Pending,
    Processing,
    Processed,
    /// LightRAG failed it, or we could not send it (see the error).
    Failed,
    /// LightRAG lost it (storage wiped, deleted behind our back): sent again next pass.
    Deleted,
}

impl DocState {
    pub fn as_str(self) -> &'static str {
        match self {
            DocState::Pending => "pending",
            DocState::Processing => "processing",
            DocState::Processed => "processed",
            DocState::Failed => "failed",
            DocState::Deleted => "deleted",
        }
    }

    fn parse(s: &str) -> DocState {
        match s {
            "processing" => DocState::Processing,
            "processed" => DocState::Processed,
            "failed" => DocState::Failed,
            "deleted" => DocState::Deleted,
            _ => DocState::Pending,
        }
    }

    /// LightRAG's per-document status word (lowercase on the wire; `DocStatus.X` leniently).
    pub fn of_lightrag(status: &str) -> DocState {
        let s = status.rsplit('.').next().unwrap_or(status).to_ascii_lowercase();
        match s.as_str() {
            "processed" => DocState::Processed,
            "processing" => DocState::Processing,
            "failed" => DocState::Failed,
            _ => DocState::Pending,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DocRow {
    pub binding_id: Uuid,
    pub source_id: Uuid,
    pub file_source: String,
    pub doc_id: String,
    pub source_hash: String,
    pub method: String,
    pub status: StateCol,
    pub track_id: Option<String>,
    pub ocr_expected: bool,
    pub ocr_text_exposed: Option<bool>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub attempts: i32,
    pub run_after: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    /// When we last recorded this row's state (a document seen `processed` before a listing
    /// of LightRAG started and absent from it is lost).
    pub updated_at: DateTime<Utc>,
}

/// `status` as read from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateCol(pub DocState);

impl From<String> for StateCol {
    fn from(s: String) -> Self {
        StateCol(DocState::parse(&s))
    }
}

pub async fn of_binding(tx: &mut TenantTx, binding: Uuid) -> sqlx::Result<Vec<DocRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        DocRow,
        r#"select binding_id, source_id, file_source, doc_id, source_hash, method, status, track_id, ocr_expected,
             ocr_text_exposed, error_code, error_message, attempts, run_after as "run_after: _", sent_at as "sent_at: _",
             updated_at as "updated_at: _"
         from rag_doc where tenant_id = $2 and binding_id = $1 order by source_id"#,
        binding,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// A source a binding should hold: indexed (evidence exists) and not stale (a revoked grant
/// or a vanished file takes it out of LightRAG too).
#[derive(Debug, Clone)]
pub struct Wanted {
    pub id: Uuid,
    pub resource_path: String,
    pub kind: KindCol,
    pub indexed_hash: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindCol(pub SourceKind);

impl TryFrom<String> for KindCol {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse().map(KindCol)
    }
}

pub async fn wanted(tx: &mut TenantTx, kb: Uuid) -> sqlx::Result<Vec<Wanted>> {
    let tenant = tx.tenant_id();
    let rows = sqlx::query!(
        r#"select id, resource_path, kind, indexed_hash as "indexed_hash!" from source
         where tenant_id = $2 and kb_id = $1 and indexed_hash is not null and status <> 'stale' order by id"#,
        kb,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    rows.into_iter()
        .map(|r| {
            let kind = KindCol::try_from(r.kind)
                .map_err(|e| sqlx::Error::ColumnDecode { index: "\"kind\"".into(), source: e.into() })?;
            Ok(Wanted { id: r.id, resource_path: r.resource_path, kind, indexed_hash: r.indexed_hash })
        })
        .collect()
}

/// The extracted text of a source version (what the `text` method sends).
pub async fn artifact_text(tx: &mut TenantTx, source: Uuid, hash: &str) -> sqlx::Result<Option<String>> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        "select text from source_artifact where tenant_id = $3 and source_id = $1 and source_hash = $2",
        source,
        hash,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// Whether a source version holds OCR text (images, scanned PDF pages).
pub async fn has_ocr(tx: &mut TenantTx, source: Uuid, hash: &str) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    sqlx::query_scalar!(
        r#"select exists (select 1 from evidence_block where tenant_id = $3 and source_id = $1 and source_hash = $2 and is_ocr)
             as "exists!""#,
        source,
        hash,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await
}

/// The LightRAG name of a source's document: `mnote-<sourceId>-<basename>`.
pub fn file_source(source_id: Uuid, resource_path: &str) -> String {
    let base = resource_path.rsplit('/').next().unwrap_or(resource_path);
    // LightRAG keeps the basename; a name without path separators or control characters.
    let base: String = base.chars().map(|c| if c.is_control() || c == '\\' { '_' } else { c }).collect();
    format!("mnote-{source_id}-{base}")
}

/// The source id inside a LightRAG `file_path` we named (`None` for anything else).
pub fn source_of_file_path(file_path: &str) -> Option<Uuid> {
    let name = file_path.rsplit('/').next().unwrap_or(file_path);
    let rest = name.strip_prefix("mnote-")?;
    Uuid::parse_str(rest.get(..36)?).ok().filter(|_| rest[36..].starts_with('-'))
}

pub struct Sent<'a> {
    pub binding: Uuid,
    pub source: Uuid,
    pub file_source: &'a str,
    pub doc_id: &'a str,
    pub source_hash: &'a str,
    pub method: &'a str,
    pub track_id: &'a str,
    pub ocr_expected: bool,
}

pub async fn record_sent(conn: &mut PgConnection, tenant: Uuid, s: &Sent<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into rag_doc (tenant_id, binding_id, source_id, file_source, doc_id, source_hash, method, status,
             track_id, ocr_expected, ocr_text_exposed, attempts, sent_at)
         values ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, null, 0, now())
         on conflict (tenant_id, binding_id, source_id) do update set file_source = excluded.file_source,
             doc_id = excluded.doc_id, source_hash = excluded.source_hash, method = excluded.method, status = 'pending',
             track_id = excluded.track_id, ocr_expected = excluded.ocr_expected, ocr_text_exposed = null,
             error_code = null, error_message = null, sent_at = now(), updated_at = now()",
        tenant,
        s.binding,
        s.source,
        s.file_source,
        s.doc_id,
        s.source_hash,
        s.method,
        s.track_id,
        s.ocr_expected,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A send that failed on our side of LightRAG: kept as `failed`, tried again after a backoff.
#[allow(clippy::too_many_arguments)]
pub async fn record_send_failure(
    conn: &mut PgConnection,
    tenant: Uuid,
    binding: Uuid,
    source: Uuid,
    file_source: &str,
    source_hash: &str,
    code: &str,
    message: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into rag_doc (tenant_id, binding_id, source_id, file_source, doc_id, source_hash, method, status,
             error_code, error_message, attempts, run_after)
         values ($1, $2, $3, $4, $5, $6, 'text', 'failed', $7, $8, 1, now() + interval '2 seconds')
         on conflict (tenant_id, binding_id, source_id) do update set status = 'failed', source_hash = excluded.source_hash,
             error_code = excluded.error_code, error_message = excluded.error_message, attempts = rag_doc.attempts + 1,
             run_after = now() + make_interval(secs => least(300, 2 ^ least(rag_doc.attempts + 1, 8))),
             updated_at = now()",
        tenant,
        binding,
        source,
        file_source,
        super::client::doc_id_of(file_source),
        source_hash,
        code,
        message,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Record a document's state, its error and (once processed) whether its OCR text reached
/// LightRAG, in one statement: `processed` for a text holding OCR text (`ocr_expected`) must
/// come with `ocr_text_exposed` (the check constraint `rag_doc_processed_knows_ocr` refuses
/// it otherwise), so the status never says `processed` before it knows what LightRAG holds.
pub async fn set_state(
    tx: &mut TenantTx,
    binding: Uuid,
    source: Uuid,
    state: DocState,
    error: Option<(&str, &str)>,
    ocr_text_exposed: Option<bool>,
) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!(
        "update rag_doc set status = $3, error_code = $4, error_message = $5,
             ocr_text_exposed = coalesce($6, ocr_text_exposed),
             attempts = case when $3 = 'failed' then attempts + 1 else attempts end,
             run_after = case when $3 = 'failed' then now() + make_interval(secs => least(300, 2 ^ least(attempts + 1, 8)))
                         else run_after end,
             updated_at = now()
         where tenant_id = $7 and binding_id = $1 and source_id = $2",
        binding,
        source,
        state.as_str(),
        error.map(|e| e.0),
        error.map(|e| e.1),
        ocr_text_exposed,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn delete(tx: &mut TenantTx, binding: Uuid, source: Uuid) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!("delete from rag_doc where tenant_id = $3 and binding_id = $1 and source_id = $2", binding, source, tenant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_sources_round_trip_to_the_source() {
        let id = Uuid::new_v4();
        let fs = file_source(id, "notes/image copy 6.png");
        assert_eq!(fs, format!("mnote-{id}-image copy 6.png"));
        assert_eq!(source_of_file_path(&fs), Some(id));
        assert_eq!(source_of_file_path(&format!("inputs/{fs}")), Some(id));
        assert_eq!(source_of_file_path("handbook.md"), None);
        assert_eq!(source_of_file_path("mnote-not-a-uuid-x.md"), None);
        assert_eq!(source_of_file_path(&format!("mnote-{id}")), None);
    }

    #[test]
    fn lightrag_statuses_parse_leniently() {
        assert_eq!(DocState::of_lightrag("processed"), DocState::Processed);
        assert_eq!(DocState::of_lightrag("DocStatus.FAILED"), DocState::Failed);
        assert_eq!(DocState::of_lightrag("parsing"), DocState::Pending);
        assert_eq!(DocState::of_lightrag("processing"), DocState::Processing);
    }
}
