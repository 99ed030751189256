//! `mnote.knowledge_rag.query` and `open_reference`: ask the LightRAG endpoints of the caller's
//! KBs (concurrently, one call per endpoint), then keep only references to sources the caller
//! can see in those KBs (the post-filter) and cite each at the evidence block its chunk came
//! from.

use serde::Serialize;
use sqlx::types::Json;
use uuid::Uuid;

use crate::db::TenantTx;

use super::{
    ErrorView,
    binding::{self, Binding},
    blocks::{BlockCache, SourceBlocks},
    client::{QueryMode, QueryRequest, RagError},
    docs::source_of_file_path,
    mapping::{self, MatchQuality},
};
use crate::{
    auth::Auth,
    error::{AppError, AppResult},
    evidence::{KbScope, Locator, Quality, SourceKind},
    search::open::{self, OpenAction},
    state::AppState,
};

pub const RESULT_SCHEMA: &str = "mnote.knowledge_rag.query_result.v1";
pub const REFERENCE_SCHEMA: &str = "mnote.knowledge_rag.reference.v1";
const QUOTE_CHARS: usize = 400;
/// LightRAG's marker for "nothing was retrieved", at the end of its canned reply ("Sorry, I'm
/// not able to provide an answer to that question.[no-context]"): never passed on.
pub const NO_CONTEXT: &str = "[no-context]";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuoteSource {
    /// The chunk text LightRAG returned (aligned to our block).
    Chunk,
    /// LightRAG returned no usable text, or text that matches none of our blocks
    /// (`unmatched`): the quote is our best evidence block for the query.
    Evidence,
    /// No chunk text (or only text matching none of our blocks), and no evidence block
    /// matched the query: the quote is empty.
    Missing,
    /// Only an image placeholder, and no evidence block matched the query.
    Placeholder,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentDiagnostics {
    /// For sources with OCR text: whether LightRAG's chunk really carried it. `null` for
    /// sources without OCR text.
    pub ocr_text_exposed: Option<bool>,
    /// Every chunk LightRAG returned was only an image placeholder.
    pub quote_only_image_placeholder: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    pub schema: &'static str,
    /// The number the answer's `[n]` markers use.
    pub reference_id: String,
    pub kb_id: Uuid,
    pub source_id: Uuid,
    pub source_path: String,
    /// LightRAG's name for the document.
    pub file_path: String,
    pub quote: String,
    pub quote_source: QuoteSource,
    pub content_diagnostics: ContentDiagnostics,
    pub locator: Locator,
    /// The cited evidence block (`null` when only the resource could be cited).
    pub evidence_id: Option<Uuid>,
    pub locator_degraded: bool,
    pub match_quality: MatchQuality,
    /// Evidence blocks the chunk spans. In a spreadsheet, CSV or deck the locator cites the row
    /// or shape of them that best matches the query's terms (when one does); otherwise it cites
    /// the first and the viewer highlights the whole span.
    pub block_count: usize,
    pub citation_markdown: String,
    pub citation_url: String,
    pub open_action: OpenAction,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointError {
    pub kb_ids: Vec<Uuid>,
    #[serde(flatten)]
    pub error: ErrorView,
}

/// What LightRAG reported about its own query processing: bookkeeping, never evidence.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bookkeeping {
    pub kind: &'static str,
    pub note: &'static str,
    pub kb_ids: Vec<Uuid>,
    pub keywords: Keywords,
    pub entity_count: usize,
    pub relation_count: usize,
    pub chunk_count: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Keywords {
    pub high_level: Vec<String>,
    pub low_level: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueryResult {
    pub schema: &'static str,
    pub query: String,
    pub mode: QueryMode,
    /// With `answer: true`: the endpoints' answers, markers renumbered to `references`;
    /// `None` when none answered (LightRAG's no-context reply is never passed on).
    pub answer: Option<String>,
    /// With `answer: true`: no endpoint had anything to answer from (LightRAG said so).
    pub no_context: bool,
    pub source_scope_mode: &'static str,
    pub references: Vec<Reference>,
    /// References LightRAG returned that were dropped: not ours, or not visible to the caller.
    pub dropped_references: usize,
    pub degraded: bool,
    pub degraded_reason: Option<&'static str>,
    pub errors: Vec<EndpointError>,
    pub raw_metadata: Vec<Bookkeeping>,
    pub timings: Timings,
}

impl QueryResult {
    /// A result for `query` in `mode` before any endpoint answered: no references, no answer.
    pub fn empty(query: String, mode: QueryMode) -> QueryResult {
        QueryResult {
            schema: RESULT_SCHEMA,
            query,
            mode,
            answer: None,
            no_context: false,
            source_scope_mode: "post_filter_mapped_references",
            references: Vec::new(),
            dropped_references: 0,
            degraded: false,
            degraded_reason: None,
            errors: Vec::new(),
            raw_metadata: Vec::new(),
            timings: Timings::default(),
        }
    }
}

/// Where the time of a query went (milliseconds): waiting for LightRAG, and in all.
#[derive(Debug, Clone, Copy, Serialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    pub provider_ms: f64,
    pub total_ms: f64,
}

#[derive(Debug, Clone)]
pub struct QueryInput {
    pub kb_ids: Vec<Uuid>,
    pub query: String,
    pub mode: QueryMode,
    pub top_k: Option<u32>,
    pub answer: bool,
}

/// A reference as LightRAG gave it: a file and the chunk texts behind it (if any).
struct Raw {
    provider_id: String,
    file_path: String,
    chunks: Vec<String>,
}

pub fn validate(q: &str) -> AppResult<String> {
    let q = q.trim();
    // LightRAG needs 3 "English-equivalent" characters (a CJK character counts 2).
    let weight: usize = q.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum();
    if weight < 3 || q.len() > 60_000 {
        return Err(AppError::invalid("query", "a question of at least 3 characters (or 2 CJK characters)"));
    }
    Ok(q.to_string())
}

/// The bound KBs a query goes to: the ones asked for (each readable by the caller), or every
/// bound KB the caller reads (a binding's policy follows its KB's contents: an admin's query
/// never reaches a private KB's LightRAG).
pub(super) async fn bindings_for(conn: &mut TenantTx, auth: &Auth, kb_ids: &[Uuid]) -> AppResult<Vec<Binding>> {
    let ids: Vec<Uuid> = if kb_ids.is_empty() {
        crate::kbs::queries::list_readable(conn, auth.user_id, auth.role.is_admin()).await?.into_iter().map(|k| k.id).collect()
    } else {
        for id in kb_ids {
            crate::kbs::readable(conn, auth, *id).await?;
        }
        kb_ids.to_vec()
    };
    let b = binding::active_for(conn, &ids).await?;
    if b.is_empty() {
        return Err(AppError::invalid("kbIds", "none of these knowledge bases is bound to a LightRAG endpoint"));
    }
    Ok(b)
}

pub async fn run(state: &AppState, auth: &Auth, input: QueryInput) -> AppResult<QueryResult> {
    let started = std::time::Instant::now();
    let query = validate(&input.query)?;
    let mut tx = auth.tx(state).await?;
    let bindings = bindings_for(&mut tx, auth, &input.kb_ids).await?;
    tx.commit().await?;

    let cfg = &state.config.rag;
    let groups = endpoints(cfg, bindings);
    let req = QueryRequest {
        query: query.clone(),
        mode: input.mode,
        top_k: input.top_k,
        chunk_top_k: input.top_k,
        include_references: true,
        include_chunk_content: true,
    };
    let calls = groups.iter().map(|(b, kbs)| {
        let req = &req;
        async move {
            let client = b.client(cfg)?;
            if input.answer {
                let a = client.query(req).await?;
                let raws = a
                    .references
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| Raw { provider_id: r.reference_id, file_path: r.file_path, chunks: r.content.unwrap_or_default() })
                    .collect();
                Ok::<_, RagError>((Some(a.response), raws, None))
            } else {
                let d = client.query_data(req).await?;
                let mut raws: Vec<Raw> = d
                    .references
                    .iter()
                    .map(|r| Raw { provider_id: r.reference_id.clone(), file_path: r.file_path.clone(), chunks: Vec::new() })
                    .collect();
                for c in &d.chunks {
                    match raws.iter_mut().find(|r| r.provider_id == c.reference_id && r.file_path == c.file_path) {
                        Some(r) => r.chunks.push(c.content.clone()),
                        None => raws.push(Raw {
                            provider_id: c.reference_id.clone(),
                            file_path: c.file_path.clone(),
                            chunks: vec![c.content.clone()],
                        }),
                    }
                }
                let meta = Bookkeeping {
                    kind: "query_bookkeeping",
                    note: "LightRAG's own query processing (keywords, graph counts): not evidence; cite only references[]",
                    kb_ids: kbs.clone(),
                    keywords: Keywords { high_level: d.keywords_high, low_level: d.keywords_low },
                    entity_count: d.entity_count,
                    relation_count: d.relation_count,
                    chunk_count: d.chunks.len(),
                };
                Ok((None, raws, Some(meta)))
            }
        }
    });
    let t0 = std::time::Instant::now();
    let results = futures_util::future::join_all(calls).await;
    let t1 = std::time::Instant::now();

    let mut out = QueryResult::empty(query.clone(), input.mode);
    let mut answers: Vec<String> = Vec::new();
    let mut no_context = 0usize;
    let mut tx = auth.tx(state).await?;
    for ((_, kbs), result) in groups.iter().zip(results) {
        let (answer, raws, meta) = match result {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(code = e.code(), "knowledge-RAG query: {e}");
                out.degraded = true;
                out.degraded_reason.get_or_insert(e.code());
                out.errors
                    .push(EndpointError { kb_ids: kbs.clone(), error: ErrorView { code: e.code().into(), message: e.message } });
                continue;
            }
        };
        out.raw_metadata.extend(meta);
        // Provider reference ids of this endpoint → our numbers.
        let mut renumber: Vec<(String, String)> = Vec::new();
        for raw in raws {
            match cite(&mut tx, &state.rag_blocks, state.config.public_url.as_deref(), kbs, &raw.file_path, &raw.chunks, &query)
                .await?
            {
                Some(mut r) => {
                    let n = (out.references.len() + 1).to_string();
                    renumber.push((raw.provider_id, n.clone()));
                    r.reference_id = n;
                    out.references.push(r);
                }
                None => out.dropped_references += 1,
            }
        }
        match answer {
            Some(a) if is_no_context(&a) => no_context += 1,
            Some(a) => answers.push(renumber_markers(&a, &renumber)),
            None => {}
        }
    }
    tx.commit().await?;
    let ms = |d: std::time::Duration| (d.as_secs_f64() * 100_000.0).round() / 100.0;
    out.timings = Timings { provider_ms: ms(t1 - t0), total_ms: ms(started.elapsed()) };
    if input.answer {
        out.no_context = answers.is_empty() && no_context > 0;
        out.answer = (!answers.is_empty()).then(|| answers.join("\n\n"));
    }
    Ok(out)
}

/// LightRAG's canned reply when it retrieved nothing (it carries [`NO_CONTEXT`]).
pub fn is_no_context(answer: &str) -> bool {
    answer.contains(NO_CONTEXT)
}

/// One call per endpoint (URL + key): KBs sharing an endpoint share its answer.
pub(super) fn endpoints(cfg: &crate::config::RagConfig, bindings: Vec<Binding>) -> Vec<(Binding, Vec<Uuid>)> {
    let mut groups: Vec<(Binding, Vec<Uuid>)> = Vec::new();
    let mut keys: Vec<Option<String>> = Vec::new();
    for b in bindings {
        let key = b.key(cfg).ok().flatten().map(|k| k.expose().to_string());
        match groups.iter().zip(&keys).position(|((g, _), k)| g.url == b.url && *k == key) {
            Some(i) => groups[i].1.push(b.kb_id),
            None => {
                let kb = b.kb_id;
                groups.push((b, vec![kb]));
                keys.push(key);
            }
        }
    }
    groups
}

/// A piece of an answer: text, or a `[n]` citation marker (its number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerPart<'a> {
    Text(&'a str),
    Marker(&'a str),
}

/// An answer cut at its `[n]` markers (digits only; `[x]` or `[]` stay text).
pub fn answer_parts(answer: &str) -> Vec<AnswerPart<'_>> {
    let mut parts = Vec::new();
    let mut rest = answer;
    let mut text_from = 0;
    let mut at = 0;
    while let Some(i) = rest.find('[') {
        let after = &rest[i + 1..];
        match after.find(']') {
            Some(j) if j > 0 && after[..j].chars().all(|c| c.is_ascii_digit()) => {
                if at + i > text_from {
                    parts.push(AnswerPart::Text(&answer[text_from..at + i]));
                }
                parts.push(AnswerPart::Marker(&after[..j]));
                at += i + 1 + j + 1;
                text_from = at;
                rest = &after[j + 1..];
            }
            _ => {
                at += i + 1;
                rest = after;
            }
        }
    }
    if text_from < answer.len() {
        parts.push(AnswerPart::Text(&answer[text_from..]));
    }
    parts
}

/// Rewrite `[k]` markers of one endpoint's answer to our reference numbers (markers of
/// dropped references become `[–]`: nothing the caller may see backs them).
fn renumber_markers(answer: &str, map: &[(String, String)]) -> String {
    answer_parts(answer)
        .into_iter()
        .map(|p| match p {
            AnswerPart::Text(t) => t.to_string(),
            AnswerPart::Marker(id) => match map.iter().find(|(p, _)| p == id) {
                Some((_, n)) => format!("[{n}]"),
                None => "[–]".to_string(),
            },
        })
        .collect()
}

struct SourceRow {
    id: Uuid,
    kb_id: Uuid,
    resource_path: String,
    kind: String,
    indexed_hash: Option<String>,
}

/// Cite one LightRAG reference: `None` (dropped) unless `file_path` names a source the caller
/// can see in one of `kbs`.
pub async fn cite(
    tx: &mut TenantTx,
    cache: &BlockCache,
    public_url: Option<&str>,
    kbs: &[Uuid],
    file_path: &str,
    chunks: &[String],
    query: &str,
) -> AppResult<Option<Reference>> {
    let tenant = tx.tenant_id();
    let Some(source_id) = source_of_file_path(file_path) else { return Ok(None) };
    // A view: its columns are nullable to the macros; `source`'s own are not null.
    let source = sqlx::query_as!(
        SourceRow,
        r#"select id as "id!", kb_id as "kb_id!", resource_path as "resource_path!", kind as "kind!", indexed_hash
         from readable_source s
         where s.tenant_id = $3 and s.id = $1 and s.kb_id = any($2)"#,
        source_id,
        kbs,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await?;
    let Some(source) = source else { return Ok(None) };
    let blocks = match &source.indexed_hash {
        Some(h) => Some(cache.get(tx, source.id, h).await?),
        None => None,
    };
    let m = match &blocks {
        Some(b) if source.kind == "markdown" => {
            let rendered: Vec<String> = chunks.iter().map(|c| mapping::markdown_as_rendered(c)).collect();
            mapped(b, &rendered, query, false)
        }
        // A sheet's rows and a deck's shapes: the one the query names; flowing text: the span.
        Some(b) => {
            let kind = source.kind.parse::<SourceKind>().ok();
            mapped(b, chunks, query, matches!(kind, Some(SourceKind::Spreadsheet | SourceKind::Csv | SourceKind::Slides)))
        }
        // Not indexed yet: no block to align to or to enrich from.
        None => mapped(&SourceBlocks::empty(), chunks, query, false),
    };
    // The cited block's locator, read under the caller's RLS.
    let located = match (m.first, &blocks) {
        (Some(i), Some(b)) => {
            let l = sqlx::query_scalar!(
                r#"select locator as "locator: Json<Locator>" from evidence_block where tenant_id = $2 and id = $1"#,
                b.ids[i],
                tenant,
            )
            .fetch_optional(&mut **tx)
            .await?;
            // A chunk spanning several blocks, none focused: the viewer highlights through the last.
            let last = (m.count > 1 && !m.focused).then(|| b.ids.get(i + m.count - 1).copied()).flatten();
            l.map(|l| (b.ids[i], l.0, last))
        }
        _ => None,
    };
    Ok(Some(reference_of(public_url, &source, m, located, file_path)))
}

/// What the aligner made of a reference's chunks.
struct Mapped {
    quality: MatchQuality,
    first: Option<usize>,
    count: usize,
    /// `first` is the block of the span the query's terms point at, not the span's start.
    focused: bool,
    quote: String,
    quote_source: QuoteSource,
    only_placeholder: bool,
    has_ocr: bool,
    ocr_in_blocks: bool,
    exact_block: bool,
}

/// `focus`: cite the block of an aligned span the query names (rows, shapes), not the span.
fn mapped(blocks: &SourceBlocks, chunks: &[String], query: &str, focus_in_span: bool) -> Mapped {
    let has_ocr = blocks.is_ocr.iter().any(|o| *o);
    let usable: Vec<&String> = chunks.iter().filter(|c| !mapping::is_image_placeholder(c) && !c.trim().is_empty()).collect();
    let only_placeholder = !chunks.is_empty() && usable.is_empty() && chunks.iter().any(|c| mapping::is_image_placeholder(c));
    // The best-aligned chunk: exact before fuzzy before unmatched.
    let rank = |q: MatchQuality| match q {
        MatchQuality::Exact => 0,
        MatchQuality::Fuzzy => 1,
        MatchQuality::Unmatched => 2,
        MatchQuality::FileOnly => 3,
    };
    let mut best: Option<(mapping::Alignment, &String)> = None;
    for c in &usable {
        if let Some(a) = blocks.stream.align(c)
            && best.as_ref().is_none_or(|(b, _)| rank(a.quality) < rank(b.quality))
        {
            let exact = a.quality == MatchQuality::Exact;
            best = Some((a, c));
            if exact {
                break;
            }
        }
    }
    let mut focused = false;
    let (quality, first, count, quote, quote_source) = match best {
        Some((a, _)) if matches!(a.quality, MatchQuality::Exact | MatchQuality::Fuzzy) => {
            let at = if focus_in_span { focus(blocks, a.first, a.blocks, query) } else { a.first };
            focused = at != a.first;
            (a.quality, Some(at), a.blocks, clip(&blocks.texts[at]), QuoteSource::Chunk)
        }
        // A chunk that aligns to none of our blocks is not shown (it could say anything):
        // our own block for the query instead, or nothing.
        Some(_) => match mapping::best_block_for_terms(&blocks.texts(), query, has_ocr) {
            Some(i) => (MatchQuality::Unmatched, Some(i), 1, clip(&blocks.texts[i]), QuoteSource::Evidence),
            None => (MatchQuality::Unmatched, None, 0, String::new(), QuoteSource::Missing),
        },
        None => match mapping::best_block_for_terms(&blocks.texts(), query, has_ocr) {
            Some(i) => (MatchQuality::FileOnly, Some(i), 1, clip(&blocks.texts[i]), QuoteSource::Evidence),
            None if only_placeholder => (MatchQuality::FileOnly, None, 0, String::new(), QuoteSource::Placeholder),
            None => (MatchQuality::FileOnly, None, 0, String::new(), QuoteSource::Missing),
        },
    };
    let (ocr_in_blocks, exact_block) = match first {
        Some(i) if focused => (blocks.is_ocr[i], blocks.exact[i]),
        Some(i) => (blocks.is_ocr[i..(i + count.max(1)).min(blocks.len())].iter().any(|o| *o), blocks.exact[i]),
        None => (false, false),
    };
    Mapped { quality, first, count, focused, quote, quote_source, only_placeholder, has_ocr, ocr_in_blocks, exact_block }
}

/// The block of the span `[first, first + count)` that best matches the query's terms (a
/// long chunk names the row or paragraph that answers), else `first`.
fn focus(blocks: &SourceBlocks, first: usize, count: usize, query: &str) -> usize {
    if count < 2 {
        return first;
    }
    let end = (first + count).min(blocks.len());
    let span: Vec<mapping::BlockText<'_>> =
        (first..end).map(|i| mapping::BlockText { text: &blocks.texts[i], is_ocr: blocks.is_ocr[i] }).collect();
    mapping::best_block_for_terms(&span, query, false).map_or(first, |i| first + i)
}

fn reference_of(
    public_url: Option<&str>,
    source: &SourceRow,
    m: Mapped,
    located: Option<(Uuid, Locator, Option<Uuid>)>,
    file_path: &str,
) -> Reference {
    let title = open::source_title(&source.resource_path);
    let (locator, action, evidence_id, exact_block, ocr_in_blocks) = match located {
        Some((id, l, through)) => {
            let a = open::open_span_action(&l, id, through, public_url);
            (l, a, Some(id), m.exact_block, m.ocr_in_blocks)
        }
        None => (resource_locator(source), open::open_resource(source.id, public_url), None, false, false),
    };
    let ocr_text_exposed = m.has_ocr.then_some(m.quote_source == QuoteSource::Chunk && ocr_in_blocks);
    Reference {
        schema: REFERENCE_SCHEMA,
        reference_id: String::new(),
        kb_id: source.kb_id,
        source_id: source.id,
        source_path: source.resource_path.clone(),
        file_path: file_path.to_string(),
        quote: m.quote,
        quote_source: m.quote_source,
        content_diagnostics: ContentDiagnostics { ocr_text_exposed, quote_only_image_placeholder: m.only_placeholder },
        locator_degraded: !(m.quality == MatchQuality::Exact && exact_block),
        match_quality: m.quality,
        block_count: m.count,
        citation_markdown: open::citation_markdown(&title, &locator.place(), &action.url),
        citation_url: action.url.clone(),
        locator,
        evidence_id,
        open_action: action,
    }
}

fn clip(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// A locator naming only the resource (no block could be cited).
fn resource_locator(s: &SourceRow) -> Locator {
    Locator {
        bbox: None,
        block_id: String::new(),
        char_range: [0, 0],
        kb_id: s.kb_id,
        line_range: None,
        page: None,
        page_size: None,
        para_id_end: None,
        para_id_start: None,
        paragraph_ordinal: None,
        sheet: None,
        sheet_hidden: None,
        cell_range: None,
        slide: None,
        attachment: None,
        quality: Quality::ResourceOnly,
        resource_kind: s.kind.parse().unwrap_or(SourceKind::Text),
        resource_path: s.resource_path.clone(),
        schema: crate::evidence::LOCATOR_SCHEMA.to_string(),
        section_path: Vec::new(),
        source_hash: s.indexed_hash.clone().unwrap_or_default(),
        source_id: s.id,
        text_fingerprint: String::new(),
    }
}

/// Knowledge-RAG OCR hits for the document search: references whose chunk text is OCR text
/// of an image or scanned page, from the caller's bound KBs (naive retrieval, no LLM answer).
/// `Ok(None)` when no visible KB is bound; a LightRAG failure comes back as `degraded`.
pub async fn ocr_hits(state: &AppState, auth: &Auth, q: &str) -> AppResult<Option<QueryResult>> {
    let Ok(query) = validate(q) else { return Ok(None) };
    let mut tx = auth.tx(state).await?;
    let bound = bindings_for(&mut tx, auth, &[]).await;
    tx.commit().await?;
    if bound.is_err() {
        return Ok(None);
    }
    let mut r =
        run(state, auth, QueryInput { kb_ids: Vec::new(), query, mode: QueryMode::Naive, top_k: None, answer: false }).await?;
    r.references.retain(|x| x.quote_source == QuoteSource::Chunk && x.content_diagnostics.ocr_text_exposed == Some(true));
    Ok(Some(r))
}

/// `open_reference`: a provider hint (file path, optional chunk text) → our citation, from a
/// source of the caller's KBs within `scope` (a run's KBs); not found otherwise.
pub async fn open_reference(
    state: &AppState,
    auth: &Auth,
    scope: &KbScope,
    file_path: &str,
    quote: Option<&str>,
) -> AppResult<Reference> {
    let mut tx = auth.tx(state).await?;
    let kbs: Vec<Uuid> = match scope.kb_ids() {
        Some(ids) => ids.to_vec(),
        None => crate::kbs::queries::list_readable(&mut tx, auth.user_id, auth.role.is_admin())
            .await?
            .into_iter()
            .map(|k| k.id)
            .collect(),
    };
    let chunks: Vec<String> = quote.filter(|q| !q.trim().is_empty()).map(|q| vec![q.to_string()]).unwrap_or_default();
    let r = cite(&mut tx, &state.rag_blocks, state.config.public_url.as_deref(), &kbs, file_path, &chunks, quote.unwrap_or(""))
        .await?;
    tx.commit().await?;
    r.ok_or(AppError::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_markers_follow_the_kept_references() {
        let map = vec![("1".to_string(), "3".to_string()), ("2".to_string(), "4".to_string())];
        assert_eq!(renumber_markers("A [1], B [2] and C [5]; see [x] [].", &map), "A [3], B [4] and C [–]; see [x] [].");
        assert_eq!(
            answer_parts("[1]a [x] b[22]"),
            vec![AnswerPart::Marker("1"), AnswerPart::Text("a [x] b"), AnswerPart::Marker("22")]
        );
    }

    #[test]
    fn short_queries_are_refused_like_lightrag_does() {
        assert!(validate("ab").is_err());
        assert!(validate("线程").is_ok());
        assert_eq!(validate("  who leads  ").unwrap(), "who leads");
    }
}
