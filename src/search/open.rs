//! The evidence tools besides search: `open` (the only place citation URLs are built) and
//! `read` (an evidence block with its context).

use serde_json::Value;
use sqlx::{PgConnection, types::Json};
use uuid::Uuid;

use crate::db::TenantTx;
use crate::evidence::{
    KbScope, Locator, LocatorRef, Place, SourceKind, SourceStatus,
    tools::{EvidenceBlock, OpenRequest, OpenResponse, ReadRequest, ReadResponse},
};
pub use crate::evidence::{origin::OpenedFrom, tools::OpenAction};

fn with_public(url: String, public_url: Option<&str>) -> OpenAction {
    let absolute_url = public_url.map(|p| format!("{}{url}", p.trim_end_matches('/')));
    OpenAction { kind: "mnote.open_resource_locator", url, absolute_url }
}

/// A viewer `url` (relative or absolute, with a query and maybe `#hl`) with `from=` added
/// (replacing one it had); a URL that is not a viewer link is returned as it was.
pub fn with_from(url: &str, from: OpenedFrom) -> String {
    let (base, frag) = match url.find('#') {
        Some(i) => url.split_at(i),
        None => (url, ""),
    };
    if !base.contains("/sources/") || !base.contains("/view") {
        return url.to_string();
    }
    let (path, query) = base.split_once('?').unwrap_or((base, ""));
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty() && !p.starts_with("from=")).collect();
    let from = format!("from={}", from.param());
    params.push(&from);
    format!("{path}?{}{frag}", params.join("&"))
}

/// The viewer URL of an evidence block with the locator it was indexed with. Besides the
/// evidence id it carries the locator's own hints (page, first line, DOCX paraId, text
/// fingerprint, paragraph ordinal), so a citation still opens near the right place after the
/// file changed and the id is gone.
pub fn open_action(locator: &Locator, evidence_id: Uuid, public_url: Option<&str>) -> OpenAction {
    let mut url = format!("/sources/{}/view?evidence={evidence_id}", locator.source_id);
    for p in hint_params(&locator.place()) {
        url.push('&');
        url.push_str(&p);
    }
    url.push_str("#hl");
    with_public(url, public_url)
}

/// [`open_action`] for a citation that spans several blocks (a knowledge-RAG chunk): `through=`
/// names the span's last evidence block, and the viewer highlights every block from the first
/// to it (the first scrolled into view).
pub fn open_span_action(locator: &Locator, evidence_id: Uuid, through: Option<Uuid>, public_url: Option<&str>) -> OpenAction {
    let mut a = open_action(locator, evidence_id, None);
    if let Some(last) = through.filter(|t| *t != evidence_id) {
        let base = a.url.trim_end_matches("#hl");
        a.url = format!("{base}&through={last}#hl");
    }
    with_public(a.url, public_url)
}

/// `page=`, `line=`, `para=`, `fp=`, `ordinal=`, `sheet=`, `cells=` from a locator's place
/// (URL-safe values only; a sheet name percent-encoded).
fn hint_params(place: &Place<'_>) -> Vec<String> {
    let mut params = Vec::new();
    if let Some(p) = place.page {
        params.push(format!("page={p}"));
    }
    if let Some(l) = place.first_line {
        params.push(format!("line={l}"));
    }
    // DOCX (and HTML, without paraIds): the viewer tries paraId, then the text fingerprint, then
    // the paragraph (HTML: element) ordinal.
    let token = |v: Option<&str>| v.filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric())).map(str::to_string);
    if let Some(p) = token(place.para_id) {
        params.push(format!("para={p}"));
    }
    if matches!(place.kind, None | Some("docx") | Some("html"))
        && let Some(f) = token(place.fingerprint)
    {
        params.push(format!("fp={f}"));
    }
    if let Some(o) = place.ordinal {
        params.push(format!("ordinal={o}"));
    }
    // Spreadsheets: the sheet (any text, encoded) and the cells (A1 notation only).
    if let Some(s) = place.sheet.filter(|s| !s.is_empty()) {
        params.push(serde_urlencoded::to_string([("sheet", s)]).unwrap_or_default());
    }
    if let Some(c) = place.cell_range.filter(|c| crate::evidence::cells::parse_range(c).is_some()) {
        params.push(format!("cells={c}"));
    }
    params
}

/// A viewer URL from a bare locator whose block is no longer indexed (the file changed): the
/// page or line it pointed at, and a DOCX paragraph's paraId, fingerprint and ordinal.
fn open_action_without_block(source_id: Uuid, locator: &LocatorRef, public_url: Option<&str>) -> OpenAction {
    let params = hint_params(&locator.place());
    let q = if params.is_empty() { String::new() } else { format!("?{}", params.join("&")) };
    with_public(format!("/sources/{source_id}/view{q}#hl"), public_url)
}

/// The viewer URL of a whole source, for a citation no block could be found for.
pub fn open_resource(source_id: Uuid, public_url: Option<&str>) -> OpenAction {
    with_public(format!("/sources/{source_id}/view"), public_url)
}

/// A source's display title: its file name.
pub fn source_title(resource_path: &str) -> String {
    resource_path.rsplit('/').next().unwrap_or(resource_path).to_string()
}

/// `[title · p.3](url)`, `[title · §Heading](url)` or `[title · L12–14](url)`.
pub fn citation_markdown(title: &str, place: &Place<'_>, url: &str) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('[', "\\[").replace(']', "\\]");
    match place.citation_label() {
        Some(p) => format!("[{} · {}]({url})", esc(title), esc(&p)),
        None => format!("[{}]({url})", esc(title)),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    Invalid(String),
    #[error("no such evidence")]
    NotFound,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

struct Anchor {
    id: Uuid,
    source_id: Uuid,
    ordinal: i32,
    section_key: Option<String>,
    locator: Json<Locator>,
}

/// Find the block a reference (an evidence id, else a locator) names, under the caller's RLS.
/// A locator whose block changed is matched by its text fingerprint; `Ok(None)` means the
/// source is visible but the block is gone.
async fn resolve(
    conn: &mut PgConnection,
    tenant: Uuid,
    evidence_id: Option<Uuid>,
    locator: Option<&Value>,
) -> Result<(Uuid, Option<Anchor>), ToolError> {
    let anchor = if let Some(id) = evidence_id {
        sqlx::query_as!(
            Anchor,
            r#"select id, source_id, ordinal, section_key, locator as "locator: _" from evidence_block
             where tenant_id = $2 and id = $1"#,
            id,
            tenant,
        )
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(ToolError::NotFound)?
    } else if let Some(loc) = locator {
        let loc = LocatorRef::from_value(loc);
        let source_id = loc
            .source_id
            .as_deref()
            .and_then(|s| Uuid::parse_str(s).ok())
            .ok_or_else(|| ToolError::Invalid("locator.sourceId is missing or not a UUID".into()))?;
        let visible: bool = sqlx::query_scalar!(
            r#"select exists (select 1 from readable_source s where s.tenant_id = $2 and s.id = $1) as "visible!""#,
            source_id,
            tenant,
        )
        .fetch_one(&mut *conn)
        .await?;
        if !visible {
            return Err(ToolError::NotFound);
        }
        let (block, hash, fp) = (loc.block_id.as_deref(), loc.source_hash.as_deref(), loc.text_fingerprint.as_deref());
        let row = sqlx::query_as!(
            Anchor,
            r#"select id, source_id, ordinal, section_key, locator as "locator: _" from evidence_block
             where tenant_id = $5 and source_id = $1 and (($2::text is not null and block_key = $2 and ($3::text is null or source_hash = $3))
                                       or ($4::text is not null and text_fingerprint = $4))
             order by (block_key = $2 and source_hash = $3) desc nulls last, ordinal limit 1"#,
            source_id,
            block,
            hash,
            fp,
            tenant,
        )
        .fetch_optional(&mut *conn)
        .await?;
        match row {
            Some(a) => a,
            None => return Ok((source_id, None)),
        }
    } else {
        return Err(ToolError::Invalid("give evidenceId or locator".into()));
    };
    Ok((anchor.source_id, Some(anchor)))
}

pub(super) struct SourceInfo {
    pub(super) title: String,
    pub(super) kind: SourceKind,
    pub(super) resource_path: String,
    pub(super) status: SourceStatus,
}

/// The readable source `id` inside `scope`: [`ToolError::NotFound`] when it does not exist,
/// is not readable (RLS, revoked grant) or lies outside the scope. Every evidence read by id
/// (`read`, `open`, `outline`) passes here, so the scope bounds them all.
pub(super) async fn source_info(
    conn: &mut PgConnection,
    tenant: Uuid,
    id: Uuid,
    scope: &KbScope,
) -> Result<SourceInfo, ToolError> {
    // A view's columns are nullable to the macros; these are `source`'s NOT NULL columns.
    let row = sqlx::query!(
        r#"select kind as "kind!", resource_path as "resource_path!", status as "status!"
         from readable_source s where s.tenant_id = $2 and s.id = $1 and ($3::uuid[] is null or s.kb_id = any($3))"#,
        id,
        tenant,
        scope.kb_ids(),
    )
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(ToolError::NotFound)?;
    let kind = row.kind.parse().map_err(|e: String| ToolError::Db(sqlx::Error::Decode(e.into())))?;
    let status = row.status.parse().map_err(|e: String| ToolError::Db(sqlx::Error::Decode(e.into())))?;
    Ok(SourceInfo { title: source_title(&row.resource_path), kind, resource_path: row.resource_path, status })
}

/// `POST /api/evidence/open` (and the `open` tool, within its run's `scope`).
/// Every statement names the transaction's tenant (`tenant_id = $n`; RLS stays the net).
pub async fn open(
    tx: &mut TenantTx,
    r: &OpenRequest,
    scope: &KbScope,
    public_url: Option<&str>,
) -> Result<OpenResponse, ToolError> {
    let tenant = tx.tenant().unwrap_or_default();
    let (source_id, anchor) = resolve(tx, tenant, r.evidence_id, r.locator.as_ref()).await?;
    let info = source_info(tx, tenant, source_id, scope).await?;
    let (action, citation, exact) = match anchor {
        Some(a) => {
            let action = open_action(&a.locator.0, a.id, public_url);
            let citation = citation_markdown(&info.title, &a.locator.0.place(), &action.url);
            (action, citation, true)
        }
        None => {
            let loc = r.locator.as_ref().map(LocatorRef::from_value).unwrap_or_default();
            let action = open_action_without_block(source_id, &loc, public_url);
            let citation = citation_markdown(&info.title, &loc.place(), &action.url);
            (action, citation, false)
        }
    };
    Ok(OpenResponse {
        block_found: exact,
        citation_markdown: citation,
        ok: true,
        open_action: action,
        schema: "mnote.evidence_open_response.v1",
        stale: info.status == SourceStatus::Stale,
    })
}

/// One `evidence_block` row as `read` returns it.
struct BlockRow {
    id: Uuid,
    block_key: String,
    block_type: String,
    text: String,
    locator: Json<Locator>,
    ordinal: i32,
}

fn evidence_block(row: BlockRow, public_url: Option<&str>) -> EvidenceBlock {
    EvidenceBlock {
        block_id: row.block_key,
        evidence_id: row.id,
        open_action: open_action(&row.locator.0, row.id, public_url),
        source: row.locator.0,
        text: row.text,
        block_type: row.block_type,
    }
}

const READ_SECTION_MAX: i64 = 40;

/// `POST /api/evidence/read` (and the `read` tool, within its run's `scope`): the anchor,
/// `window` blocks before and after, the other blocks of its section (bounded), its section
/// path and the source's title and kind.
pub async fn read(
    tx: &mut TenantTx,
    r: &ReadRequest,
    scope: &KbScope,
    public_url: Option<&str>,
) -> Result<ReadResponse, ToolError> {
    let tenant = tx.tenant().unwrap_or_default();
    let window = r.window.unwrap_or(2);
    if window > 20 {
        return Err(ToolError::Invalid("window must be at most 20".into()));
    }
    let (source_id, anchor) = resolve(tx, tenant, r.evidence_id, r.locator.as_ref()).await?;
    let anchor = anchor.ok_or(ToolError::NotFound)?;
    let info = source_info(tx, tenant, source_id, scope).await?;
    let rows = sqlx::query_as!(
        BlockRow,
        r#"select id, block_key, block_type, text, locator as "locator: _", ordinal from evidence_block
         where tenant_id = $4 and source_id = $1 and ordinal between $2::int4 - $3::int4 and $2::int4 + $3::int4
         order by ordinal"#,
        source_id,
        anchor.ordinal,
        window as i32,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    let mut previous = Vec::new();
    let mut next = Vec::new();
    let mut anchor_block = None;
    for row in rows {
        let ord = row.ordinal;
        let j = evidence_block(row, public_url);
        match ord.cmp(&anchor.ordinal) {
            std::cmp::Ordering::Less => previous.push(j),
            std::cmp::Ordering::Equal => anchor_block = Some(j),
            std::cmp::Ordering::Greater => next.push(j),
        }
    }
    let (section_path, section_blocks, truncated) = match &anchor.section_key {
        Some(key) => {
            let path: Option<Vec<String>> = sqlx::query_scalar!(
                "select path from evidence_section where tenant_id = $3 and source_id = $1 and section_key = $2",
                source_id,
                key,
                tenant,
            )
            .fetch_optional(&mut **tx)
            .await?;
            let rows = sqlx::query_as!(
                BlockRow,
                r#"select id, block_key, block_type, text, locator as "locator: _", ordinal from evidence_block
                 where tenant_id = $6 and source_id = $1 and section_key = $2 and id <> $3
                 order by abs(ordinal - $4), ordinal limit $5"#,
                source_id,
                key,
                anchor.id,
                anchor.ordinal,
                READ_SECTION_MAX + 1,
                tenant,
            )
            .fetch_all(&mut **tx)
            .await?;
            let truncated = rows.len() as i64 > READ_SECTION_MAX;
            let mut rows: Vec<_> = rows.into_iter().take(READ_SECTION_MAX as usize).collect();
            rows.sort_by_key(|r| r.ordinal);
            (path.unwrap_or_default(), rows.into_iter().map(|r| evidence_block(r, public_url)).collect::<Vec<_>>(), truncated)
        }
        None => (Vec::new(), Vec::new(), false),
    };
    Ok(ReadResponse {
        anchor: anchor_block,
        next,
        ok: true,
        previous,
        resource_kind: info.kind,
        resource_path: info.resource_path,
        schema: "mnote.evidence_read_response.v1",
        section_blocks,
        section_path,
        section_truncated: truncated,
        source_title: info.title,
        stale: info.status == SourceStatus::Stale,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_answer_origin_is_a_typed_from_parameter() {
        let run = Uuid::from_u128(7);
        let from = OpenedFrom::Answer(run);
        assert_eq!(OpenedFrom::parse(&from.param()), Some(from));
        for bad in ["", "ai:", "ai:nope", "x:00000000-0000-0000-0000-000000000007", "ai:{00000000-0000-0000-0000-000000000007}"] {
            assert_eq!(OpenedFrom::parse(bad), None, "{bad}");
        }
        let s = Uuid::from_u128(1);
        assert_eq!(
            with_from(&format!("/sources/{s}/view?evidence={run}&line=3#hl"), from),
            format!("/sources/{s}/view?evidence={run}&line=3&from=ai:{run}#hl")
        );
        assert_eq!(with_from(&format!("/sources/{s}/view#hl"), from), format!("/sources/{s}/view?from=ai:{run}#hl"));
        assert_eq!(
            with_from(&format!("https://m.test/sources/{s}/view?from=ai:x&page=2"), from),
            format!("https://m.test/sources/{s}/view?page=2&from=ai:{run}")
        );
        assert_eq!(with_from("https://example.com/a?b", from), "https://example.com/a?b");
        assert_eq!(from.back_url(), format!("/ai/runs/{run}"));
    }

    fn locator(v: Value) -> Locator {
        let mut base = json!({
            "schema": crate::evidence::LOCATOR_SCHEMA, "kbId": Uuid::nil(), "sourceId": "11111111-1111-1111-1111-111111111111",
            "resourcePath": "a", "resourceKind": "pdf", "blockId": "b1", "page": null, "bbox": null, "pageSize": null,
            "sectionPath": [], "lineRange": null, "charRange": [0, 1], "paraIdStart": null, "paraIdEnd": null,
            "paragraphOrdinal": null, "textFingerprint": "ab12", "sourceHash": "sha256:00", "quality": "exact"
        });
        base.as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn urls_are_root_relative_unless_a_public_url_is_set() {
        let id = Uuid::nil();
        let s = "11111111-1111-1111-1111-111111111111";
        let loc = locator(json!({"page": 3}));
        let a = open_action(&loc, id, None);
        assert_eq!(a.url, format!("/sources/{s}/view?evidence=00000000-0000-0000-0000-000000000000&page=3#hl"));
        assert!(a.absolute_url.is_none());
        let a = open_action(&loc, id, Some("https://mnote.example/"));
        assert_eq!(a.absolute_url.unwrap(), format!("https://mnote.example{}", a.url));
        let docx = locator(json!({"resourceKind": "docx", "paraIdStart": "1A2B3C4D", "paragraphOrdinal": 7}));
        assert_eq!(
            open_action(&docx, id, None).url,
            format!("/sources/{s}/view?evidence={id}&para=1A2B3C4D&fp=ab12&ordinal=7#hl")
        );
        let md = locator(json!({"resourceKind": "markdown", "lineRange": [12, 14]}));
        assert_eq!(open_action(&md, id, None).url, format!("/sources/{s}/view?evidence={id}&line=12#hl"));
        let hostile = locator(json!({"resourceKind": "docx", "paraIdStart": "x&y=1", "textFingerprint": "a#b"}));
        assert_eq!(open_action(&hostile, id, None).url, format!("/sources/{s}/view?evidence={id}#hl"));
        let last = Uuid::from_u128(9);
        assert_eq!(
            open_span_action(&md, id, Some(last), Some("https://m.example/")).url,
            format!("/sources/{s}/view?evidence={id}&line=12&through={last}#hl")
        );
        assert_eq!(open_span_action(&md, id, Some(id), None).url, open_action(&md, id, None).url);
        // A caller's bare locator: hints only, the kind unknown.
        let bare = LocatorRef::from_value(&json!({"sourceId": s, "paraIdStart": "1A2B", "textFingerprint": "ab12", "page": "x"}));
        assert_eq!(
            open_action_without_block(Uuid::nil(), &bare, None).url,
            format!("/sources/{}/view?para=1A2B&fp=ab12#hl", Uuid::nil())
        );
    }

    #[test]
    fn citation_markdown_names_the_place() {
        let place = |v: Value| LocatorRef::from_value(&v);
        assert_eq!(citation_markdown("spec.pdf", &place(json!({"page": 3})).place(), "/u"), "[spec.pdf · p.3](/u)");
        assert_eq!(
            citation_markdown("a.md", &place(json!({"sectionPath": ["A", "B"], "lineRange": [3, 4]})).place(), "/u"),
            "[a.md · §B](/u)"
        );
        assert_eq!(
            citation_markdown("a.md", &place(json!({"sectionPath": [], "lineRange": [3, 4]})).place(), "/u"),
            "[a.md · L3–4](/u)"
        );
        assert_eq!(
            citation_markdown("x[1].docx", &place(json!({"paragraphOrdinal": 7})).place(), "/u"),
            "[x\\[1\\].docx · ¶7](/u)"
        );
        assert_eq!(citation_markdown("a.pdf", &locator(json!({"page": 2})).place(), "/u"), "[a.pdf · p.2](/u)");
    }
}
