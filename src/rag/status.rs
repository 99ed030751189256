//! `mnote.knowledge_rag.status`: per bound KB (live reachability, version, counts) and per
//! source (registered, LightRAG's status, whether OCR text really reached LightRAG, whether a
//! locator is available, the last error).

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{ErrorView, binding::Binding};
use crate::{config::RagConfig, error::AppResult};

pub const SCHEMA: &str = "mnote.knowledge_rag.status.v1";

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    pub source_id: Uuid,
    pub resource_path: String,
    pub source_status: String,
    pub registered: bool,
    pub lightrag_status: Option<String>,
    pub lightrag_doc_id: Option<String>,
    /// `null` for sources without OCR text (and until LightRAG has processed the document).
    pub ocr_text_exposed: Option<bool>,
    pub locator_available: bool,
    pub error: Option<ErrorView>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub sources: usize,
    pub registered: usize,
    pub processed: usize,
    pub pending: usize,
    pub failed: usize,
    /// Processed, but LightRAG does not hold the OCR text: not a green light.
    pub ocr_not_exposed: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KbStatus {
    pub kb_id: Uuid,
    pub url: String,
    pub label: Option<String>,
    pub reachable: bool,
    pub version: Option<String>,
    pub error: Option<ErrorView>,
    pub counts: Counts,
    pub items: Vec<Item>,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: Uuid,
    resource_path: String,
    status: String,
    doc_status: Option<String>,
    doc_id: Option<String>,
    track_id: Option<String>,
    ocr_text_exposed: Option<bool>,
    error_code: Option<String>,
    error_message: Option<String>,
    located: bool,
}

/// The sources of a bound KB with their LightRAG state (read in the caller's transaction).
pub async fn items(conn: &mut PgConnection, b: &Binding) -> sqlx::Result<Vec<Item>> {
    let rows: Vec<Row> = sqlx::query_as(
        "select s.id, s.resource_path, s.status, d.status as doc_status, d.doc_id, d.track_id, d.ocr_text_exposed,
                d.error_code, d.error_message,
                exists (select 1 from evidence_block e where e.source_id = s.id and e.source_hash = s.indexed_hash
                        and e.quality in ('exact', 'approximate')) as located
         from source s left join rag_doc d on d.source_id = s.id and d.binding_id = $2
         where s.kb_id = $1 order by s.resource_path",
    )
    .bind(b.kb_id)
    .bind(b.id)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Item {
            source_id: r.id,
            resource_path: r.resource_path,
            source_status: r.status,
            registered: r.track_id.is_some(),
            lightrag_status: r.doc_status,
            lightrag_doc_id: r.doc_id,
            ocr_text_exposed: r.ocr_text_exposed,
            locator_available: r.located,
            error: r.error_code.map(|code| ErrorView { code, message: r.error_message.unwrap_or_default() }),
        })
        .collect())
}

fn counts(items: &[Item]) -> Counts {
    let is = |i: &Item, s: &str| i.lightrag_status.as_deref() == Some(s);
    Counts {
        sources: items.len(),
        registered: items.iter().filter(|i| i.registered).count(),
        processed: items.iter().filter(|i| is(i, "processed")).count(),
        pending: items.iter().filter(|i| is(i, "pending") || is(i, "processing")).count(),
        failed: items.iter().filter(|i| is(i, "failed")).count(),
        ocr_not_exposed: items.iter().filter(|i| is(i, "processed") && i.ocr_text_exposed == Some(false)).count(),
    }
}

/// The status of each binding: the items from the database, reachability asked live.
pub async fn of(conn: &mut PgConnection, cfg: &RagConfig, bindings: &[Binding]) -> AppResult<Vec<KbStatus>> {
    let mut with_items = Vec::new();
    for b in bindings {
        with_items.push((b, items(conn, b).await?));
    }
    let checks = futures_util::future::join_all(bindings.iter().map(|b| super::check(cfg, b))).await;
    Ok(with_items
        .into_iter()
        .zip(checks)
        .map(|((b, items), check)| {
            let (reachable, version, error) = match check {
                Ok(v) => (true, v.or(b.lightrag_version.clone()), None),
                Err(e) => (false, b.lightrag_version.clone(), Some(ErrorView { code: e.code().into(), message: e.message })),
            };
            KbStatus {
                kb_id: b.kb_id,
                url: b.url.clone(),
                label: b.label.clone(),
                reachable,
                version,
                error,
                counts: counts(&items),
                items,
            }
        })
        .collect())
}
