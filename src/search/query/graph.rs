//! Graph mode: lexical seeds expanded along evidence edges.

use std::collections::HashMap;

use sqlx::PgConnection;
use uuid::Uuid;

use super::*;

/// Lexical seeds, then up to two hops along edges: in the same section the section's heading
/// and the blocks right before and after, blocks that mention the same `@entity`, the opening
/// blocks of a linked document and blocks linking to the seed's document. Each hop halves the
/// score.
///
/// Only what is connected to a real match comes back, never padding: no seeds (nothing
/// matched) means no results, a seed in a long section brings its neighbours, not the whole
/// section at one shared score, and text repeated within its document (a page footer, "All
/// rights reserved") is never a neighbour.
pub(super) async fn graph(
    conn: &mut PgConnection,
    engine: &Engine,
    f: &Filters,
    t: &QueryTerms,
    top_k: usize,
) -> sqlx::Result<Ranked> {
    let seeds = lexical_ranked(conn, engine, f, t, GRAPH_SEEDS.max(top_k)).await?;
    let mut best: HashMap<Uuid, f64> = seeds.ids.iter().copied().collect();
    let mut steps: HashMap<Uuid, GraphStep> = HashMap::new();
    let mut frontier: Vec<(Uuid, f64)> = seeds.ids.clone();
    for hop in 1..=2u32 {
        if frontier.is_empty() {
            break;
        }
        let ids: Vec<Uuid> = frontier.iter().map(|x| x.0).collect();
        let score_of: HashMap<Uuid, f64> = frontier.iter().copied().collect();
        let rows = sqlx::query!(
            r#"with seed as (select unnest($1::uuid[]) as id),
             hits as (
               -- same section: its heading and the blocks right before and after the seed
               select e2.source_block_id as id, e1.source_block_id as via, 'section_contains_block' as kind
               from evidence_edge e1 join evidence_edge e2
                 on e2.tenant_id = e1.tenant_id and e2.source_id = e1.source_id
                and e2.kind = 'section_contains_block' and e2.target_section_key = e1.target_section_key
               join evidence_block b1 on b1.tenant_id = e1.tenant_id and b1.id = e1.source_block_id
               join evidence_block b2 on b2.tenant_id = e2.tenant_id and b2.id = e2.source_block_id
               where e1.tenant_id = $3 and e1.kind = 'section_contains_block' and e1.source_block_id in (select id from seed)
                 and (b2.block_type = 'heading' or abs(b2.ordinal - b1.ordinal) = 1)
               union all
               -- same entity
               select e2.source_block_id, e1.source_block_id, 'block_mentions_entity'
               from evidence_edge e1 join evidence_edge e2
                 on e2.tenant_id = e1.tenant_id and e2.kind = 'block_mentions_entity'
                and lower(e2.target_text) = lower(e1.target_text)
               where e1.tenant_id = $3 and e1.kind = 'block_mentions_entity' and e1.source_block_id in (select id from seed)
               union all
               -- a link from the seed to another document: that document's first blocks
               select b.id, e1.source_block_id, 'markdown_links_to'
               from evidence_edge e1
               join source s on s.tenant_id = e1.tenant_id
                and lower(regexp_replace(s.resource_path, '^.*/|\.[^./]*$', '', 'g'))
                    = lower(regexp_replace(regexp_replace(e1.target_text, '#.*$', ''), '^.*/|\.[^./]*$', '', 'g'))
               join evidence_block b on b.tenant_id = s.tenant_id and b.source_id = s.id and b.ordinal < 3
               where e1.tenant_id = $3 and e1.kind = 'markdown_links_to' and e1.source_block_id in (select id from seed)
               union all
               -- a link to the seed's document from another one: the linking block
               select e1.source_block_id, sb.id, 'markdown_links_to'
               from evidence_block sb
               join source s on s.tenant_id = sb.tenant_id and s.id = sb.source_id
               join evidence_edge e1 on e1.tenant_id = s.tenant_id and e1.kind = 'markdown_links_to'
                and lower(regexp_replace(s.resource_path, '^.*/|\.[^./]*$', '', 'g'))
                    = lower(regexp_replace(regexp_replace(e1.target_text, '#.*$', ''), '^.*/|\.[^./]*$', '', 'g'))
               where sb.tenant_id = $3 and sb.id in (select id from seed) and sb.ordinal = 0
             )
             select distinct on (h.id) h.id as "id!", h.via as "via!", h.kind as "kind!" from hits h
             join evidence_block nb on nb.tenant_id = $3 and nb.id = h.id
             where h.id <> h.via and h.id not in (select id from seed)
               -- a fragment (no lexical terms: ingest::fragment) is not evidence on its own
               and nb.lex_len > 0
               -- boilerplate: the same text elsewhere in the document
               and not exists (select 1 from evidence_block d where d.tenant_id = nb.tenant_id
                               and d.source_id = nb.source_id and d.id <> nb.id and d.text = nb.text)
             order by h.id limit $2"#,
            &ids,
            GRAPH_MAX_NEIGHBOURS,
            f.tenant,
        )
        .fetch_all(&mut *conn)
        .await?;
        let mut next = Vec::new();
        for r in rows {
            let (id, via, kind) = (r.id, r.via, r.kind);
            let s = score_of.get(&via).copied().unwrap_or(0.0) * GRAPH_DECAY;
            if best.get(&id).is_none_or(|&old| s > old) {
                best.insert(id, s);
                steps.insert(id, GraphStep { hop, edge_kind: kind, from_evidence_id: via });
                next.push((id, s));
            }
        }
        frontier = next;
    }
    let mut ids: Vec<(Uuid, f64)> = best.into_iter().collect();
    ids.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Hydration drops what the filters exclude, so keep a margin.
    ids.truncate(top_k * 3);
    Ok(Ranked { ids, graph: steps })
}
