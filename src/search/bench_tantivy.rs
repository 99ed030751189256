//! The tantivy side of `mnote bench search --tantivy` (feature `bench-tantivy`): the
//! benchmark KB's blocks in an in-RAM tantivy index, as a team picking a Lucene-class engine
//! would set it up (BM25, k1 1.2, b 0.75; simple tokenizer, lower case, English stop words,
//! Snowball English stemmer), queried with the same texts, one at a time on one thread.
//!
//! Each block is one tantivy document: a heading its own text, any other block its section
//! path and then its text (the words our index counts for it), with the block's number as a
//! fast field. A query is its analysed terms OR-ed (`should`), as our lexical search does.

use std::{collections::HashSet, time::Instant};

use futures_util::TryStreamExt;
use tantivy::{
    Index, IndexWriter, TantivyDocument, Term,
    collector::TopDocs,
    query::{BooleanQuery, Occur, Query, TermQuery},
    schema::{FAST, IndexRecordOption, Schema, TextFieldIndexing, TextOptions},
    tokenizer::{Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer},
};
use uuid::Uuid;

use super::{
    bench_lexical::{Ours, QUALITY_DEPTH, doc_id, kb_blocks},
    eval,
};
use crate::db::{Scope, TenantTx};

const ANALYZER: &str = "en_stem_stop";
/// The version pinned in Cargo.toml, for the report.
const TANTIVY_VERSION: &str = "0.27.0";

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::new(Language::English).expect("tantivy ships English stop words"))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The text tantivy indexes for a block (see the module doc).
fn block_body(block_type: &str, text: &str, section_path: &[String]) -> String {
    if block_type == "heading" {
        return text.to_string();
    }
    let mut s = String::new();
    for t in section_path.iter().filter(|t| !text.starts_with(t.as_str())) {
        s.push_str(t);
        s.push('\n');
    }
    s.push_str(text);
    s
}

struct Tantivy {
    index: Index,
    reader: tantivy::IndexReader,
    body: tantivy::schema::Field,
    analyzer: TextAnalyzer,
}

impl Tantivy {
    /// The best `limit` blocks (their numbers), best first.
    fn search(&mut self, text: &str, limit: usize) -> anyhow::Result<Vec<u64>> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut stream = self.analyzer.token_stream(text);
        while stream.advance() {
            let term = Term::from_field_text(self.body, &stream.token().text);
            clauses.push((Occur::Should, Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))));
        }
        if clauses.is_empty() {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let top = searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(limit).order_by_score())?;
        let mut out = Vec::with_capacity(top.len());
        for (_, addr) in top {
            let n = searcher.segment_reader(addr.segment_ord).fast_fields().u64("n")?.first(addr.doc_id);
            out.push(n.unwrap_or(u64::MAX));
        }
        Ok(out)
    }
}

/// Index the KB's blocks in tantivy, time the same queries, score the same judgements, and
/// print tantivy's figures with ours as ratios to them.
pub(crate) async fn side_by_side(pool: &sqlx::PgPool, tenant: Uuid, kb: Uuid, ours: &Ours<'_>) -> anyhow::Result<()> {
    // The blocks, read first (the indexing time counts tantivy alone).
    let mut bodies: Vec<String> = Vec::new();
    let mut docs: Vec<String> = Vec::new();
    {
        let mut tx = TenantTx::begin(pool, tenant, Scope::System).await?;
        let mut rows = kb_blocks(&mut tx, tenant, kb);
        while let Some(r) = rows.try_next().await? {
            bodies.push(block_body(&r.block_type, &r.text, &r.path.0));
            docs.push(doc_id(&r.resource_path));
        }
        drop(rows);
        tx.commit().await?;
    }

    let mut schema = Schema::builder();
    let indexing = TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs);
    let body = schema.add_text_field("body", TextOptions::default().set_indexing_options(indexing));
    let n = schema.add_u64_field("n", FAST);
    let index = Index::create_in_ram(schema.build());
    index.tokenizers().register(ANALYZER, analyzer());
    let started = Instant::now();
    let mut writer: IndexWriter<TantivyDocument> = index.writer_with_num_threads(1, 256 << 20)?;
    for (i, text) in bodies.iter().enumerate() {
        writer.add_document(tantivy::doc!(body => text.as_str(), n => i as u64))?;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    let index_secs = started.elapsed().as_secs_f64();
    drop(bodies);
    let reader = index.reader()?;
    let mut t = Tantivy { index, reader, body, analyzer: analyzer() };
    let segments = t.index.searchable_segments()?.len();

    // Latency: the texts our in-process pass timed, one at a time, top 10 as the API's
    // default, after one warm-up pass.
    for q in ours.texts.iter().take(10) {
        t.search(q, 10)?;
    }
    let mut lat = Vec::with_capacity(ours.texts.len());
    for q in ours.texts {
        let s = Instant::now();
        std::hint::black_box(t.search(q, 10)?);
        lat.push(s.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(|x, y| x.total_cmp(y));

    // Quality: documents ranked by their best block, as ours.
    let ndcg = match ours.qrels {
        Some(qrels) => {
            let (mut sum, mut k) = (0.0, 0);
            for q in ours.queries {
                let Some(rel) = qrels.get(&q.id) else { continue };
                let mut seen = HashSet::new();
                let ranked: Vec<String> = t
                    .search(&q.text, QUALITY_DEPTH)?
                    .into_iter()
                    .filter_map(|i| docs.get(i as usize))
                    .filter(|d| seen.insert(d.as_str()))
                    .cloned()
                    .collect();
                sum += eval::score_ranking(&ranked, rel).0;
                k += 1;
            }
            (k > 0).then_some(sum / k as f64)
        }
        None => None,
    };

    let p = |v: &[f64], q| eval::percentile(v, q);
    println!(
        "tantivy {} (in RAM, 1 indexing thread, {} segment(s)): {} blocks indexed in {:.2} s (our mirror: built in {:.2} s from the database)",
        TANTIVY_VERSION,
        segments,
        docs.len(),
        index_secs,
        ours.mirror_build_secs
    );
    println!(
        "tantivy: {} queries one at a time, top 10: p50/p95 ms {:.3} / {:.3} · ours in process (SQL, quotes) {:.3} / {:.3} = {:.2}× / {:.2}× · ours ranking alone {:.3} / {:.3} = {:.2}× / {:.2}×",
        lat.len(),
        p(&lat, 50.0),
        p(&lat, 95.0),
        p(ours.totals, 50.0),
        p(ours.totals, 95.0),
        p(ours.totals, 50.0) / p(&lat, 50.0).max(1e-9),
        p(ours.totals, 95.0) / p(&lat, 95.0).max(1e-9),
        p(&ours.ranking, 50.0),
        p(&ours.ranking, 95.0),
        p(&ours.ranking, 50.0) / p(&lat, 50.0).max(1e-9),
        p(&ours.ranking, 95.0) / p(&lat, 95.0).max(1e-9),
    );
    println!("tantivy_p50_ms: {:.3}", p(&lat, 50.0));
    println!("ours_over_tantivy_p50: {:.2}", p(ours.totals, 50.0) / p(&lat, 50.0).max(1e-9));
    if let (Some(theirs), Some(mine)) = (ndcg, ours.ndcg10) {
        println!("nDCG@10 on this corpus: tantivy {theirs:.4} · ours {mine:.4} · ours − tantivy {:+.4}", mine - theirs);
        println!("tantivy_ndcg10: {theirs:.4}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tantivy_ranks_stemmed_terms_by_bm25() {
        let mut schema = Schema::builder();
        let indexing = TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs);
        let body = schema.add_text_field("body", TextOptions::default().set_indexing_options(indexing));
        let n = schema.add_u64_field("n", FAST);
        let index = Index::create_in_ram(schema.build());
        index.tokenizers().register(ANALYZER, analyzer());
        let mut w: IndexWriter<TantivyDocument> = index.writer_with_num_threads(1, 15 << 20).unwrap();
        for (i, text) in ["Borrowing scoped threads", "the weather today", "a thread borrows a thread"].iter().enumerate() {
            w.add_document(tantivy::doc!(body => *text, n => i as u64)).unwrap();
        }
        w.commit().unwrap();
        let reader = index.reader().unwrap();
        let mut t = Tantivy { index, reader, body, analyzer: analyzer() };
        assert_eq!(t.search("borrowed threads", 10).unwrap(), [2, 0], "stemmed, BM25 tf wins, no match left out");
        assert!(t.search("the", 10).unwrap().is_empty(), "stop words only: no clause");
        assert_eq!(block_body("paragraph", "text", &["Title".into()]), "Title\ntext");
        assert_eq!(block_body("heading", "Title", &["Title".into()]), "Title");
    }
}
