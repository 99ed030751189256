//! `mnote.evidence.outline`: a source's section tree (headings with page/line ranges and block
//! counts), built from the `evidence_section` and `evidence_block` rows the indexer wrote. An
//! agent looks at it to pick the sections of a long document worth reading (the PageIndex
//! pattern) instead of searching blindly.

use std::collections::HashMap;

use uuid::Uuid;

use crate::db::TenantTx;

use super::open::{ToolError, source_info, source_title};
use crate::evidence::{
    KbScope, SourceStatus,
    tools::{OutlineRequest, OutlineResponse, OutlineSection},
};

pub const SCHEMA: &str = "mnote.evidence_outline_response.v1";

/// At most this many sections are returned (a generated document can have thousands).
pub const MAX_SECTIONS: usize = 400;

/// One `evidence_section` row with the blocks directly under it.
#[derive(Debug, Clone)]
pub struct SectionRow {
    pub key: String,
    pub parent: Option<String>,
    pub title: String,
    pub level: u8,
    pub path: Vec<String>,
    pub pages: Option<[u32; 2]>,
    pub lines: Option<[u32; 2]>,
    /// Blocks whose innermost section this is.
    pub own_blocks: usize,
    /// The first of them: `(ordinal, evidence id)`.
    pub own_first: Option<(i32, Uuid)>,
}

/// The outline of `req.source_id` as the caller sees it (RLS, KB visibility, grants) within
/// `scope`: [`ToolError::NotFound`] for a source that does not exist, is not readable or lies
/// outside the scope.
pub async fn outline(tx: &mut TenantTx, req: &OutlineRequest, scope: &KbScope) -> Result<OutlineResponse, ToolError> {
    let tenant = tx.tenant_id();
    let source = source_info(tx, tenant, req.source_id, scope).await?;
    let (kind, status, resource_path) = (source.kind, source.status, source.resource_path);

    // Every group has a row: its count, first ordinal and first id are never null.
    let blocks = sqlx::query!(
        r#"select section_key, count(*) as "n!", min(ordinal) as "first_ordinal!",
                (array_agg(id order by ordinal))[1] as "first_id!"
         from evidence_block where tenant_id = $2 and source_id = $1 group by section_key"#,
        req.source_id,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    let mut own: HashMap<String, (usize, (i32, Uuid))> = HashMap::new();
    let (mut total, mut unsectioned) = (0usize, 0usize);
    for r in blocks {
        let n = r.n.max(0) as usize;
        total += n;
        match r.section_key {
            Some(k) => {
                own.insert(k, (n, (r.first_ordinal, r.first_id)));
            }
            None => unsectioned += n,
        }
    }

    let rows = sqlx::query!(
        "select section_key, parent_key, title, level, path, page_start, page_end, line_start, line_end
         from evidence_section where tenant_id = $2 and source_id = $1 order by ordinal",
        req.source_id,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await?;
    let range = |a: Option<i32>, b: Option<i32>| -> Option<[u32; 2]> {
        let a = a.filter(|v| *v >= 0)? as u32;
        Some([a, b.filter(|v| *v >= 0).map(|v| v as u32).unwrap_or(a).max(a)])
    };
    let sections: Vec<SectionRow> = rows
        .into_iter()
        .map(|r| {
            let key = r.section_key;
            let (own_blocks, own_first) = own.get(&key).map(|(n, f)| (*n, Some(*f))).unwrap_or((0, None));
            SectionRow {
                parent: r.parent_key,
                title: r.title,
                level: r.level.clamp(0, u8::MAX as i16) as u8,
                path: r.path,
                pages: range(r.page_start, r.page_end),
                lines: range(r.line_start, r.line_end),
                own_blocks,
                own_first,
                key,
            }
        })
        .collect();
    let (tree, truncated) = build_tree(&sections, MAX_SECTIONS);
    Ok(OutlineResponse {
        schema: SCHEMA.into(),
        source_id: req.source_id,
        title: source_title(&resource_path),
        kind,
        stale: status == SourceStatus::Stale,
        block_count: total,
        unsectioned_block_count: unsectioned,
        sections: tree,
        truncated,
    })
}

/// Nest `rows` (in document order) by their parent keys; counts and first blocks include the
/// subsections. At most `max` sections are kept (the first ones in document order, so a kept
/// section's ancestors are kept too); a row whose parent is unknown becomes a root.
pub fn build_tree(rows: &[SectionRow], max: usize) -> (Vec<OutlineSection>, bool) {
    let kept = &rows[..rows.len().min(max)];
    let index: HashMap<&str, usize> = kept.iter().enumerate().map(|(i, r)| (r.key.as_str(), i)).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); kept.len()];
    let mut roots = Vec::new();
    for (i, r) in kept.iter().enumerate() {
        match r.parent.as_deref().and_then(|p| index.get(p)).copied().filter(|&p| p < i) {
            Some(p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    // Totals over subtrees: children come after their parent, so a reverse pass sees every
    // child before its parent. (Counts include subsections beyond the cap too.)
    let mut count: Vec<usize> = rows.iter().map(|r| r.own_blocks).collect();
    let mut first: Vec<Option<(i32, Uuid)>> = rows.iter().map(|r| r.own_first).collect();
    let all_index: HashMap<&str, usize> = rows.iter().enumerate().map(|(i, r)| (r.key.as_str(), i)).collect();
    for i in (0..rows.len()).rev() {
        if let Some(p) = rows[i].parent.as_deref().and_then(|p| all_index.get(p)).copied().filter(|&p| p < i) {
            count[p] += count[i];
            first[p] = match (first[p], first[i]) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
    fn node(
        i: usize,
        rows: &[SectionRow],
        children: &[Vec<usize>],
        count: &[usize],
        first: &[Option<(i32, Uuid)>],
    ) -> OutlineSection {
        let r = &rows[i];
        OutlineSection {
            title: r.title.clone(),
            level: r.level,
            path: r.path.clone(),
            page_range: r.pages,
            line_range: r.lines,
            block_count: count[i],
            first_evidence_id: first[i].map(|(_, id)| id),
            children: children[i].iter().map(|&c| node(c, rows, children, count, first)).collect(),
        }
    }
    let tree = roots.iter().map(|&i| node(i, rows, &children, &count, &first)).collect();
    (tree, rows.len() > kept.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, parent: Option<&str>, level: u8, lines: [u32; 2], own: usize, first: Option<i32>) -> SectionRow {
        SectionRow {
            key: key.into(),
            parent: parent.map(String::from),
            title: format!("T{key}"),
            level,
            path: vec![],
            pages: None,
            lines: Some(lines),
            own_blocks: own,
            own_first: first.map(|o| (o, Uuid::from_u128(o as u128))),
        }
    }

    #[test]
    fn sections_nest_and_sum_their_subsections() {
        let rows = vec![
            row("sec_1", None, 1, [1, 20], 1, Some(1)),
            row("sec_2", Some("sec_1"), 2, [3, 10], 2, Some(2)),
            row("sec_3", Some("sec_2"), 3, [6, 10], 3, Some(4)),
            row("sec_4", Some("sec_1"), 2, [11, 20], 0, None),
            row("sec_5", None, 1, [21, 30], 1, Some(9)),
        ];
        let (tree, truncated) = build_tree(&rows, 100);
        assert!(!truncated);
        assert_eq!(tree.len(), 2);
        assert_eq!(tree[0].block_count, 6);
        assert_eq!(tree[0].first_evidence_id, Some(Uuid::from_u128(1)));
        assert_eq!(tree[0].children.len(), 2);
        assert_eq!(tree[0].children[0].block_count, 5);
        assert_eq!(tree[0].children[0].children[0].line_range, Some([6, 10]));
        assert_eq!(tree[0].children[1].block_count, 0);
        assert_eq!(tree[0].children[1].first_evidence_id, None);
        assert_eq!(tree[1].block_count, 1);
    }

    #[test]
    fn a_capped_outline_keeps_ancestors_and_says_so_and_a_lost_parent_makes_a_root() {
        let rows = vec![
            row("sec_1", None, 1, [1, 9], 1, Some(1)),
            row("sec_2", Some("sec_1"), 2, [2, 5], 1, Some(2)),
            row("sec_3", Some("sec_1"), 2, [6, 9], 4, Some(3)),
        ];
        let (tree, truncated) = build_tree(&rows, 2);
        assert!(truncated);
        assert_eq!(tree.len(), 1);
        assert_eq!(tree[0].children.len(), 1);
        assert_eq!(tree[0].block_count, 6, "counts still cover the whole subtree");
        let orphan = vec![row("sec_7", Some("sec_99"), 2, [1, 2], 1, Some(1))];
        assert_eq!(build_tree(&orphan, 10).0.len(), 1);
    }
}
