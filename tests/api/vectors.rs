//! The vector side with both local models through the HTTP API: language routing (Chinese and
//! mixed blocks and queries → multilingual-e5-small, the rest → all-MiniLM-L6-v2, each vector
//! with its model), hybrid fusing Chinese queries again, and the similarity floors that keep
//! nonsense from turning into hits.

use std::sync::{Arc, OnceLock};

use mnote::{
    db::{Scope, TenantTx},
    search::{
        embed::{E5_SMALL, EmbedConfig, Embedder, LocalConfig, MINILM, Routing, load_local},
        vectors::{self, Space},
    },
};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

const ZH: &str = "# 并发\n\n## 作用域线程\n\n在 Rust 中，使用线程作用域可以借用栈上的数据，子线程结束前父线程不会返回。\n\n\
另一段话讲的是通道和消息传递：发送端把消息放进队列，接收端按顺序取出。\n\n北京是中国的首都，也是政治和文化中心。\n";
const EN: &str = "# Concurrency notes\n\nScoped threads let a closure borrow data from the parent stack frame.\n\n\
A paragraph about gardening tomatoes in summer.\n";
const MIXED: &str = "# Notes\n\nRRF 融合把 lexical 和 vector 两个排名合在一起。\n";

/// Both local models behind the language router (the provisioned layout, or the `MNOTE_*`
/// paths `./dev` exports), loaded once per test binary. Missing files fail loudly.
fn router() -> Arc<dyn Embedder> {
    static R: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    R.get_or_init(|| {
        let mut c = match EmbedConfig::from_lookup(|k| std::env::var(k).ok().filter(|_| k != "MNOTE_EMBEDDER")) {
            Ok(EmbedConfig::Local(c)) => c,
            _ => LocalConfig::provisioned(),
        };
        c.routing = Routing::Language;
        c.threads = 2;
        load_local(&c).unwrap_or_else(|e| panic!("{e}: run ./dev provision"))
    })
    .clone()
}

pub(crate) async fn search(c: &Client, body: Value) -> Value {
    let (st, v) = c.post_json("/api/evidence/search", body).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v
}

pub(crate) fn quotes(v: &Value) -> Vec<String> {
    v["results"].as_array().unwrap().iter().map(|r| r["quote"].as_str().unwrap().to_string()).collect()
}

/// A tenant with `files` in a granted directory, indexed into one KB, every block embedded.
pub(crate) async fn indexed(app: &TestApp, name: &str, files: &[(&str, &str)]) -> (Client, uuid::Uuid) {
    let s = app.bootstrap(name, &format!("owner@{name}.test")).await;
    let client = app.api(s.tenant_id, s.user_id).await;
    for (rel, text) in files {
        app.write_doc(&format!("{name}/{rel}"), text);
    }
    let (st, g) = client
        .post_json("/api/grants", json!({"path": app.docs_path(name), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, kb) = client.post_json("/api/kbs", json!({"name": format!("{name} kb")})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = client.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path(name)})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    assert!(app.run_embeddings().await > 0);
    assert_eq!(app.run_embeddings().await, 0, "the backlog is drained");
    (client, s.tenant_id)
}

async fn routed_app() -> TestApp {
    let e = router();
    let app = spawn_app_full(|_| {}, Some(e.clone())).await;
    // Both models' indexes, as `mnote migrate` creates them for this configuration.
    vectors::ensure_indexes(&app.owner_pool, &Space::all_of(e.as_ref())).await.unwrap();
    app
}

#[tokio::test]
async fn chinese_blocks_and_queries_go_to_e5_and_hybrid_fuses_them() {
    let app = routed_app().await;
    let (c, tenant) = indexed(&app, "route", &[("zh.md", ZH), ("en.md", EN), ("mixed.md", MIXED)]).await;

    // Every block has one vector, of the model its text routes to.
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let rows: Vec<(String, String)> = sqlx::query_as(
        "select b.text, e.model from evidence_embedding e join evidence_block b on b.id = e.block_id order by b.text",
    )
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    let blocks: i64 = sqlx::query_scalar("select count(*) from evidence_block").fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(rows.len() as i64, blocks, "one vector per block");
    for (text, model) in &rows {
        let cjk = mnote::search::embed::has_cjk(text);
        assert_eq!(model, if cjk { E5_SMALL.id } else { MINILM.id }, "{text:?}");
    }
    assert!(rows.iter().any(|(t, m)| t.contains("RRF 融合") && m == E5_SMALL.id), "mixed zh/en is embedded by e5");

    // A Chinese paraphrase (no shared word with the block) finds it on the vector side.
    let v = search(&c, json!({"query": "子线程可以使用父线程栈里的变量吗", "mode": "vector", "topK": 3})).await;
    assert!(v.get("degraded").is_none(), "{v}");
    assert!(quotes(&v)[0].contains("线程作用域"), "{v}");
    // Chinese queries search e5's vectors only: the English blocks are not candidates.
    assert!(quotes(&v).iter().all(|q| mnote::search::embed::has_cjk(q)), "{v}");

    // Hybrid fuses the Chinese query again (no more vectorWeight 0).
    let v = search(&c, json!({"query": "线程作用域", "mode": "hybrid"})).await;
    assert_eq!(v["fusion"]["vectorWeight"], 1.0, "{v}");
    assert!(v["fusion"].get("note").is_none(), "{v}");
    assert!(quotes(&v)[..2].iter().any(|q| q.contains("线程作用域")), "{v}");

    // English still goes to MiniLM: a paraphrase finds the scoped-threads paragraph.
    let v = search(&c, json!({"query": "lend stack variables to spawned workers", "mode": "vector", "topK": 3})).await;
    assert!(quotes(&v)[0].starts_with("Scoped threads"), "{v}");
    assert!(quotes(&v).iter().all(|q| !mnote::search::embed::has_cjk(q)), "{v}");
}

#[tokio::test]
async fn nonsense_gives_no_hits_in_vector_and_hybrid_modes() {
    let app = routed_app().await;
    let (c, _) = indexed(&app, "noise", &[("zh.md", ZH), ("en.md", EN)]).await;
    for query in ["xyzzyplugh", "qwzx vbnmk plokij", "龘靐齉爩麤", "喵呜叽咕哒噜"] {
        for mode in ["vector", "hybrid"] {
            let v = search(&c, json!({"query": query, "mode": mode})).await;
            assert!(v.get("degraded").is_none(), "{v}");
            assert_eq!(quotes(&v), Vec::<String>::new(), "{mode} {query:?}: {v}");
        }
    }
    // The floor drops noise, not matches: real queries still get their blocks.
    let v = search(&c, json!({"query": "北京是哪个国家的首都", "mode": "vector"})).await;
    assert!(quotes(&v)[0].contains("北京"), "{v}");
    let v = search(&c, json!({"query": "growing vegetables", "mode": "vector"})).await;
    assert!(quotes(&v)[0].contains("tomatoes"), "{v}");
}

/// A paragraph of about 400 MiniLM tokens: longer than one 256-token window.
fn long_paragraph() -> String {
    (1..=40)
        .map(|i| format!("Clause {i} of the retention policy keeps audit records for seven years."))
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn vectors_cut_before_windows_are_re_embedded_whole_and_the_rest_kept() {
    let app = routed_app().await;
    let doc = format!("# Policy\n\n{}\n\nA short paragraph about gardening tomatoes.\n", long_paragraph());
    let (_, tenant) = indexed(&app, "legacy", &[("policy.md", &doc), ("zh.md", ZH)]).await;

    // What the candle MiniLM left behind: every vector marked `legacy_cut` (as the migration
    // marks the vectors it finds), MiniLM's replaced by a recognisable stand-in for "cut".
    let fake = format!("[1{}]", ",0".repeat(383));
    let mut tx = TenantTx::begin(&app.owner_pool, tenant, Scope::System).await.unwrap();
    sqlx::query("update evidence_embedding set legacy_cut = true").execute(&mut *tx).await.unwrap();
    sqlx::query("update evidence_embedding set embedding = $1::vector where model = $2")
        .bind(&fake)
        .bind(MINILM.id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert!(app.run_embeddings().await > 0, "the backlog checks the marked vectors");
    assert_eq!(app.run_embeddings().await, 0, "and then has nothing left");

    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let rows: Vec<(String, String, bool, bool)> = sqlx::query_as(
        "select b.text, e.model, e.legacy_cut, e.embedding = $1::vector
         from evidence_embedding e join evidence_block b on b.id = e.block_id order by b.ordinal",
    )
    .bind(&fake)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let blocks = |pred: &dyn Fn(&str) -> bool| rows.iter().filter(|r| pred(&r.0)).collect::<Vec<_>>();
    assert!(rows.iter().all(|r| !r.2), "every vector is unmarked: {rows:?}");
    let long = blocks(&|t| t.starts_with("Clause 1 "));
    assert_eq!(long.len(), 1, "{rows:?}");
    assert_eq!(long[0].1, MINILM.id);
    assert!(!long[0].3, "the long block's cut vector was replaced");
    let short = blocks(&|t| t.contains("tomatoes") || t == "Policy");
    assert!(!short.is_empty());
    assert!(short.iter().all(|r| r.1 == MINILM.id && r.3), "vectors of texts within one window stay: {short:?}");
    assert!(blocks(&|t| mnote::search::embed::has_cjk(t)).iter().all(|r| r.1 == E5_SMALL.id), "e5 never cut: kept");

    // The new vector is the windowed embedding of the whole text, as a fresh ingest writes it.
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let (text, path, stored): (String, sqlx::types::Json<Vec<String>>, pgvector::Vector) = sqlx::query_as(
        "select b.text, coalesce(b.locator->'sectionPath', '[]'), e.embedding::vector(384)
         from evidence_embedding e join evidence_block b on b.id = e.block_id where b.text like 'Clause 1 %'",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let id = uuid::Uuid::nil();
    let fresh = router()
        .route("")
        .unwrap()
        .embed(&[vectors::embed_text(&(id, id, id, text, path))], mnote::search::embed::EmbedKind::Passage)
        .await
        .unwrap();
    let cos: f32 = fresh[0].iter().zip(stored.as_slice()).map(|(a, b)| a * b).sum();
    assert!(cos > 0.9999, "cos {cos}");
}
