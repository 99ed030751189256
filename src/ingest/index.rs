//! The indexer: artifact → `evidence_section` / `evidence_block` / `evidence_edge` rows.
//!
//! Rows are caches: `rebuild_source` deletes a source's rows and writes them again from its
//! stored artifact, giving identical rows (ids are UUIDv5 of source, hash and block id).

use std::collections::HashMap;

use sqlx::{PgConnection, types::Json};
use uuid::Uuid;

use crate::db::TenantTx;

use super::{
    artifact::{Block, BlockType, ParsedArtifact, ReferenceKind},
    fragment,
};
use crate::{
    evidence::{LOCATOR_SCHEMA, Locator, SourceKind},
    search::analyze,
    sources::queries::Source,
};

/// Namespace for deterministic evidence ids.
const EVIDENCE_NS: Uuid = Uuid::from_u128(0x6d6e6f74_6500_4e76_8964_656e63650001);

/// `evidenceId` of a block: stable across re-indexing, new when the file content changes.
pub fn evidence_id(source_id: Uuid, source_hash: &str, block_id: &str) -> Uuid {
    Uuid::new_v5(&EVIDENCE_NS, format!("block/{source_id}/{source_hash}/{block_id}").as_bytes())
}

fn section_uuid(source_id: Uuid, source_hash: &str, section_id: &str) -> Uuid {
    Uuid::new_v5(&EVIDENCE_NS, format!("section/{source_id}/{source_hash}/{section_id}").as_bytes())
}

fn edge_uuid(source_id: Uuid, source_hash: &str, n: usize) -> Uuid {
    Uuid::new_v5(&EVIDENCE_NS, format!("edge/{source_id}/{source_hash}/{n}").as_bytes())
}

/// The `mnote.evidence_locator.v1` of one block (SPEC §5).
pub fn locator(
    source: &Source,
    kind: SourceKind,
    art: &ParsedArtifact,
    b: &Block,
    section_path: &[String],
    page_size: Option<[f64; 2]>,
) -> Locator {
    Locator {
        schema: LOCATOR_SCHEMA.to_string(),
        kb_id: source.kb_id,
        source_id: source.id,
        resource_path: source.resource_path.clone(),
        resource_kind: kind,
        block_id: b.id.clone(),
        page: b.page,
        bbox: b.bbox,
        page_size,
        section_path: section_path.to_vec(),
        line_range: b.line_range,
        char_range: b.char_range,
        para_id_start: b.para_id_start.clone(),
        para_id_end: b.para_id_end.clone(),
        paragraph_ordinal: b.paragraph_ordinal,
        sheet: b.sheet.clone(),
        sheet_hidden: b.sheet_hidden,
        cell_range: b.cell_range.clone(),
        slide: b.slide.clone(),
        attachment: b.attachment.clone(),
        text_fingerprint: b.text_fingerprint.clone(),
        source_hash: art.source_hash.clone(),
        quality: b.quality,
    }
}

/// Replace the source's evidence rows with rows built from `art` (inside the caller's tx).
pub async fn write(conn: &mut PgConnection, tenant: Uuid, source: &Source, art: &ParsedArtifact) -> sqlx::Result<usize> {
    let kind: SourceKind = source.kind;
    delete_rows(conn, tenant, source.id).await?;
    let sm = &art.source_map;
    let hash = art.source_hash.as_str();
    let paths: HashMap<&str, &Vec<String>> = sm.sections.iter().map(|s| (s.id.as_str(), &s.path)).collect();
    for (ordinal, s) in sm.sections.iter().enumerate() {
        sqlx::query!(
            "insert into evidence_section (tenant_id, id, source_id, kb_id, section_key, parent_key, title, path,
                 level, ordinal, page_start, page_end, line_start, line_end)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            tenant,
            section_uuid(source.id, hash, &s.id),
            source.id,
            source.kb_id,
            &s.id,
            s.parent_id.as_deref(),
            &s.title,
            &s.path,
            s.level as i16,
            ordinal as i32,
            s.page_start.map(|p| p as i32),
            s.page_end.map(|p| p as i32),
            s.line_range.map(|r| r[0] as i32),
            s.line_range.map(|r| r[1] as i32),
        )
        .execute(&mut *conn)
        .await?;
    }
    let page_sizes: HashMap<u32, ([f64; 2], bool)> = sm.pages.iter().map(|p| (p.page, ([p.width, p.height], p.ocr))).collect();
    let empty = Vec::new();
    let mut rows = BlockRows::default();
    let blocks: Vec<&Block> = art.all_blocks().collect();
    let page_of = |b: &Block| match b.page.and_then(|p| page_sizes.get(&p)) {
        Some((s, o)) => (Some(*s), *o),
        None => (None, false),
    };
    // Blocks too short to be evidence stay locatable but out of ranking (`fragment`).
    let fragment: Vec<bool> = blocks.iter().map(|b| fragment::is_fragment(b, page_of(b).1)).collect();
    let carried = fragment::carried_context(&blocks, &fragment);
    for (ordinal, b) in blocks.iter().enumerate() {
        let path = b.section_id.as_deref().and_then(|s| paths.get(s).copied()).unwrap_or(&empty);
        let (size, ocr) = page_of(b);
        let lex = match (fragment[ordinal], &carried[ordinal]) {
            (true, _) => analyze::Lexemes { tsvector: String::new(), len: 0, terms: Vec::new() },
            (false, Some(run)) => {
                let mut context = path.to_vec();
                context.push(run.clone());
                lexical_terms(b, &context)
            }
            (false, None) => lexical_terms(b, path),
        };
        rows.push(source, kind, art, b, ordinal, path, size, ocr, lex);
        if rows.len() >= INSERT_BATCH {
            rows.insert(conn, tenant, source).await?;
        }
    }
    let count = rows.total;
    rows.insert(conn, tenant, source).await?;

    // Deterministic edges, each anchored at a located block.
    let mut edges = EdgeRows::default();
    for s in &sm.sections {
        for bid in &s.block_ids {
            edges.push(source.id, hash, "section_contains_block", bid, None, Some(&s.id), None);
        }
    }
    for r in &sm.references {
        let kind = match r.kind {
            ReferenceKind::Link | ReferenceKind::Wikilink => "markdown_links_to",
            ReferenceKind::Image => "resource_refers_to",
            ReferenceKind::Mention => "block_mentions_entity",
        };
        edges.push(source.id, hash, kind, &r.source_block_id, None, None, Some(&r.target));
    }
    edges.insert(conn, tenant, source.id).await?;
    Ok(count)
}

/// Rows per multi-row insert: one round trip per batch instead of per block.
const INSERT_BATCH: usize = 2000;

/// The terms the lexical index keeps for a block. A heading is indexed by its own text: the
/// titles above it would make every short heading under a matching title a top hit. Any other
/// block also gets its section path, each distinct term of it once
/// ([`analyze::index_terms_in_context`]), so a paragraph is found by the heading it sits under
/// without the path outweighing the words the paragraph uses. (The embedder still reads
/// [`crate::evidence::index_text`].)
pub fn lexical_terms(b: &Block, section_path: &[String]) -> analyze::Lexemes {
    if b.block_type == BlockType::Heading {
        return analyze::index_terms(&b.text);
    }
    let context: Vec<String> = section_path.iter().filter(|t| !b.text.starts_with(t.as_str())).cloned().collect();
    analyze::index_terms_in_context(&context, &b.text)
}

/// Column arrays of pending `evidence_block` rows (inserted with `unnest`).
#[derive(Default)]
struct BlockRows {
    total: usize,
    id: Vec<Uuid>,
    source_hash: Vec<String>,
    block_key: Vec<String>,
    section_key: Vec<Option<String>>,
    ordinal: Vec<i32>,
    block_type: Vec<String>,
    text: Vec<String>,
    page: Vec<Option<i32>>,
    bbox: [Vec<Option<f64>>; 4],
    page_width: Vec<Option<f64>>,
    page_height: Vec<Option<f64>>,
    line_start: Vec<Option<i32>>,
    line_end: Vec<Option<i32>>,
    char_start: Vec<i32>,
    char_end: Vec<i32>,
    para_id_start: Vec<Option<String>>,
    para_id_end: Vec<Option<String>>,
    paragraph_ordinal: Vec<Option<i32>>,
    text_fingerprint: Vec<String>,
    quality: Vec<String>,
    confidence: Vec<Option<f32>>,
    is_ocr: Vec<bool>,
    locator: Vec<Json<Locator>>,
    lex: Vec<String>,
    lex_len: Vec<i32>,
}

impl BlockRows {
    fn len(&self) -> usize {
        self.id.len()
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        source: &Source,
        kind: SourceKind,
        art: &ParsedArtifact,
        b: &Block,
        ordinal: usize,
        path: &[String],
        size: Option<[f64; 2]>,
        ocr: bool,
        lex: analyze::Lexemes,
    ) {
        let hash = art.source_hash.as_str();
        self.total += 1;
        self.id.push(evidence_id(source.id, hash, &b.id));
        self.source_hash.push(hash.to_string());
        self.block_key.push(b.id.clone());
        self.section_key.push(b.section_id.clone());
        self.ordinal.push(ordinal as i32);
        self.block_type
            .push(serde_json::to_value(b.block_type).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default());
        self.text.push(b.text.clone());
        self.page.push(b.page.map(|p| p as i32));
        for (i, col) in self.bbox.iter_mut().enumerate() {
            col.push(b.bbox.map(|bb| bb[i]));
        }
        self.page_width.push(size.map(|s| s[0]));
        self.page_height.push(size.map(|s| s[1]));
        self.line_start.push(b.line_range.map(|r| r[0] as i32));
        self.line_end.push(b.line_range.map(|r| r[1] as i32));
        self.char_start.push(b.char_range[0] as i32);
        self.char_end.push(b.char_range[1] as i32);
        self.para_id_start.push(b.para_id_start.clone());
        self.para_id_end.push(b.para_id_end.clone());
        self.paragraph_ordinal.push(b.paragraph_ordinal.map(|o| o as i32));
        self.text_fingerprint.push(b.text_fingerprint.clone());
        self.quality.push(b.quality.as_str().to_string());
        self.confidence.push(b.confidence);
        self.is_ocr.push(ocr);
        self.locator.push(Json(locator(source, kind, art, b, path, size)));
        self.lex.push(lex.tsvector);
        self.lex_len.push(lex.len);
    }

    async fn insert(&mut self, conn: &mut PgConnection, tenant: Uuid, source: &Source) -> sqlx::Result<()> {
        if self.id.is_empty() {
            return Ok(());
        }
        sqlx::query!(
            "insert into evidence_block (tenant_id, id, source_id, kb_id, source_hash, block_key, section_key, ordinal,
                 block_type, text, page, bbox, page_width, page_height, line_start, line_end, char_start, char_end,
                 para_id_start, para_id_end, paragraph_ordinal, text_fingerprint, quality, confidence, is_ocr, locator,
                 lex, lex_len)
             select $1, r.id, $2, $3, r.source_hash, r.block_key, r.section_key, r.ordinal, r.block_type, r.text, r.page,
                 case when r.x0 is null then null else array[r.x0, r.y0, r.x1, r.y1] end,
                 r.page_width, r.page_height, r.line_start, r.line_end, r.char_start, r.char_end, r.para_id_start,
                 r.para_id_end, r.paragraph_ordinal, r.text_fingerprint, r.quality, r.confidence, r.is_ocr, r.locator,
                 r.lex::tsvector, r.lex_len
             from unnest($4::uuid[], $5::text[], $6::text[], $7::text[], $8::int4[], $9::text[], $10::text[], $11::int4[],
                         $12::float8[], $13::float8[], $14::float8[], $15::float8[], $16::float8[], $17::float8[],
                         $18::int4[], $19::int4[], $20::int4[], $21::int4[], $22::text[], $23::text[], $24::int4[],
                         $25::text[], $26::text[], $27::float4[], $28::bool[], $29::jsonb[], $30::text[], $31::int4[])
                 as r(id, source_hash, block_key, section_key, ordinal, block_type, text, page, x0, y0, x1, y1,
                      page_width, page_height, line_start, line_end, char_start, char_end, para_id_start, para_id_end,
                      paragraph_ordinal, text_fingerprint, quality, confidence, is_ocr, locator, lex, lex_len)",
            tenant,
            source.id,
            source.kb_id,
            &self.id,
            &self.source_hash,
            &self.block_key,
            // Arrays with null elements and of our own types: their element types are the casts in the SQL.
            &self.section_key as _,
            &self.ordinal,
            &self.block_type,
            &self.text,
            &self.page as _,
            &self.bbox[0] as _,
            &self.bbox[1] as _,
            &self.bbox[2] as _,
            &self.bbox[3] as _,
            &self.page_width as _,
            &self.page_height as _,
            &self.line_start as _,
            &self.line_end as _,
            &self.char_start,
            &self.char_end,
            &self.para_id_start as _,
            &self.para_id_end as _,
            &self.paragraph_ordinal as _,
            &self.text_fingerprint,
            &self.quality,
            &self.confidence as _,
            &self.is_ocr,
            &self.locator as _,
            &self.lex,
            &self.lex_len,
        )
        .execute(conn)
        .await?;
        let total = self.total;
        *self = BlockRows { total, ..Default::default() };
        Ok(())
    }
}

/// Column arrays of pending `evidence_edge` rows.
#[derive(Default)]
struct EdgeRows {
    id: Vec<Uuid>,
    kind: Vec<&'static str>,
    from: Vec<Uuid>,
    to_block: Vec<Option<Uuid>>,
    to_section: Vec<Option<String>>,
    target_text: Vec<Option<String>>,
}

impl EdgeRows {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        source_id: Uuid,
        hash: &str,
        kind: &'static str,
        from_block: &str,
        to_block: Option<&str>,
        to_section: Option<&str>,
        target_text: Option<&str>,
    ) {
        self.id.push(edge_uuid(source_id, hash, self.id.len()));
        self.kind.push(kind);
        self.from.push(evidence_id(source_id, hash, from_block));
        self.to_block.push(to_block.map(|b| evidence_id(source_id, hash, b)));
        self.to_section.push(to_section.map(String::from));
        self.target_text.push(target_text.map(String::from));
    }

    async fn insert(&self, conn: &mut PgConnection, tenant: Uuid, source_id: Uuid) -> sqlx::Result<()> {
        for start in (0..self.id.len()).step_by(INSERT_BATCH) {
            let r = start..(start + INSERT_BATCH).min(self.id.len());
            // An edge whose block is not in the index is refused by the foreign key.
            sqlx::query!(
                "insert into evidence_edge (tenant_id, id, source_id, kind, source_block_id, target_block_id,
                     target_section_key, target_text)
                 select $1, r.id, $2, r.kind, r.from_block, r.to_block, r.to_section, r.target_text
                 from unnest($3::uuid[], $4::text[], $5::uuid[], $6::uuid[], $7::text[], $8::text[])
                     as r(id, kind, from_block, to_block, to_section, target_text)",
                tenant,
                source_id,
                &self.id[r.clone()],
                // `&'static str` elements and arrays with null elements: typed by the casts in the SQL.
                &self.kind[r.clone()] as _,
                &self.from[r.clone()],
                &self.to_block[r.clone()] as _,
                &self.to_section[r.clone()] as _,
                &self.target_text[r] as _,
            )
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }
}

pub async fn delete_rows(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid) -> sqlx::Result<()> {
    sqlx::query!("delete from evidence_edge where tenant_id = $2 and source_id = $1", source_id, tenant)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("delete from evidence_block where tenant_id = $2 and source_id = $1", source_id, tenant)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("delete from evidence_section where tenant_id = $2 and source_id = $1", source_id, tenant)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Store an artifact as the source's current version (older versions are dropped).
pub async fn store_artifact(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid, art: &ParsedArtifact) -> sqlx::Result<()> {
    sqlx::query!(
        "delete from source_artifact where tenant_id = $3 and source_id = $1 and source_hash <> $2",
        source_id,
        &art.source_hash,
        tenant,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "insert into source_artifact (tenant_id, source_id, source_hash, provider, provider_version, text, source_map)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (tenant_id, source_id, source_hash) do update
         set provider = excluded.provider, provider_version = excluded.provider_version,
             text = excluded.text, source_map = excluded.source_map",
        tenant,
        source_id,
        &art.source_hash,
        &art.provider,
        &art.provider_version,
        &art.text,
        Json(&art.source_map) as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The stored artifact of a source's indexed version.
pub async fn load_artifact(tx: &mut TenantTx, source_id: Uuid) -> sqlx::Result<Option<ParsedArtifact>> {
    let tenant = tx.tenant_id();
    let row = sqlx::query!(
        r#"select a.source_hash, a.provider, a.provider_version, a.text,
               a.source_map as "source_map: Json<super::artifact::SourceMap>"
         from source_artifact a join source s on s.tenant_id = a.tenant_id and s.id = a.source_id
         where a.tenant_id = $2 and a.source_id = $1 and a.source_hash = s.indexed_hash"#,
        source_id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| ParsedArtifact {
        source_hash: r.source_hash,
        provider: r.provider,
        provider_version: r.provider_version,
        text: r.text,
        source_map: r.source_map.0,
    }))
}

/// Drop and rebuild the evidence rows of every indexed source in the transaction's tenant
/// from the stored artifacts only (after a change to what the index keeps, e.g. its terms).
/// Returns (sources, blocks).
///
/// The vectors survive: a block rebuilt from the same artifact gets the same id and the same
/// embedder text ([`crate::evidence::index_text`]), so its embeddings are put back instead of being computed
/// again; those of blocks that are gone stay gone.
pub async fn rebuild_all(tx: &mut TenantTx, tenant: Uuid) -> sqlx::Result<(usize, usize)> {
    // `create table … as` takes no bind parameters: made empty, then filled.
    // all tenants: `with no data` copies the columns, not a single row.
    sqlx::query!("create temporary table reindex_kept_embedding on commit drop as select * from evidence_embedding with no data")
        .execute(&mut **tx)
        .await?;
    // dynamic SQL: the temporary table above is not in the schema the macros check against
    sqlx::query("insert into reindex_kept_embedding select * from evidence_embedding where tenant_id = $1")
        .bind(tenant)
        .execute(&mut **tx)
        .await?;
    sqlx::query!("delete from evidence_edge where tenant_id = $1", tenant).execute(&mut **tx).await?;
    sqlx::query!("delete from evidence_block where tenant_id = $1", tenant).execute(&mut **tx).await?;
    sqlx::query!("delete from evidence_section where tenant_id = $1", tenant).execute(&mut **tx).await?;
    let ids: Vec<Uuid> =
        sqlx::query_scalar!("select id from source where tenant_id = $1 and indexed_hash is not null order by id", tenant)
            .fetch_all(&mut **tx)
            .await?;
    let (mut sources, mut blocks) = (0, 0);
    for id in ids {
        let Some(source) = crate::sources::queries::get(tx, id).await? else { continue };
        let Some(art) = load_artifact(tx, id).await? else { continue };
        blocks += write(tx, tenant, &source, &art).await?;
        sources += 1;
    }
    // dynamic SQL: reads the temporary table above, which is not in the schema the macros check against
    sqlx::query(
        "insert into evidence_embedding
         select k.* from reindex_kept_embedding k
         where k.tenant_id = $1 and exists (select 1 from evidence_block b where b.tenant_id = k.tenant_id and b.id = k.block_id)
         on conflict do nothing",
    )
    .bind(tenant)
    .execute(&mut **tx)
    .await?;
    Ok((sources, blocks))
}
