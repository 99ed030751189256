//! An in-memory mirror of each KB's BM25 postings, so lexical ranking does not score every
//! matching block in SQL (at 100k blocks a whole lexical search takes ~2.5 ms in process
//! instead of 2–3 s; docs/BENCHMARKS.md). Memory: ~0.4 KB per block; a mirror unused for an
//! hour is dropped.
//!
//! The database stays the authority:
//! * a mirror is built from `evidence_block.lex` through a tenant-scoped transaction (RLS), and
//!   is keyed by its KB's `evidence_kb_stat` version (`generation`, blocks, total length); the
//!   trigger that keeps those statistics bumps `generation` in the same transaction as any
//!   block insert or delete, so a mirror is used only while it is exactly current;
//! * which KBs a query may use comes from the caller's own RLS-scoped read of those statistics,
//!   and every ranked id is re-checked (RLS, visibility, grants, filters) when it is hydrated.
//!
//! A query whose KBs have no current mirror runs the SQL ranking ([`super::query`]) and asks for
//! a build in the background; builds are single-flight per KB and spaced out (at most a third
//! of the time spent building while a KB keeps changing), so a bulk ingest never turns into a
//! rebuild loop.

use std::{
    collections::{BinaryHeap, HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures_util::TryStreamExt;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::analyze::QueryTerms;
use crate::db::{Scope, TenantTx};

/// BM25 parameters: the same as the SQL ranking's.
pub const BM25_K1: f64 = 1.2;
pub const BM25_B: f64 = 0.75;

/// The statistics row of one KB: the version a mirror must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KbVersion {
    pub tenant_id: Uuid,
    pub kb_id: Uuid,
    pub generation: i64,
    pub blocks: i64,
    pub total_len: i64,
}

/// The statistics rows of the KBs a query searches (`kb_ids` or every KB it can see), read
/// in the caller's transaction, so RLS decides which KBs appear.
pub async fn visible_versions(conn: &mut PgConnection, tenant: Uuid, kb_ids: Option<&[Uuid]>) -> sqlx::Result<Vec<KbVersion>> {
    sqlx::query_as!(
        KbVersion,
        "select tenant_id, kb_id, generation, blocks, total_len from evidence_kb_stat
         where tenant_id = $2 and ($1::uuid[] is null or kb_id = any($1::uuid[])) and blocks > 0 order by kb_id",
        kb_ids,
        tenant,
    )
    .fetch_all(conn)
    .await
}

/// A term's blocks with their BM25 term-frequency factor
/// `tf·(k1+1) / (tf + k1·(1 − b + b·len/avgdl))` (avgdl of the KB), so a query only multiplies
/// by the term's idf.
struct Postings {
    docs: Vec<u32>,
    impacts: Vec<f32>,
}

/// The KB's average block length as BM25 uses it.
pub fn avgdl(v: &KbVersion) -> f64 {
    (v.total_len as f64 / v.blocks.max(1) as f64).max(1.0)
}

fn impact(tf: u16, len: u32, avgdl: f64) -> f32 {
    let tf = tf as f64;
    (tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * ((1.0 - BM25_B) + BM25_B * len as f64 / avgdl))) as f32
}

/// One KB's postings at one version.
pub struct KbIndex {
    pub version: KbVersion,
    ids: Vec<Uuid>,
    ocr: Vec<bool>,
    sources: Vec<Uuid>,
    terms: HashMap<Box<str>, Postings>,
}

impl KbIndex {
    /// Approximate heap size, for the benchmark's report.
    pub fn heap_bytes(&self) -> usize {
        let per_doc = 16 + 1 + 16;
        let postings: usize = self.terms.iter().map(|(t, p)| t.len() + 48 + p.docs.len() * 8).sum();
        self.ids.len() * per_doc + postings
    }

    pub fn postings(&self) -> usize {
        self.terms.values().map(|p| p.docs.len()).sum()
    }

    /// How many blocks it holds (every block of the KB, removed sources' included).
    pub fn blocks(&self) -> usize {
        self.ids.len()
    }
}

/// Parse Postgres's text form of a tsvector (`'lexeme':1,4B 'other'`) into (lexeme, number of
/// positions). A lexeme without positions counts 0, as `cardinality(positions)` does in SQL.
pub fn parse_tsvector(s: &str) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    each_lexeme(s, |lexeme, tf| out.push((lexeme.to_string(), tf)));
    out
}

/// [`parse_tsvector`] without allocating: `f` gets each lexeme (borrowed from `s` unless it
/// holds an escaped quote or backslash) and its number of positions. The mirror build calls
/// this for every posting (4.9 million at 100k blocks), so it scans bytes: the quote, the
/// backslash, the colon, the comma and the space are ASCII and never part of a multi-byte
/// UTF-8 character.
pub fn each_lexeme(s: &str, mut f: impl FnMut(&str, u16)) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut unescaped = String::new();
    loop {
        while b.get(i) == Some(&b' ') {
            i += 1;
        }
        if b.get(i) != Some(&b'\'') {
            break;
        }
        i += 1;
        let start = i;
        let mut escaped = false;
        unescaped.clear();
        let mut from = start;
        let end = loop {
            match b.get(i) {
                None => break i,
                Some(b'\'') if b.get(i + 1) == Some(&b'\'') => {
                    unescaped.push_str(&s[from..i]);
                    unescaped.push('\'');
                    escaped = true;
                    i += 2;
                    from = i;
                }
                Some(b'\'') => break i,
                Some(b'\\') => {
                    unescaped.push_str(&s[from..i]);
                    escaped = true;
                    i += 1;
                    if let Some(c) = s[i..].chars().next() {
                        unescaped.push(c);
                        i += c.len_utf8();
                    }
                    from = i;
                }
                Some(_) => i += 1,
            }
        };
        if escaped {
            unescaped.push_str(&s[from..end]);
        }
        // Past the closing quote (if any).
        i = (end + 1).min(b.len());
        let mut tf = 0u16;
        if b.get(i) == Some(&b':') {
            i += 1;
            tf = 1;
            while let Some(&c) = b.get(i) {
                if c == b' ' {
                    break;
                }
                if c == b',' {
                    tf = tf.saturating_add(1);
                }
                i += 1;
            }
        }
        f(if escaped { &unescaped } else { &s[start..end] }, tf);
    }
}

/// Read one KB's blocks (removed sources' included) and build its postings. `None` when the KB changed while it was read
/// (the statistics row differs before and after): the caller tries again later.
pub async fn build(pool: &PgPool, version: KbVersion) -> anyhow::Result<Option<KbIndex>> {
    let mut tx = TenantTx::begin(pool, version.tenant_id, Scope::System).await?;
    // Every block, removed sources' too: removing or restoring a source leaves the KB's
    // statistics (so the mirror's version) as they are, and a mirror built while a source was
    // removed must still hold its blocks once it is restored. Hydration re-checks visibility.
    crate::db::include_deleted(&mut tx, true).await?;
    let before = current_version(&mut tx, version).await?;
    let Some(v) = before else { return Ok(None) };
    let avgdl = avgdl(&v);
    let n = v.blocks.max(0) as usize;
    let mut index = KbIndex {
        version: v,
        ids: Vec::with_capacity(n),
        ocr: Vec::with_capacity(n),
        sources: Vec::with_capacity(n),
        terms: HashMap::new(),
    };
    {
        // Streamed: a large KB's tsvectors are never all in memory as text at once.
        let mut rows = sqlx::query!(
            r#"select id, source_id, is_ocr, lex_len, lex::text as "lex!" from evidence_block
             where tenant_id = $2 and kb_id = $1 order by id"#,
            version.kb_id,
            version.tenant_id,
        )
        .fetch(&mut *tx);
        while let Some(r) = rows.try_next().await? {
            let doc = index.ids.len() as u32;
            index.ids.push(r.id);
            index.sources.push(r.source_id);
            index.ocr.push(r.is_ocr);
            let len = r.lex_len.max(0) as u32;
            let lex: &str = &r.lex;
            let terms = &mut index.terms;
            each_lexeme(lex, |term, tf| {
                let imp = impact(tf, len, avgdl);
                // Most lexemes are already known: look up by the borrowed text, allocate a
                // key only for a new one.
                match terms.get_mut(term) {
                    Some(p) => {
                        p.docs.push(doc);
                        p.impacts.push(imp);
                    }
                    None => {
                        terms.insert(term.into(), Postings { docs: vec![doc], impacts: vec![imp] });
                    }
                }
            });
        }
    }
    let after = current_version(&mut tx, version).await?;
    tx.commit().await?;
    if after != Some(v) {
        return Ok(None);
    }
    for p in index.terms.values_mut() {
        p.docs.shrink_to_fit();
        p.impacts.shrink_to_fit();
    }
    index.terms.shrink_to_fit();
    Ok(Some(index))
}

async fn current_version(conn: &mut PgConnection, v: KbVersion) -> sqlx::Result<Option<KbVersion>> {
    let r = sqlx::query!(
        "select generation, blocks, total_len from evidence_kb_stat where tenant_id = $2 and kb_id = $1",
        v.kb_id,
        v.tenant_id,
    )
    .fetch_optional(conn)
    .await?;
    Ok(r.map(|r| KbVersion { generation: r.generation, blocks: r.blocks, total_len: r.total_len, ..v }))
}

/// What a ranking may return.
pub struct RankFilter<'a> {
    pub include_ocr: bool,
    /// Only blocks of these sources (set when the request filters by kind or path).
    pub sources: Option<&'a HashSet<Uuid>>,
}

/// BM25 over the given KBs' mirrors, as the SQL ranking computes it: idf from the document
/// frequencies of exactly those KBs, length normalised by each block's own KB. The best
/// `limit` blocks, best first, ties by id.
pub fn rank(indexes: &[Arc<KbIndex>], t: &QueryTerms, filter: &RankFilter<'_>, limit: usize) -> Vec<(Uuid, f64)> {
    if t.terms.is_empty() || limit == 0 {
        return Vec::new();
    }
    let blocks: i64 = indexes.iter().map(|i| i.version.blocks).sum();
    let n = blocks.max(1) as f64;
    let weights: Vec<f64> = t
        .terms
        .iter()
        .zip(&t.counts)
        .map(|(term, &qtf)| {
            let df = indexes.iter().filter_map(|i| i.terms.get(term.as_str())).map(|p| p.docs.len()).sum::<usize>() as f64;
            let df = df.min(n);
            qtf as f64 * (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();

    // (score, kb, doc) min-heap of the best `limit`; ties keep the smaller id.
    let mut heap: BinaryHeap<Entry> = BinaryHeap::with_capacity(limit + 1);
    // One dense accumulator per thread and the list of its touched entries, reused: only the
    // touched entries are reset.
    thread_local! {
        static ACC: std::cell::RefCell<(Vec<f64>, Vec<u32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    ACC.with(|acc| {
        let mut guard = acc.borrow_mut();
        let (acc, touched) = &mut *guard;
        for index in indexes {
            if acc.len() < index.ids.len() {
                acc.resize(index.ids.len(), 0.0);
            }
            touched.clear();
            for (term, w) in t.terms.iter().zip(&weights) {
                let Some(p) = index.terms.get(term.as_str()) else { continue };
                for (&d, &imp) in p.docs.iter().zip(&p.impacts) {
                    let s = w * imp as f64;
                    let a = &mut acc[d as usize];
                    if *a == 0.0 {
                        touched.push(d);
                    }
                    // A block holding a term without positions scores 0 but still matches.
                    *a += s.max(f64::MIN_POSITIVE);
                }
            }
            for &d in touched.iter() {
                let d = d as usize;
                let score = std::mem::take(&mut acc[d]);
                // Most blocks score below the worst kept once the heap is full: skip them
                // before reading their id, OCR flag and source (random reads).
                if heap.len() >= limit && heap.peek().is_some_and(|worst| score < worst.score) {
                    continue;
                }
                if !filter.include_ocr && index.ocr[d] {
                    continue;
                }
                if filter.sources.is_some_and(|s| !s.contains(&index.sources[d])) {
                    continue;
                }
                let e = Entry { score, id: index.ids[d] };
                if heap.len() < limit {
                    heap.push(e);
                } else if heap.peek().is_some_and(|worst| e < *worst) {
                    heap.pop();
                    heap.push(e);
                }
            }
        }
    });
    let mut out: Vec<Entry> = heap.into_vec();
    out.sort();
    out.into_iter().map(|e| (e.id, e.score)).collect()
}

/// Ordered best first: higher score, then smaller id. The heap's top is the worst kept.
#[derive(PartialEq)]
struct Entry {
    score: f64,
    id: Uuid,
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.score.total_cmp(&self.score).then(self.id.cmp(&o.id))
    }
}

#[derive(Default)]
struct Slot {
    index: Option<Arc<KbIndex>>,
    building: bool,
    /// No new build before this (spacing while a KB keeps changing).
    next_build: Option<Instant>,
    last_used: Option<Instant>,
}

/// The mirrors of every KB searched in this process.
pub struct MemIndex {
    pool: PgPool,
    slots: Mutex<HashMap<Uuid, Slot>>,
}

/// Mirrors unused this long are dropped when another build finishes.
const IDLE_EVICT: Duration = Duration::from_secs(3600);

impl MemIndex {
    pub fn new(pool: PgPool) -> Arc<Self> {
        Arc::new(MemIndex { pool, slots: Mutex::new(HashMap::new()) })
    }

    /// The current mirrors of these KBs, when every one of them has one; otherwise `None`,
    /// after scheduling builds for those that lack one.
    pub fn snapshot(self: &Arc<Self>, versions: &[KbVersion]) -> Option<Vec<Arc<KbIndex>>> {
        let now = Instant::now();
        let mut out = Vec::with_capacity(versions.len());
        let mut to_build = Vec::new();
        {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            for v in versions {
                let slot = slots.entry(v.kb_id).or_default();
                slot.last_used = Some(now);
                match &slot.index {
                    Some(i) if i.version == *v => out.push(i.clone()),
                    _ if !slot.building && slot.next_build.is_none_or(|t| now >= t) => {
                        slot.building = true;
                        to_build.push(*v);
                    }
                    _ => {}
                }
            }
        }
        for v in to_build {
            let me = self.clone();
            tokio::spawn(async move { me.build_now(v).await });
        }
        (out.len() == versions.len()).then_some(out)
    }

    /// Build (or rebuild) the mirror of one KB now. Returns whether a current mirror exists.
    pub async fn build_now(self: &Arc<Self>, v: KbVersion) -> bool {
        let started = Instant::now();
        let built = build(&self.pool, v).await;
        let took = started.elapsed();
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots.entry(v.kb_id).or_default();
        slot.building = false;
        // Spend at most a third of the time building a KB that keeps changing.
        slot.next_build = Some(Instant::now() + took * 2);
        let ok = match built {
            Ok(Some(index)) => {
                tracing::debug!(kb = %v.kb_id, blocks = index.ids.len(), ms = took.as_millis() as u64, "lexical mirror built");
                slot.index = Some(Arc::new(index));
                slot.last_used.get_or_insert(Instant::now());
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(kb = %v.kb_id, error = %e, "lexical mirror build failed; searches use SQL ranking");
                false
            }
        };
        let now = Instant::now();
        slots.retain(|_, s| s.building || s.last_used.is_some_and(|t| now.duration_since(t) < IDLE_EVICT));
        ok
    }

    /// Build every given KB's mirror now (the benchmark and the evaluation warm up with this).
    pub async fn warm(self: &Arc<Self>, versions: &[KbVersion]) -> anyhow::Result<()> {
        for v in versions {
            let mut tries = 0;
            while !self.build_now(*v).await {
                tries += 1;
                anyhow::ensure!(tries < 5, "KB {} keeps changing; its lexical mirror could not be built", v.kb_id);
            }
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let slot = slots.entry(v.kb_id).or_default();
            slot.last_used = Some(Instant::now());
            slot.next_build = None;
        }
        Ok(())
    }

    /// The mirror of one KB, if built (for reports).
    pub fn get(&self, kb: Uuid) -> Option<Arc<KbIndex>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).get(&kb).and_then(|s| s.index.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsvector_text_is_parsed_with_position_counts() {
        let v = parse_tsvector("'10':69,176 'a''b':3 'back\\\\slash':1A,2B,7 'nopos' '线程':4");
        assert_eq!(
            v,
            vec![("10".into(), 2), ("a'b".into(), 1), ("back\\slash".into(), 3), ("nopos".into(), 0), ("线程".into(), 1)]
        );
        assert!(parse_tsvector("").is_empty());
        // Escapes at the ends of a lexeme, a multi-byte character after a backslash, weights.
        assert_eq!(
            parse_tsvector(r"'''' 'x\\' 'a\é' 'b''':2A,3D,9"),
            vec![("'".into(), 0), ("x\\".into(), 0), ("aé".into(), 0), ("b'".into(), 3)]
        );
    }

    fn index(docs: &[(&str, u32)]) -> Arc<KbIndex> {
        let mut i = KbIndex {
            version: KbVersion {
                tenant_id: Uuid::nil(),
                kb_id: Uuid::nil(),
                generation: 1,
                blocks: docs.len() as i64,
                total_len: docs.iter().map(|d| d.1 as i64).sum(),
            },
            ids: Vec::new(),
            ocr: Vec::new(),
            sources: Vec::new(),
            terms: HashMap::new(),
        };
        let avgdl = avgdl(&i.version);
        for (d, (lex, len)) in docs.iter().enumerate() {
            i.ids.push(Uuid::from_u128(d as u128 + 1));
            i.ocr.push(d == 2);
            i.sources.push(Uuid::from_u128(100 + d as u128));
            for (term, tf) in parse_tsvector(lex) {
                let p = i.terms.entry(term.into()).or_insert_with(|| Postings { docs: vec![], impacts: vec![] });
                p.docs.push(d as u32);
                p.impacts.push(impact(tf, *len, avgdl));
            }
        }
        Arc::new(i)
    }

    #[test]
    fn bm25_ranks_by_rarity_frequency_and_length() {
        let idx = index(&[
            ("'borrow':1 'stack':2", 2),
            ("'borrow':1,3 'scope':2", 3),
            ("'scope':1 'thread':2", 2),
            ("'unrelated':1", 1),
        ]);
        let t = QueryTerms { terms: vec!["scope".into(), "thread".into()], counts: vec![1, 1], cjk_ratio: 0.0 };
        let all = RankFilter { include_ocr: true, sources: None };
        let r = rank(std::slice::from_ref(&idx), &t, &all, 10);
        let ids: Vec<u128> = r.iter().map(|x| x.0.as_u128()).collect();
        assert_eq!(ids, [3, 2], "both terms beat one; non-matching blocks are not candidates");
        // BM25 by hand for block 2 ("scope", len 3): N=4, df(scope)=2, avgdl=2.
        let idf = (1.0f64 + (4.0 - 2.0 + 0.5) / (2.0 + 0.5)).ln();
        let expect = idf * 2.2 / (1.0 + 1.2 * (0.25 + 0.75 * 3.0 / 2.0));
        assert!((r[1].1 - expect).abs() < 1e-6);

        let no_ocr = RankFilter { include_ocr: false, sources: None };
        assert_eq!(rank(std::slice::from_ref(&idx), &t, &no_ocr, 10).len(), 1, "block 3 is OCR");
        let only = HashSet::from([Uuid::from_u128(101)]);
        let r = rank(std::slice::from_ref(&idx), &t, &RankFilter { include_ocr: true, sources: Some(&only) }, 10);
        assert_eq!(r.iter().map(|x| x.0.as_u128()).collect::<Vec<_>>(), [2]);
        assert_eq!(rank(&[idx], &t, &all, 1).len(), 1);
    }
}
