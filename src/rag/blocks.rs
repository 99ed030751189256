//! The evidence blocks of a source version, as the reference mapping needs them (ids, texts,
//! OCR and quality flags, and the aligner's normalised stream), cached per `(source, hash)`:
//! a version's blocks never change, so a cached entry is never stale. The cache is consulted
//! only after the caller's own transaction has shown the source is visible (RLS), and the
//! cited block's locator is read in that transaction.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use uuid::Uuid;

use crate::db::TenantTx;

use super::mapping::{BlockText, Stream};

pub struct SourceBlocks {
    pub ids: Vec<Uuid>,
    pub texts: Vec<String>,
    pub is_ocr: Vec<bool>,
    pub exact: Vec<bool>,
    pub stream: Stream,
}

impl SourceBlocks {
    /// A source version without blocks.
    pub fn empty() -> Self {
        SourceBlocks { ids: Vec::new(), texts: Vec::new(), is_ocr: Vec::new(), exact: Vec::new(), stream: Stream::new(&[]) }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn texts(&self) -> Vec<BlockText<'_>> {
        self.texts.iter().zip(&self.is_ocr).map(|(t, o)| BlockText { text: t, is_ocr: *o }).collect()
    }
}

/// `(source, hash)` → (last use, blocks).
type Entries = HashMap<(Uuid, String), (u64, Arc<SourceBlocks>)>;

/// At most `capacity` source versions; the least recently used goes first.
pub struct BlockCache {
    capacity: usize,
    /// (use counter, entries)
    inner: Mutex<(u64, Entries)>,
}

impl BlockCache {
    pub fn new(capacity: usize) -> Self {
        BlockCache { capacity: capacity.max(1), inner: Mutex::new((0, HashMap::new())) }
    }

    /// The blocks of `source` at `hash`, from the cache or the database (`conn`, under the
    /// caller's RLS).
    pub async fn get(&self, tx: &mut TenantTx, source: Uuid, hash: &str) -> sqlx::Result<Arc<SourceBlocks>> {
        let tenant = tx.tenant_id();
        let key = (source, hash.to_string());
        {
            let mut g = self.inner.lock().expect("block cache");
            g.0 += 1;
            let tick = g.0;
            if let Some(e) = g.1.get_mut(&key) {
                e.0 = tick;
                return Ok(e.1.clone());
            }
        }
        let rows = sqlx::query!(
            "select id, text, is_ocr, quality from evidence_block where tenant_id = $3 and source_id = $1 and source_hash = $2 order by ordinal",
            source,
            hash,
            tenant,
        )
        .fetch_all(&mut **tx)
        .await?;
        let mut b = SourceBlocks {
            ids: Vec::with_capacity(rows.len()),
            texts: Vec::with_capacity(rows.len()),
            is_ocr: Vec::with_capacity(rows.len()),
            exact: Vec::with_capacity(rows.len()),
            stream: Stream::new(&[]),
        };
        for r in rows {
            b.ids.push(r.id);
            b.texts.push(r.text);
            b.is_ocr.push(r.is_ocr);
            b.exact.push(r.quality == "exact");
        }
        b.stream = Stream::new(&b.texts());
        let b = Arc::new(b);
        let mut g = self.inner.lock().expect("block cache");
        if g.1.len() >= self.capacity
            && let Some(oldest) = g.1.iter().min_by_key(|(_, v)| v.0).map(|(k, _)| k.clone())
        {
            g.1.remove(&oldest);
        }
        let tick = g.0;
        g.1.insert(key, (tick, b.clone()));
        Ok(b)
    }
}
