//! Sources: files registered into a KB from a granted directory, or uploaded. Registration
//! records kind, size, mtime and sha256 with status `pending`; parsing is the ingest
//! pipeline's job.

pub mod blobs;
pub mod events;
pub mod handlers;
pub mod pages;
pub mod purge;
pub mod queries;
pub mod queue;

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use globset::{Glob, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{
    auth::Auth,
    error::{AppError, AppResult},
    evidence::SourceKind,
    grants::{self, paths},
    kbs,
};
pub use queries::Source;

/// Sources and uploads (API and forms) and the KB page's live status stream. Both upload
/// routes accept bodies up to `upload_max_bytes` plus the multipart overhead; the exact limit
/// is enforced while streaming.
/// Uploads may exceed the file limit by the multipart overhead; the handler enforces the limit.
fn upload_limit(config: &crate::config::Config) -> axum::extract::DefaultBodyLimit {
    axum::extract::DefaultBodyLimit::max((config.upload_max_bytes as usize).saturating_add(1024 * 1024))
}

pub fn api_router(config: &crate::config::Config) -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, post};
    use handlers as s;
    axum::Router::new()
        .route("/api/kbs/{id}/sources", get(s::list_sources).post(s::register_source))
        .route("/api/kbs/{id}/uploads", post(s::upload_sources).layer(upload_limit(config)))
        .route("/api/kbs/{id}/sources/removed", get(s::list_removed))
        .route("/api/sources/{id}", get(s::get_source).delete(s::delete_source))
        .route("/api/sources/{id}/delete-preview", get(s::delete_preview))
        .route("/api/sources/{id}/restore", post(s::restore_source))
        .route("/api/sources/{id}/retry", post(s::retry_source))
}

/// The OpenAPI description of [`api_router`]'s routes.
pub fn api_doc(d: &mut crate::openapi::ApiDoc) {
    use crate::error::Items;
    use handlers as s;
    use serde_json::json;
    d.op("get", "/api/kbs/{id}/sources").summary("The knowledge base's sources").ok::<Items<Source>>(200);
    d.op("post", "/api/kbs/{id}/sources")
        .summary("Register a granted file (answers the source) or directory (answers what was registered)")
        .body::<s::RegisterBody>()
        .ok_either::<Option<Source>, Registered>(201)
        .ok_either::<Option<Source>, Registered>(200)
        .errors(&[(403, &["path_outside_grant"])]);
    d.op("post", "/api/kbs/{id}/uploads")
        .summary("Upload files (multipart, every field named `file`)")
        .raw_body(
            "multipart/form-data",
            json!({"type": "object", "properties": {"file": {"type": "array", "items": {"type": "string", "contentMediaType": "application/octet-stream"}}}, "required": ["file"]}),
        )
        .ok::<s::Uploaded>(201)
        .ok::<s::Uploaded>(200)
        .errors(&[(413, &["file_too_large"])]);
    d.op("get", "/api/kbs/{id}/sources/removed")
        .summary("The knowledge base's removed sources")
        .ok::<Items<s::RemovedSource>>(200);
    d.op("get", "/api/sources/{id}").summary("One source").ok::<Source>(200);
    d.op("delete", "/api/sources/{id}").summary("Remove a source (restorable during the grace period)").empty(204);
    d.op("get", "/api/sources/{id}/delete-preview").summary("What removing the source takes away").ok::<kbs::DeleteImpact>(200);
    d.op("post", "/api/sources/{id}/restore").summary("Restore a removed source").ok::<Source>(200);
    d.op("post", "/api/sources/{id}/retry").summary("Parse the source again").ok::<Source>(202).errors(&[(409, &["conflict"])]);
}

/// The browser routes (the KB page's live status stream included: its errors are pages too).
pub fn page_router(config: &crate::config::Config) -> axum::Router<crate::state::AppState> {
    use axum::routing::{get, post};
    use handlers as s;
    axum::Router::new()
        .route("/kbs/{id}", get(pages::kb_page))
        .route("/kbs/{id}/events", get(events::kb_events))
        .route("/kbs/{id}/sources", post(s::register_form))
        .route("/kbs/{id}/uploads", post(s::upload_form).layer(upload_limit(config)))
        .route("/sources/{id}/delete", get(s::delete_confirm).post(s::delete_form))
        .route("/sources/{id}/restore", post(s::restore_form))
        .route("/sources/{id}/retry", post(s::retry_form))
}

/// When a removed source will be purged.
pub fn purge_after(cfg: &crate::config::Config, s: &Source) -> Option<chrono::DateTime<chrono::Utc>> {
    let grace = chrono::Duration::from_std(cfg.delete_grace).ok()?;
    s.deleted_at?.checked_add_signed(grace)
}

/// "Removing a.pdf takes its 134 passages out of search …".
pub fn remove_message(ctx: &crate::web::PageCtx, s: &Source, i: &kbs::DeleteImpact) -> String {
    ctx.t("kbpage.remove_source_message")
        .replace("{name}", s.file_name())
        .replace("{blocks}", &ctx.count(i.blocks, "passage"))
        .replace("{days}", &kbs::grace_days(ctx, std::time::Duration::from_secs(i.grace_secs)))
}

/// A failure in plain words in the page's language (`kbpage.errors.<code>`); the code itself
/// stays visible, small, for support.
pub fn failure_reason(ctx: &crate::web::PageCtx, code: &str) -> String {
    let key = format!("kbpage.errors.{code}");
    let t = ctx.t(&key);
    if t.ends_with(&key) || t.is_empty() { ctx.t("kbpage.errors.other") } else { t }
}

/// The file extensions uploads and registration accept (what [`kind_of`] knows); the upload
/// form's `accept` and its client-side check use this list.
pub const ACCEPTED_EXTENSIONS: &[&str] = &[
    "md", "markdown", "pdf", "docx", "xlsx", "xlsm", "ods", "xls", "csv", "tsv", "png", "jpg", "jpeg", "webp", "tif", "tiff",
    "bmp", "txt", "html", "htm", "xhtml", "eml", "mbox", "pptx", "odp", "doc", "ppt", "msg",
];

/// `200000` → `200,000` (the row cap as the KB page says it).
pub fn group_digits(n: i32) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// Elapsed time in coarse words ("under a minute", "3 min", "2 h 5 min").
pub fn human_elapsed(ctx: &crate::web::PageCtx, secs: &i64) -> String {
    let m = secs / 60;
    if m < 1 {
        ctx.t("kbpage.elapsed_under_minute")
    } else if m < 60 {
        ctx.t("kbpage.elapsed_minutes").replace("{m}", &m.to_string())
    } else {
        ctx.t("kbpage.elapsed_hours").replace("{h}", &(m / 60).to_string()).replace("{m}", &(m % 60).to_string())
    }
}

/// The pages part of a progress line: "page 3 of 12" while a parse reports its pages,
/// "12 pages" once their number is known.
pub fn pages_label(ctx: &crate::web::PageCtx, p: &queries::ProgressView) -> Option<String> {
    let total = p.total?;
    Some(match p.done {
        Some(done) if p.phase == "parsing" => {
            ctx.t("kbpage.pages_done").replace("{done}", &done.to_string()).replace("{total}", &total.to_string())
        }
        _ if total == 1 => ctx.t("kbpage.pages_one"),
        _ => ctx.t("kbpage.pages_total").replace("{n}", &total.to_string()),
    })
}

/// Whether parsing the same file again can end differently: a failure that comes from the
/// file itself ends the same way, so the KB page offers no Retry for it (changing the file
/// reads it again); a busy or restarted worker, a tool installed or configured since, a file
/// restored can.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    Helps,
    CannotHelp,
}

/// The stable failure codes a source can carry, each with a sentence in `kbpage.errors`
/// (a test checks both locales have every one), and whether a new attempt can mend it.
pub const FAILURES: &[(&str, Retry)] = &[
    ("pdf_malformed", Retry::CannotHelp),
    ("pdf_encrypted", Retry::CannotHelp),
    ("pdf_engine_missing", Retry::Helps),
    ("docx_malformed", Retry::CannotHelp),
    ("docx_encrypted", Retry::CannotHelp),
    ("html_malformed", Retry::CannotHelp),
    ("html_too_large", Retry::CannotHelp),
    ("email_malformed", Retry::CannotHelp),
    ("email_too_deep", Retry::CannotHelp),
    ("encrypted", Retry::CannotHelp),
    ("malformed_spreadsheet", Retry::CannotHelp),
    ("container_too_large", Retry::CannotHelp),
    ("container_ratio_exceeded", Retry::CannotHelp),
    ("slides_malformed", Retry::CannotHelp),
    ("slides_too_large", Retry::CannotHelp),
    ("xml_dtd_refused", Retry::CannotHelp),
    ("unsupported_legacy_format", Retry::Helps),
    ("image_unreadable", Retry::CannotHelp),
    ("ocr_engine_missing", Retry::Helps),
    ("ocr_failed", Retry::Helps),
    ("unsupported_kind", Retry::CannotHelp),
    ("file_too_large", Retry::CannotHelp),
    ("too_many_pages", Retry::CannotHelp),
    ("parse_timeout", Retry::Helps),
    ("parse_out_of_memory", Retry::Helps),
    ("parse_failed", Retry::Helps),
    ("text_encoding_invalid", Retry::CannotHelp),
    ("file_unreadable", Retry::Helps),
    ("artifact_invalid", Retry::Helps),
    ("worker_crashed", Retry::Helps),
    ("worker_unavailable", Retry::Helps),
    ("worker_lost", Retry::Helps),
    ("index_failed", Retry::Helps),
    ("file_changed", Retry::Helps),
    ("file_missing", Retry::Helps),
    ("grant_revoked", Retry::CannotHelp),
    ("path_outside_grant", Retry::CannotHelp),
    ("hard_link_refused", Retry::CannotHelp),
    ("mineru_token_missing", Retry::Helps),
    ("mineru_unavailable", Retry::Helps),
    ("mineru_timeout", Retry::Helps),
    ("mineru_failed", Retry::Helps),
    ("mineru_unauthorized", Retry::Helps),
];

/// `code` as one of [`FAILURES`]' codes (`None`: not a source failure code).
pub fn failure_code(code: &str) -> Option<&'static str> {
    FAILURES.iter().map(|(c, _)| *c).find(|c| *c == code)
}

/// Whether parsing again can end differently for a source that failed with `code` (a busy or
/// restarted worker, a tool installed or configured since, a file restored).
pub fn retry_helps(code: &str) -> bool {
    FAILURES.iter().find(|(c, _)| *c == code).is_none_or(|(_, r)| *r == Retry::Helps)
}

/// The passages a source gave, when the reader may count them (`None` for a private KB an
/// admin only sees exist).
pub fn passages_of(kb: &kbs::Kb, counts: &std::collections::HashMap<Uuid, i64>, s: &Source) -> Option<i64> {
    kb.can_read.then(|| counts.get(&s.id).copied().unwrap_or(0))
}

/// The resource kind of a file, from its extension.
pub fn kind_of(path: &Path) -> Option<SourceKind> {
    SourceKind::of_extension(path.extension()?.to_str()?)
}

#[derive(Clone, Debug)]
pub struct FileFacts {
    pub size: i64,
    pub mtime: Option<chrono::DateTime<chrono::Utc>>,
    pub sha256: String,
}

/// Size, mtime and `sha256:<hex>` of a file, streamed (run it off the async runtime).
pub fn file_facts(path: &Path) -> std::io::Result<FileFacts> {
    let meta = std::fs::metadata(path)?;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(FileFacts {
        size: meta.len() as i64,
        mtime: meta.modified().ok().map(chrono::DateTime::<chrono::Utc>::from),
        sha256: format!("sha256:{}", hex::encode(h.finalize())),
    })
}

fn globset(field: &str, globs: &[String]) -> AppResult<Option<GlobSet>> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(Glob::new(g).map_err(|e| AppError::invalid(field, format!("bad glob {g:?}: {e}")))?);
    }
    Ok(Some(b.build().map_err(|e| AppError::invalid(field, e.to_string()))?))
}

/// Files under `dir` (recursively) that have a supported kind, stay inside `root`, and pass
/// the include/exclude globs (matched against the path relative to `root`). Returns the
/// accepted (abs, rel, kind) and the number skipped.
#[allow(clippy::type_complexity)]
pub fn scan_dir(
    root: &Path,
    dir: &Path,
    include: &[String],
    exclude: &[String],
) -> AppResult<(Vec<(PathBuf, String, SourceKind)>, usize)> {
    let inc = globset("include", include)?;
    let exc = globset("exclude", exclude)?;
    let mut files = Vec::new();
    let mut skipped = 0;
    for entry in walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name() {
        let Ok(entry) = entry else {
            skipped += 1;
            continue;
        };
        let ft = entry.file_type();
        if ft.is_dir() {
            continue;
        }
        // Symlinks are followed only when they resolve inside the root.
        let Ok(c) = paths::confine(root, &entry.path().to_string_lossy()) else {
            skipped += 1;
            continue;
        };
        if !c.abs.is_file() {
            skipped += 1;
            continue;
        }
        let hidden = c.rel.split('/').any(|p| p.starts_with('.'));
        let Some(kind) = kind_of(&c.abs).filter(|_| !hidden) else {
            skipped += 1;
            continue;
        };
        if inc.as_ref().is_some_and(|g| !g.is_match(&c.rel)) || exc.as_ref().is_some_and(|g| g.is_match(&c.rel)) {
            skipped += 1;
            continue;
        }
        files.push((c.abs, c.rel, kind));
    }
    Ok((files, skipped))
}

#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub items: Vec<Source>,
    pub created_count: usize,
    pub skipped_count: usize,
    pub folder_id: Option<Uuid>,
    pub directory: bool,
}

pub struct RegisterRequest<'a> {
    pub kb_id: Uuid,
    pub grant_id: Option<Uuid>,
    pub path: &'a str,
    pub include: &'a [String],
    pub exclude: &'a [String],
}

/// Register a file or a directory (recursively) from one of the caller's `read_index`
/// grants into a KB they manage.
pub async fn register(
    conn: &mut crate::db::TenantTx,
    cfg: &crate::config::Config,
    auth: &Auth,
    r: RegisterRequest<'_>,
) -> AppResult<Registered> {
    let kb = kbs::managed(conn, auth, r.kb_id).await?;
    let gp = grants::resolve_for_index(conn, cfg, auth.user_id, r.grant_id, r.path).await?;
    let directory = gp.abs.is_dir();
    let (root, abs, rel) = (gp.root.clone(), gp.abs.clone(), gp.rel.clone());
    let (include, exclude) = (r.include.to_vec(), r.exclude.to_vec());
    type Scanned = (Vec<(String, SourceKind, FileFacts)>, usize);
    let (scanned, skipped_count) = tokio::task::spawn_blocking(move || -> AppResult<Scanned> {
        let (files, skipped) = if directory {
            scan_dir(&root, &abs, &include, &exclude)?
        } else {
            // FIFOs, sockets and devices are never opened (reading a FIFO would block forever).
            if !abs.is_file() {
                return Err(AppError::invalid("path", "not a regular file"));
            }
            let kind = kind_of(&abs).ok_or_else(|| {
                AppError::invalid(
                    "path",
                    "unsupported file kind (Markdown, PDF, DOCX, spreadsheets, CSV, web pages, e-mail, images, text)",
                )
            })?;
            (vec![(abs.clone(), rel.clone(), kind)], 0)
        };
        let facts = files
            .into_iter()
            .map(|(abs, rel, kind)| {
                let facts = file_facts(&abs).map_err(|e| AppError::invalid("path", format!("{rel}: {e}")))?;
                Ok((rel, kind, facts))
            })
            .collect::<AppResult<Vec<_>>>()?;
        Ok((facts, skipped))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    let folder_id = if directory {
        Some(queries::upsert_folder(conn, auth.tenant_id, kb.id, gp.grant.id, &gp.rel, r.include, r.exclude, auth.user_id).await?)
    } else {
        None
    };
    let mut items = Vec::with_capacity(scanned.len());
    let mut created_count = 0;
    for (rel, kind, facts) in &scanned {
        let n = queries::NewSource {
            kb_id: kb.id,
            grant_id: Some(gp.grant.id),
            resource_path: rel,
            kind: *kind,
            size_bytes: facts.size,
            mtime: facts.mtime,
            sha256: &facts.sha256,
        };
        let (s, created) = queries::upsert(conn, auth.tenant_id, auth.user_id, &n).await?;
        created_count += created as usize;
        // New files, and registered files whose content changed since they were indexed.
        if created || s.indexed_hash.as_deref() != Some(facts.sha256.as_str()) {
            queue::enqueue(conn, auth.tenant_id, s.id).await?;
        }
        items.push(s);
    }
    Ok(Registered { items, created_count, skipped_count, folder_id, directory })
}

/// Where an upload's bytes live: content-addressed under the data directory.
pub fn upload_blob_path(uploads_dir: &Path, sha256: &str) -> PathBuf {
    let hex = sha256.trim_start_matches("sha256:");
    uploads_dir.join(&hex[..2.min(hex.len())]).join(hex)
}

/// A safe display name for an upload: the last path component, no control characters.
pub fn upload_name(raw: &str) -> AppResult<String> {
    let name = raw.rsplit(['/', '\\']).next().unwrap_or("").trim();
    let name: String = name.chars().filter(|c| !c.is_control()).collect();
    if name.is_empty() || name == "." || name == ".." || name.len() > 255 {
        return Err(AppError::invalid("file", "the upload needs a file name"));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_failures_a_new_attempt_can_mend_offer_retry() {
        for (code, _) in FAILURES.iter().filter(|(_, r)| *r == Retry::CannotHelp) {
            assert!(!retry_helps(code));
        }
        for code in ["parse_timeout", "worker_crashed", "worker_lost", "ocr_engine_missing", "mineru_unavailable", "file_missing"]
        {
            assert!(retry_helps(code), "{code}");
        }
    }

    use super::*;

    #[test]
    fn accepted_extensions_are_the_kinds_the_server_parses() {
        for e in ACCEPTED_EXTENSIONS {
            assert!(kind_of(Path::new(&format!("a.{e}"))).is_some(), "{e}");
        }
        for e in ["exe", "odg", "zip", "key"] {
            assert!(kind_of(Path::new(&format!("a.{e}"))).is_none(), "{e}");
            assert!(!ACCEPTED_EXTENSIONS.contains(&e));
        }
    }

    #[test]
    fn every_failure_code_has_a_sentence_in_both_languages() {
        for code in FAILURES.iter().map(|(c, _)| *c).chain(["other"]) {
            let key = format!("kbpage.errors.{code}");
            let en = rust_i18n::t!(&key, locale = "en");
            let zh = rust_i18n::t!(&key, locale = "zh-CN");
            assert!(!en.ends_with(&key) && !en.is_empty(), "en: {key} missing");
            // zh-CN falls back to English: a missing translation reads the same.
            assert!(zh != en && zh.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)), "zh-CN: {key} missing");
        }
    }

    #[test]
    fn kinds() {
        assert_eq!(kind_of(Path::new("a/B.MD")), Some(SourceKind::Markdown));
        assert_eq!(kind_of(Path::new("x.pdf")), Some(SourceKind::Pdf));
        assert_eq!(kind_of(Path::new("x.jpeg")), Some(SourceKind::Image));
        assert_eq!(kind_of(Path::new("x.exe")), None);
        assert_eq!(kind_of(Path::new("noext")), None);
    }

    #[test]
    fn upload_names() {
        assert_eq!(upload_name("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(upload_name("C:\\docs\\报告.docx").unwrap(), "报告.docx");
        assert!(upload_name("..").is_err());
        assert!(upload_name("").is_err());
    }

    #[test]
    fn scan_dir_filters() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/.git")).unwrap();
        for f in ["a/one.md", "a/two.pdf", "a/skip.exe", "a/.git/x.md", "b.md", "drafts.md"] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        let (files, skipped) = scan_dir(&root, &root, &[], &["drafts*".into()]).unwrap();
        let rels: Vec<_> = files.iter().map(|f| f.1.as_str()).collect();
        assert_eq!(rels, vec!["a/one.md", "a/two.pdf", "b.md"]);
        assert_eq!(skipped, 3);
        let (files, _) = scan_dir(&root, &root, &["**/*.md".into()], &[]).unwrap();
        assert_eq!(files.len(), 3, "{files:?}");
    }
}
