//! The indexer: artifact → `evidence_section` / `evidence_block` / `evidence_edge` rows.
//!
//! Rows are caches: `rebuild_source` deletes a source's rows and writes them again from its
//! stored artifact, giving identical rows (ids are UUIDv5 of source, hash and block id).

use std::collections::HashMap;

use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::artifact::{Block, ParsedArtifact, ReferenceKind};
use crate::sources::Source;

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

/// The `mnote.evidence_locator.v1` object of one block (SPEC §5).
pub fn locator(source: &Source, art: &ParsedArtifact, b: &Block, section_path: &[String], page_size: Option<[f64; 2]>) -> serde_json::Value {
    json!({
        "schema": "mnote.evidence_locator.v1",
        "kbId": source.kb_id,
        "sourceId": source.id,
        "resourcePath": source.resource_path,
        "resourceKind": source.kind,
        "blockId": b.id,
        "page": b.page,
        "bbox": b.bbox,
        "pageSize": page_size,
        "sectionPath": section_path,
        "lineRange": b.line_range,
        "charRange": b.char_range,
        "paraIdStart": b.para_id_start,
        "paraIdEnd": b.para_id_end,
        "paragraphOrdinal": b.paragraph_ordinal,
        "textFingerprint": b.text_fingerprint,
        "sourceHash": art.source_hash,
        "quality": b.quality.as_str(),
    })
}

/// Replace the source's evidence rows with rows built from `art` (inside the caller's tx).
pub async fn write(conn: &mut PgConnection, tenant: Uuid, source: &Source, art: &ParsedArtifact) -> sqlx::Result<usize> {
    delete_rows(conn, source.id).await?;
    let sm = &art.source_map;
    let hash = art.source_hash.as_str();
    let paths: HashMap<&str, &Vec<String>> = sm.sections.iter().map(|s| (s.id.as_str(), &s.path)).collect();
    for (ordinal, s) in sm.sections.iter().enumerate() {
        sqlx::query(
            "insert into evidence_section (tenant_id, id, source_id, kb_id, section_key, parent_key, title, path,
                 level, ordinal, page_start, page_end, line_start, line_end)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .bind(tenant)
        .bind(section_uuid(source.id, hash, &s.id))
        .bind(source.id)
        .bind(source.kb_id)
        .bind(&s.id)
        .bind(&s.parent_id)
        .bind(&s.title)
        .bind(&s.path)
        .bind(s.level as i16)
        .bind(ordinal as i32)
        .bind(s.page_start.map(|p| p as i32))
        .bind(s.page_end.map(|p| p as i32))
        .bind(s.line_range.map(|r| r[0] as i32))
        .bind(s.line_range.map(|r| r[1] as i32))
        .execute(&mut *conn)
        .await?;
    }
    let page_sizes: HashMap<u32, ([f64; 2], bool)> = sm.pages.iter().map(|p| (p.page, ([p.width, p.height], p.ocr))).collect();
    let empty = Vec::new();
    let mut count = 0;
    for (ordinal, b) in art.all_blocks().enumerate() {
        let path = b.section_id.as_deref().and_then(|s| paths.get(s).copied()).unwrap_or(&empty);
        let (size, ocr) = match b.page.and_then(|p| page_sizes.get(&p)) {
            Some((s, o)) => (Some(*s), *o),
            None => (None, false),
        };
        let loc = locator(source, art, b, path, size);
        sqlx::query(
            "insert into evidence_block (tenant_id, id, source_id, kb_id, source_hash, block_key, section_key, ordinal,
                 block_type, text, page, bbox, page_width, page_height, line_start, line_end, char_start, char_end,
                 para_id_start, para_id_end, paragraph_ordinal, text_fingerprint, quality, confidence, is_ocr, locator)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
                     $21, $22, $23, $24, $25, $26)",
        )
        .bind(tenant)
        .bind(evidence_id(source.id, hash, &b.id))
        .bind(source.id)
        .bind(source.kb_id)
        .bind(hash)
        .bind(&b.id)
        .bind(&b.section_id)
        .bind(ordinal as i32)
        .bind(serde_json::to_value(b.block_type).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default())
        .bind(&b.text)
        .bind(b.page.map(|p| p as i32))
        .bind(b.bbox.map(|bb| bb.to_vec()))
        .bind(size.map(|s| s[0]))
        .bind(size.map(|s| s[1]))
        .bind(b.line_range.map(|r| r[0] as i32))
        .bind(b.line_range.map(|r| r[1] as i32))
        .bind(b.char_range[0] as i32)
        .bind(b.char_range[1] as i32)
        .bind(&b.para_id_start)
        .bind(&b.para_id_end)
        .bind(b.paragraph_ordinal.map(|o| o as i32))
        .bind(&b.text_fingerprint)
        .bind(b.quality.as_str())
        .bind(b.confidence)
        .bind(ocr)
        .bind(&loc)
        .execute(&mut *conn)
        .await?;
        count += 1;
    }
    // Deterministic edges, each anchored at a located block.
    let mut n = 0;
    for s in &sm.sections {
        for bid in &s.block_ids {
            insert_edge(conn, tenant, source.id, hash, n, "section_contains_block", bid, None, Some(&s.id), None).await?;
            n += 1;
        }
    }
    for r in &sm.references {
        let kind = match r.kind {
            ReferenceKind::Link | ReferenceKind::Wikilink => "markdown_links_to",
            ReferenceKind::Image => "resource_refers_to",
            ReferenceKind::Mention => "block_mentions_entity",
        };
        insert_edge(conn, tenant, source.id, hash, n, kind, &r.source_block_id, None, None, Some(&r.target)).await?;
        n += 1;
    }
    Ok(count)
}

#[allow(clippy::too_many_arguments)]
async fn insert_edge(
    conn: &mut PgConnection,
    tenant: Uuid,
    source_id: Uuid,
    hash: &str,
    n: usize,
    kind: &str,
    from_block: &str,
    to_block: Option<&str>,
    to_section: Option<&str>,
    target_text: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query(
        "insert into evidence_edge (tenant_id, id, source_id, kind, source_block_id, target_block_id,
             target_section_key, target_text)
         values ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(tenant)
    .bind(edge_uuid(source_id, hash, n))
    .bind(source_id)
    .bind(kind)
    .bind(evidence_id(source_id, hash, from_block))
    .bind(to_block.map(|b| evidence_id(source_id, hash, b)))
    .bind(to_section)
    .bind(target_text)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn delete_rows(conn: &mut PgConnection, source_id: Uuid) -> sqlx::Result<()> {
    sqlx::query("delete from evidence_edge where source_id = $1").bind(source_id).execute(&mut *conn).await?;
    sqlx::query("delete from evidence_block where source_id = $1").bind(source_id).execute(&mut *conn).await?;
    sqlx::query("delete from evidence_section where source_id = $1").bind(source_id).execute(&mut *conn).await?;
    Ok(())
}

/// Store an artifact as the source's current version (older versions are dropped).
pub async fn store_artifact(conn: &mut PgConnection, tenant: Uuid, source_id: Uuid, art: &ParsedArtifact) -> sqlx::Result<()> {
    sqlx::query("delete from source_artifact where source_id = $1 and source_hash <> $2")
        .bind(source_id)
        .bind(&art.source_hash)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "insert into source_artifact (tenant_id, source_id, source_hash, provider, provider_version, text, source_map)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (tenant_id, source_id, source_hash) do update
         set provider = excluded.provider, provider_version = excluded.provider_version,
             text = excluded.text, source_map = excluded.source_map",
    )
    .bind(tenant)
    .bind(source_id)
    .bind(&art.source_hash)
    .bind(&art.provider)
    .bind(&art.provider_version)
    .bind(&art.text)
    .bind(sqlx::types::Json(&art.source_map))
    .execute(conn)
    .await?;
    Ok(())
}

/// The stored artifact of a source's indexed version.
pub async fn load_artifact(conn: &mut PgConnection, source_id: Uuid) -> sqlx::Result<Option<ParsedArtifact>> {
    let row: Option<(String, String, String, String, sqlx::types::Json<super::artifact::SourceMap>)> = sqlx::query_as(
        "select a.source_hash, a.provider, a.provider_version, a.text, a.source_map
         from source_artifact a join source s on s.tenant_id = a.tenant_id and s.id = a.source_id
         where a.source_id = $1 and a.source_hash = s.indexed_hash",
    )
    .bind(source_id)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|(source_hash, provider, provider_version, text, sm)| ParsedArtifact {
        source_hash,
        provider,
        provider_version,
        text,
        source_map: sm.0,
    }))
}

/// Drop and rebuild the evidence rows of every indexed source in the transaction's tenant
/// from the stored artifacts only. Returns (sources, blocks).
pub async fn rebuild_all(conn: &mut PgConnection, tenant: Uuid) -> sqlx::Result<(usize, usize)> {
    sqlx::query("delete from evidence_edge").execute(&mut *conn).await?;
    sqlx::query("delete from evidence_block").execute(&mut *conn).await?;
    sqlx::query("delete from evidence_section").execute(&mut *conn).await?;
    let ids: Vec<Uuid> = sqlx::query_scalar("select id from source where indexed_hash is not null order by id")
        .fetch_all(&mut *conn)
        .await?;
    let (mut sources, mut blocks) = (0, 0);
    for id in ids {
        let Some(source) = crate::sources::queries::get(conn, id).await? else { continue };
        let Some(art) = load_artifact(conn, id).await? else { continue };
        blocks += write(conn, tenant, &source, &art).await?;
        sources += 1;
    }
    Ok((sources, blocks))
}
