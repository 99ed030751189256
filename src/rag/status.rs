//! `mnote.knowledge_rag.status`: per bound KB (live reachability, version, counts) and per
//! source (registered, LightRAG's status, whether OCR text really reached LightRAG, whether a
//! locator is available, the last error).

use serde::Serialize;
use uuid::Uuid;

use super::{ErrorView, binding::Binding, held::Drift};
use crate::{config::RagConfig, db::TenantTx, error::AppResult};

pub const SCHEMA: &str = "mnote.knowledge_rag.status.v1";

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    pub source_id: Uuid,
    pub resource_path: String,
    pub source_status: String,
    pub registered: bool,
    pub lightrag_status: Option<String>,
    pub lightrag_doc_id: Option<String>,
    /// Whether the OCR text sent reached LightRAG: `true`/`false` once checked, `null` when
    /// there is nothing to check yet or at all; `ocrText` tells those apart.
    pub ocr_text_exposed: Option<bool>,
    /// What is known of the OCR text of the version sent: never `unknown` for a `processed`
    /// document (the sync records the state and the check together; the database refuses a
    /// `processed` document whose OCR check is missing).
    pub ocr_text: OcrText,
    pub locator_available: bool,
    /// LightRAG no longer holds the document we sent (its storage was lost): the sync sends
    /// it again. `false` when not known to be lost.
    pub lost: bool,
    pub error: Option<ErrorView>,
    /// When we last recorded the document's state.
    #[serde(skip)]
    pub recorded_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(skip)]
    pub track_id: Option<String>,
}

/// What is known of a source's OCR text in LightRAG (`ocrText`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OcrText {
    /// The text sent holds OCR text and LightRAG stored it (`ocrTextExposed: true`).
    Exposed,
    /// The text sent holds OCR text, but what LightRAG stored does not (a placeholder, cut
    /// short; `ocrTextExposed: false`).
    NotExposed,
    /// The version sent holds no OCR text: nothing to check (`ocrTextExposed: null`).
    None,
    /// Not known yet: nothing sent (or the send failed), or LightRAG has not processed it.
    Unknown,
}

impl OcrText {
    /// From what `rag_doc` recorded: whether a version was sent (`sent`), whether its text
    /// holds OCR text, and the check made when LightRAG processed it.
    pub fn of(sent: bool, ocr_expected: bool, exposed: Option<bool>) -> OcrText {
        match (sent, ocr_expected, exposed) {
            (false, _, _) => OcrText::Unknown,
            (true, false, _) => OcrText::None,
            (true, true, Some(true)) => OcrText::Exposed,
            (true, true, Some(false)) => OcrText::NotExposed,
            (true, true, None) => OcrText::Unknown,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub sources: usize,
    pub registered: usize,
    pub processed: usize,
    pub pending: usize,
    pub failed: usize,
    /// Processed, but LightRAG does not hold the OCR text: not a green light.
    pub ocr_not_exposed: usize,
    /// Sent, but LightRAG no longer holds them (being sent again).
    pub lost: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KbStatus {
    pub kb_id: Uuid,
    pub url: String,
    pub label: Option<String>,
    pub reachable: bool,
    pub version: Option<String>,
    pub error: Option<ErrorView>,
    /// `ok`, `unreachable`, `lost_documents` (LightRAG no longer holds documents we sent: the
    /// sync is sending them again) or `unchecked` (what it holds could not be listed).
    pub state: &'static str,
    /// What LightRAG holds against what we sent (`null` when it could not be listed).
    pub drift: Option<Drift>,
    pub counts: Counts,
    pub items: Vec<Item>,
}

struct Row {
    id: Uuid,
    resource_path: String,
    status: String,
    doc_status: Option<String>,
    doc_id: Option<String>,
    track_id: Option<String>,
    ocr_expected: Option<bool>,
    ocr_text_exposed: Option<bool>,
    error_code: Option<String>,
    error_message: Option<String>,
    updated_at: Option<chrono::DateTime<chrono::Utc>>,
    located: bool,
}

/// The sources of a bound KB with their LightRAG state (read in the caller's transaction).
pub async fn items(tx: &mut TenantTx, b: &Binding) -> sqlx::Result<Vec<Item>> {
    let tenant = tx.tenant_id();
    let rows = sqlx::query_as!(
        Row,
        r#"select s.id, s.resource_path, s.status, d.status as "doc_status?", d.doc_id as "doc_id?", d.track_id as "track_id?",
                d.ocr_expected as "ocr_expected?", d.ocr_text_exposed as "ocr_text_exposed?", d.error_code as "error_code?",
                d.error_message as "error_message?", d.updated_at as "updated_at?: _",
                exists (select 1 from evidence_block e where e.tenant_id = s.tenant_id and e.source_id = s.id
                        and e.source_hash = s.indexed_hash and e.quality in ('exact', 'approximate')) as "located!"
         from source s left join rag_doc d on d.tenant_id = s.tenant_id and d.source_id = s.id and d.binding_id = $2
         where s.tenant_id = $3 and s.kb_id = $1 order by s.resource_path"#,
        b.kb_id,
        b.id,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let ocr_text = OcrText::of(r.track_id.is_some(), r.ocr_expected.unwrap_or(false), r.ocr_text_exposed);
            // `processed` only with the OCR check known (the database holds to it; a row
            // that predates that rule reads as still processing).
            let lightrag_status = match r.doc_status {
                Some(s) if s == "processed" && ocr_text == OcrText::Unknown => Some("processing".to_string()),
                s => s,
            };
            Item {
                source_id: r.id,
                resource_path: r.resource_path,
                source_status: r.status,
                registered: r.track_id.is_some(),
                track_id: r.track_id,
                lightrag_status,
                lightrag_doc_id: r.doc_id,
                ocr_text_exposed: r.ocr_text_exposed,
                ocr_text,
                locator_available: r.located,
                lost: false,
                error: r.error_code.map(|code| ErrorView { code, message: r.error_message.unwrap_or_default() }),
                recorded_at: r.updated_at,
            }
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
        lost: items.iter().filter(|i| i.lost).count(),
    }
}

/// Compare the items with what LightRAG holds (the cached listing, [`super::held`]): marks
/// the lost ones. `None` when the listing failed or was cut short.
pub async fn drift(cfg: &RagConfig, b: &Binding, items: &mut [Item]) -> Option<Drift> {
    let client = b.client(cfg).ok()?;
    let held = match super::held::of(b.id, &b.url, &client, cfg.drift_ttl).await {
        Ok(h) if h.complete => h,
        Ok(_) => return None,
        Err(e) => {
            tracing::debug!(kb.id = %b.kb_id, code = e.code(), "listing LightRAG's documents: {e}");
            return None;
        }
    };
    // Seen processed before the listing and absent from it: confirmed by their tracks.
    let candidates: Vec<(&str, &str)> = items
        .iter()
        .filter(|i| i.lightrag_status.as_deref() == Some("processed"))
        .filter(|i| i.recorded_at.zip(i.lightrag_doc_id.as_deref()).is_some_and(|(at, doc)| held.lost(doc, at)))
        .filter_map(|i| Some((i.lightrag_doc_id.as_deref()?, i.track_id.as_deref()?)))
        .collect();
    let confirmed = if candidates.is_empty() {
        Default::default()
    } else {
        match super::held::confirm_lost(&client, &candidates).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(kb.id = %b.kb_id, code = e.code(), "confirming lost LightRAG documents: {e}");
                return None;
            }
        }
    };
    let mut missing = 0;
    for i in items.iter_mut() {
        let Some(doc) = i.lightrag_doc_id.as_deref() else { continue };
        i.lost = match i.lightrag_status.as_deref() {
            Some("processed") => confirmed.contains(doc),
            // Found lost by the sync, not sent again yet.
            Some("deleted") => i.track_id.is_some() && !held.ids.contains(doc),
            _ => false,
        };
        missing += usize::from(i.lost);
    }
    Some(Drift { missing, held: held.ids.len(), checked_at: held.listed_at })
}

/// `ok`, `unreachable`, `lost_documents` or `unchecked`.
pub fn state_of(reachable: bool, drift: Option<&Drift>) -> &'static str {
    match (reachable, drift) {
        (false, _) => "unreachable",
        (true, None) => "unchecked",
        (true, Some(d)) if d.missing > 0 => "lost_documents",
        (true, Some(_)) => "ok",
    }
}

/// The status of each binding: the items from the database, reachability asked live, the
/// drift from the (cached) listing of what LightRAG holds.
pub async fn of(conn: &mut crate::db::TenantTx, cfg: &RagConfig, bindings: &[Binding]) -> AppResult<Vec<KbStatus>> {
    let mut with_items = Vec::new();
    for b in bindings {
        with_items.push((b, items(conn, b).await?));
    }
    let checks = futures_util::future::join_all(bindings.iter().map(|b| super::check(cfg, b))).await;
    let mut out = Vec::new();
    for ((b, mut items), check) in with_items.into_iter().zip(checks) {
        let (reachable, version, error) = match check {
            Ok(v) => (true, v.or(b.lightrag_version.clone()), None),
            Err(e) => (false, b.lightrag_version.clone(), Some(ErrorView { code: e.code().into(), message: e.message })),
        };
        let drift = if reachable { drift(cfg, b, &mut items).await } else { None };
        out.push(KbStatus {
            kb_id: b.kb_id,
            url: b.url.clone(),
            label: b.label.clone(),
            reachable,
            version,
            error,
            state: state_of(reachable, drift.as_ref()),
            drift,
            counts: counts(&items),
            items,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::OcrText;

    #[test]
    fn the_ocr_text_is_unknown_only_before_anything_is_known() {
        assert_eq!(OcrText::of(false, true, None), OcrText::Unknown, "nothing sent");
        assert_eq!(OcrText::of(false, false, None), OcrText::Unknown, "nothing sent, whatever the kind");
        assert_eq!(OcrText::of(true, false, None), OcrText::None);
        assert_eq!(OcrText::of(true, true, None), OcrText::Unknown, "sent, not processed yet");
        assert_eq!(OcrText::of(true, true, Some(true)), OcrText::Exposed);
        assert_eq!(OcrText::of(true, true, Some(false)), OcrText::NotExposed);
    }
}
