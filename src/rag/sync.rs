//! Sync: make each binding's LightRAG hold exactly one document per wanted source, at the
//! version we indexed. A pass compares `rag_doc` with the KB's sources and LightRAG's answers:
//! deletes the documents of sources that went away (or of a retired binding), sends new and
//! changed sources (deleting the old document first: never two for one source), and follows
//! `track_id`s to `processed`/`failed`, checking that an OCR source's text really arrived.
//! LightRAG down only delays a pass: the next one picks up where this one stopped.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::{
    binding::{self, Binding},
    client::{LightRag, RagError, RagErrorKind, doc_id_of},
    docs::{self, DocRow, DocState, Wanted},
};
use crate::{
    config::Config,
    db::{Scope, TenantTx},
    evidence::SourceKind,
};

/// Attempts before a failed send or a LightRAG-side failure is left alone (resync retries).
pub const MAX_ATTEMPTS: i32 = 5;
/// A sent document LightRAG's track shows nothing of, after this long, is lost.
const LOST_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub sent: usize,
    pub deleted: usize,
    pub processed: usize,
    pub failed: usize,
    /// Documents still being parsed by LightRAG.
    pub pending: usize,
    /// Processed documents LightRAG no longer held (sent again this pass).
    pub lost: usize,
    /// Bindings whose endpoint failed this pass (`code: message`).
    pub errors: Vec<String>,
}

impl Report {
    fn add(&mut self, o: Report) {
        self.sent += o.sent;
        self.deleted += o.deleted;
        self.processed += o.processed;
        self.failed += o.failed;
        self.pending += o.pending;
        self.lost += o.lost;
        self.errors.extend(o.errors);
    }
}

/// One pass over every tenant's bindings.
pub async fn pass_all(pool: &PgPool, cfg: &Config) -> anyhow::Result<Report> {
    let tenants = sqlx::query_scalar!("select id from tenant order by id").fetch_all(pool).await?;
    let mut r = Report::default();
    for t in tenants {
        r.add(pass_tenant(pool, cfg, t, None).await?);
    }
    Ok(r)
}

/// One pass over a tenant's bindings (or one KB's).
pub async fn pass_tenant(pool: &PgPool, cfg: &Config, tenant: Uuid, kb: Option<Uuid>) -> anyhow::Result<Report> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let bindings = binding::all(&mut tx).await?;
    let kbs = sqlx::query_scalar!("select id from kb where tenant_id = $1", tenant).fetch_all(&mut *tx).await?;
    tx.commit().await?;
    let mut r = Report::default();
    for b in bindings.into_iter().filter(|b| kb.is_none_or(|k| b.kb_id == k)) {
        let retired = !b.active || !kbs.contains(&b.kb_id);
        // One pass per binding at a time across every `mnote serve` replica: a session lock
        // on a connection held for the pass (released with it if the process dies).
        let mut lock = pool.acquire().await?;
        let key = i64::from_be_bytes(b.id.as_bytes()[..8].try_into().expect("8 bytes"));
        let got = sqlx::query_scalar!(r#"select pg_try_advisory_lock($1) as "got!""#, key).fetch_one(&mut *lock).await?;
        if !got {
            r.pending += 1; // another process is passing over it right now
            continue;
        }
        let outcome = pass_binding(pool, cfg, tenant, &b, retired).await;
        sqlx::query_scalar!("select pg_advisory_unlock($1)", key).fetch_one(&mut *lock).await?;
        drop(lock);
        match outcome {
            Ok(o) => r.add(o),
            Err(Step::Rag(e)) => {
                tracing::warn!(tenant.id = %tenant, kb.id = %b.kb_id, code = e.code(), "knowledge-RAG sync: {e}");
                let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
                binding::record_check(&mut tx, b.id, Err(&e)).await?;
                tx.commit().await?;
                r.errors.push(format!("{}: {}", e.code(), e.message));
            }
            Err(Step::Db(e)) => return Err(e),
        }
    }
    Ok(r)
}

enum Step {
    Rag(RagError),
    Db(anyhow::Error),
}

impl From<RagError> for Step {
    fn from(e: RagError) -> Self {
        Step::Rag(e)
    }
}
impl From<sqlx::Error> for Step {
    fn from(e: sqlx::Error) -> Self {
        Step::Db(e.into())
    }
}
impl From<anyhow::Error> for Step {
    fn from(e: anyhow::Error) -> Self {
        Step::Db(e)
    }
}

async fn pass_binding(pool: &PgPool, cfg: &Config, tenant: Uuid, b: &Binding, retired: bool) -> Result<Report, Step> {
    let client = b.client(&cfg.rag)?;
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let rows = docs::of_binding(&mut tx, b.id).await?;
    let wanted = if retired { Vec::new() } else { docs::wanted(&mut tx, b.kb_id).await? };
    tx.commit().await?;
    let mut r = Report::default();

    // 1. Documents of sources no longer wanted (deleted, stale, or the binding retired).
    let gone: Vec<&DocRow> = rows.iter().filter(|d| !wanted.iter().any(|w| w.id == d.source_id)).collect();
    for d in gone {
        if d.status.0 != DocState::Deleted && d.track_id.is_some() {
            client.delete_documents(std::slice::from_ref(&d.doc_id)).await?;
        }
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        docs::delete(&mut tx, b.id, d.source_id).await?;
        tx.commit().await?;
        r.deleted += 1;
    }
    if retired {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        binding::delete(&mut tx, b.id).await?;
        tx.commit().await?;
        return Ok(r);
    }

    // 1b. Documents LightRAG lost (restarted without its storage, a new server behind the
    // URL): seen processed before a listing began and absent from it. Sent again below.
    let mut rows = rows;
    if rows.iter().any(|d| d.status.0 == DocState::Processed) {
        let held = super::held::of(b.id, &b.url, &client, cfg.rag.drift_ttl).await?;
        let candidates: Vec<(&str, &str)> = rows
            .iter()
            .filter(|d| d.status.0 == DocState::Processed && held.lost(&d.doc_id, d.updated_at))
            .filter_map(|d| Some((d.doc_id.as_str(), d.track_id.as_deref()?)))
            .collect();
        let lost =
            if candidates.is_empty() { Default::default() } else { super::held::confirm_lost(&client, &candidates).await? };
        for d in rows.iter_mut().filter(|d| d.status.0 == DocState::Processed && lost.contains(&d.doc_id)) {
            let m = "LightRAG no longer holds this document; it is sent again";
            let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
            docs::set_state(&mut tx, b.id, d.source_id, DocState::Deleted, Some(("knowledge_rag_doc_lost", m)), None).await?;
            tx.commit().await?;
            d.status = docs::StateCol(DocState::Deleted);
            r.lost += 1;
        }
        if r.lost > 0 {
            tracing::warn!(tenant.id = %tenant, kb.id = %b.kb_id, lost = r.lost, "LightRAG lost documents; sending them again");
        }
    }

    // 2. Follow what was sent. A file LightRAG failed to parse is sent again as our text.
    let mut unparsed: Vec<Uuid> = Vec::new();
    for d in rows.iter().filter(|d| matches!(d.status.0, DocState::Pending | DocState::Processing)) {
        if !wanted.iter().any(|w| w.id == d.source_id && w.indexed_hash == d.source_hash) {
            continue; // replaced below
        }
        match track(pool, tenant, &client, d).await? {
            Tracked::State(DocState::Processed) => r.processed += 1,
            Tracked::State(DocState::Failed) if d.method == "upload" => unparsed.push(d.source_id),
            Tracked::State(DocState::Failed) | Tracked::Duplicate => r.failed += 1,
            Tracked::State(_) => r.pending += 1,
        }
    }

    // 3. Send what is missing or changed.
    for w in &wanted {
        let row = rows.iter().find(|d| d.source_id == w.id);
        let force_text = unparsed.contains(&w.id)
            || row.is_some_and(|d| d.method == "upload" && d.status.0 == DocState::Failed && d.source_hash == w.indexed_hash);
        let due = force_text && row.is_some_and(|d| d.attempts < MAX_ATTEMPTS && d.error_code.as_deref() != Some(DUPLICATE))
            || match row {
                None => true,
                Some(d) if d.source_hash != w.indexed_hash => true,
                Some(d) if d.status.0 == DocState::Deleted => true,
                // LightRAG holds the same content under another name: sending it again would
                // only make another duplicate record. The next version of the file is sent.
                Some(d) if d.status.0 == DocState::Failed && d.error_code.as_deref() == Some(DUPLICATE) => false,
                Some(d) if d.status.0 == DocState::Failed => d.attempts < MAX_ATTEMPTS && d.run_after <= chrono::Utc::now(),
                Some(_) => false,
            };
        if due {
            send(pool, cfg, tenant, &client, b, w, row, force_text).await?;
            r.sent += 1;
        }
    }
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    binding::record_check(&mut tx, b.id, Ok(None)).await?;
    tx.commit().await?;
    Ok(r)
}

/// What to send for a source: the file (`MNOTE_RAG_UPLOAD_KINDS`, Markdown and text by
/// default: LightRAG's text is then the file's) or our extracted text (every other kind, and
/// always images and OCR pages: the OCR text, never a placeholder). LightRAG's own PDF and DOCX
/// parsing gives text our blocks cannot be aligned to exactly (and fails on some valid DOCX).
enum Payload {
    File(Vec<u8>),
    Text { text: String, ocr: bool },
}

/// `as_text` forces our text for a kind LightRAG would parse (it failed to parse the file).
async fn payload(
    pool: &PgPool,
    cfg: &Config,
    tenant: Uuid,
    w: &Wanted,
    force_text: bool,
) -> Result<Result<Payload, (&'static str, String)>, Step> {
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    let has_ocr = docs::has_ocr(&mut tx, w.id, &w.indexed_hash).await?;
    let kind = w.kind.0;
    let as_text = force_text || kind == SourceKind::Image || has_ocr || !cfg.rag.upload_kinds.contains(&kind);
    if as_text {
        let text = docs::artifact_text(&mut tx, w.id, &w.indexed_hash).await?;
        tx.commit().await?;
        let text = text.unwrap_or_default();
        if text.trim().is_empty() {
            return Ok(Err(("knowledge_rag_no_text", "the source has no extracted text to send (OCR found none)".into())));
        }
        return Ok(Ok(Payload::Text { text, ocr: has_ocr || kind == SourceKind::Image }));
    }
    let source = crate::sources::queries::get(&mut tx, w.id).await?;
    // Opened under the root by descriptor (like ingest), never re-opened by path.
    let opened = match &source {
        Some(s) => crate::ingest::pipeline::open_source(&mut tx, cfg, s).await?,
        None => Err(("file_missing", "the source is gone".into())),
    };
    tx.commit().await?;
    let file = match opened {
        Ok(f) => f,
        Err(e) => return Ok(Err(e)),
    };
    let read = tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        let mut bytes = Vec::new();
        let mut file = file;
        file.read_to_end(&mut bytes).map(|_| bytes)
    })
    .await;
    let bytes = match read {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return Ok(Err(("file_missing", format!("cannot read the file: {e}")))),
        Err(e) => return Ok(Err(("file_missing", format!("cannot read the file: {e}")))),
    };
    use sha2::Digest as _;
    if format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes))) != w.indexed_hash {
        // Changed since it was indexed: the re-index sends the new version.
        return Ok(Err(("knowledge_rag_file_changed", "the file changed since it was indexed; waiting for the re-index".into())));
    }
    Ok(Ok(Payload::File(bytes)))
}

#[allow(clippy::too_many_arguments)]
async fn send(
    pool: &PgPool,
    cfg: &Config,
    tenant: Uuid,
    client: &LightRag,
    b: &Binding,
    w: &Wanted,
    row: Option<&DocRow>,
    force_text: bool,
) -> Result<(), Step> {
    let file_source = docs::file_source(w.id, &w.resource_path);
    let doc_id = doc_id_of(&file_source);
    let fail = |code: &'static str, message: String| async move {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        docs::record_send_failure(
            &mut tx,
            tenant,
            b.id,
            w.id,
            &docs::file_source(w.id, &w.resource_path),
            &w.indexed_hash,
            code,
            &message,
        )
        .await?;
        tx.commit().await?;
        Ok::<(), Step>(())
    };
    let p = match payload(pool, cfg, tenant, w, force_text).await? {
        Ok(p) => p,
        Err((code, message)) => return fail(code, message).await,
    };
    // The old document first (a re-index, a lost or failed one): one document per source.
    let old = row.map(|d| d.doc_id.clone()).filter(|_| row.is_some_and(|d| d.status.0 != DocState::Deleted));
    let mut ids: Vec<String> = old.into_iter().collect();
    if !ids.contains(&doc_id) && row.is_some_and(|d| d.status.0 != DocState::Deleted) {
        ids.push(doc_id.clone());
    }
    if !ids.is_empty() {
        client.delete_documents(&ids).await?;
    }
    let (method, ocr) = match &p {
        Payload::File(_) => ("upload", false),
        Payload::Text { ocr, .. } => ("text", *ocr),
    };
    // LightRAG deletes in the background and answers 409 while the old name is still there.
    let mut attempt = 0;
    let inserted = loop {
        let r = match &p {
            Payload::File(bytes) => client.upload(&file_source, bytes.clone()).await,
            Payload::Text { text, .. } => client.insert_text(&file_source, text).await,
        };
        match r {
            Err(e) if e.kind == RagErrorKind::Conflict && attempt < 20 => {
                if attempt == 0 {
                    client.delete_documents(std::slice::from_ref(&doc_id)).await?;
                }
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(250 * attempt.min(4))).await;
            }
            Err(e) if e.kind == RagErrorKind::BadResponse => return fail(e.code(), e.message).await,
            other => break other?,
        }
    };
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    docs::record_sent(
        &mut tx,
        tenant,
        &docs::Sent {
            binding: b.id,
            source: w.id,
            file_source: &file_source,
            doc_id: &doc_id,
            source_hash: &w.indexed_hash,
            method,
            track_id: &inserted.track_id,
            ocr_expected: ocr,
        },
    )
    .await?;
    tx.commit().await?;
    tracing::info!(tenant.id = %tenant, source.id = %w.id, method, "sent to LightRAG");
    Ok(())
}

/// The error code of a document LightRAG refused as a copy of content it already holds.
pub const DUPLICATE: &str = "knowledge_rag_duplicate";

/// What following a sent document's track found.
enum Tracked {
    State(DocState),
    /// LightRAG holds identical content under another name and did not store this one.
    Duplicate,
}

/// Read a sent document's status from its track and record it.
async fn track(pool: &PgPool, tenant: Uuid, client: &LightRag, d: &DocRow) -> Result<Tracked, Step> {
    let Some(track_id) = &d.track_id else { return Ok(Tracked::State(d.status.0)) };
    let t = client.track_status(track_id).await?;
    let doc = t.documents.iter().find(|x| x.id == d.doc_id);
    let dup = t.documents.iter().find(|x| x.file_path == d.file_source).and_then(|x| x.duplicate_of());
    let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
    if let (None, Some(original)) = (doc, dup) {
        // Never sent again for this version (a new record each time, never processed): the
        // reader sees why, and the next version of the file is sent as usual.
        let original = if original.is_empty() { "another document" } else { original };
        let m = format!(
            "LightRAG already holds identical content as {original} (another file with the same text, in this or another knowledge base on the same server) and keeps one copy; this file is not stored again"
        );
        docs::set_state(&mut tx, d.binding_id, d.source_id, DocState::Failed, Some((DUPLICATE, &m)), None).await?;
        tx.commit().await?;
        return Ok(Tracked::Duplicate);
    }
    let state = match doc {
        None => {
            let old = d.sent_at.is_none_or(|s| chrono::Utc::now() - s > chrono::Duration::from_std(LOST_AFTER).unwrap());
            if old {
                let m = "LightRAG no longer knows this document; it is sent again";
                docs::set_state(&mut tx, d.binding_id, d.source_id, DocState::Deleted, Some(("knowledge_rag_doc_lost", m)), None)
                    .await?;
                DocState::Deleted
            } else {
                d.status.0
            }
        }
        Some(x) => {
            let state = DocState::of_lightrag(&x.status);
            let exposed = if state == DocState::Processed && d.ocr_expected {
                let sent = docs::artifact_text(&mut tx, d.source_id, &d.source_hash).await?;
                Some(ocr_exposed(x, sent.as_deref().unwrap_or("")))
            } else {
                None
            };
            let error = (state == DocState::Failed)
                .then(|| ("knowledge_rag_failed", x.error_msg.clone().unwrap_or_else(|| "LightRAG failed the document".into())));
            if state != d.status.0 || exposed.is_some() || error.is_some() {
                docs::set_state(
                    &mut tx,
                    d.binding_id,
                    d.source_id,
                    state,
                    error.as_ref().map(|(c, m)| (*c, m.as_str())),
                    exposed,
                )
                .await?;
            }
            state
        }
    };
    tx.commit().await?;
    Ok(Tracked::State(state))
}

/// Whether LightRAG really holds the OCR text we sent: the start of its stored content
/// (`content_summary`) is the start of our text, and its length is all of it.
fn ocr_exposed(x: &super::client::DocStatus, sent: &str) -> bool {
    let norm = |s: &str| s.chars().filter(|c| c.is_alphanumeric()).collect::<String>();
    let summary = norm(x.content_summary.trim_end_matches("...").trim_end_matches('…'));
    let sent_chars = sent.trim().chars().count() as u64;
    let long_enough = x.content_length.is_some_and(|l| l * 10 >= sent_chars * 9);
    !summary.is_empty()
        && long_enough
        && norm(sent).starts_with(&summary)
        && !super::mapping::is_image_placeholder(&x.content_summary)
}

/// The background sync of `mnote serve`: a pass whenever a source changes (the
/// `mnote_source` notifications), every `MNOTE_RAG_SYNC_INTERVAL_SECS` otherwise, and every
/// second while LightRAG is still parsing what was sent.
pub async fn run(
    pool: PgPool,
    cfg: std::sync::Arc<Config>,
    mut events: tokio::sync::broadcast::Receiver<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            break;
        }
        match pass_all(&pool, &cfg).await {
            Ok(r) if r.pending > 0 || r.sent > 0 => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("knowledge-RAG sync: {e:#}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(cfg.rag.sync_interval) => {}
            _ = events.recv() => {}
            _ = stop.changed() => {}
        }
    }
}
