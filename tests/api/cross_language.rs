//! One vector space across languages (the default configuration: multilingual-e5-small for
//! every block and query): an English question finds a Chinese passage and a Chinese question
//! an English one, in vector and in hybrid mode, where lexical search cannot match across the
//! languages and same-language keyword matches must not bury the semantic hit.

use std::sync::{Arc, OnceLock};

use mnote::search::{
    embed::{E5_SMALL, EmbedConfig, Embedder, LocalConfig, Routing, has_cjk, load_local},
    vectors::{self, Space},
};
use serde_json::json;

use crate::{
    helpers::*,
    vectors::{indexed, quotes, search},
};

/// The default local configuration (e5 for everything), loaded once per test binary.
fn one_space() -> Arc<dyn Embedder> {
    static E: OnceLock<Arc<dyn Embedder>> = OnceLock::new();
    E.get_or_init(|| {
        let mut c = match EmbedConfig::from_lookup(|k| std::env::var(k).ok().filter(|_| k != "MNOTE_EMBEDDER")) {
            Ok(EmbedConfig::Local(c)) => c,
            _ => LocalConfig::provisioned(),
        };
        c.routing = Routing::E5;
        c.threads = 2;
        load_local(&c).unwrap_or_else(|e| panic!("{e}: run ./dev provision"))
    })
    .clone()
}

/// Chinese passages: the one the English question asks about and one about something else.
const ZH: &str = "# 城市\n\n北京是中华人民共和国的首都，也是全国的政治和文化中心。\n\n\
上海的港口每年处理大量集装箱货物。\n";
/// English passages: the one the Chinese question asks about, and keyword noise for the
/// English question (it shares "capital" and "China" with it but answers nothing).
const EN: &str = "# Notes\n\nScoped threads let a closure borrow data from the parent thread's stack frame.\n\n\
Capital letters in China tables: write the capital form of each letter in the table.\n\n\
A paragraph about gardening tomatoes in summer.\n";

#[tokio::test]
async fn questions_find_passages_in_the_other_language_in_vector_and_hybrid_modes() {
    let e = one_space();
    assert_eq!(e.model_id(), E5_SMALL.id, "one model, one space");
    let app = spawn_app_full(|_| {}, Some(e.clone())).await;
    vectors::ensure_indexes(&app.owner_pool, &Space::all_of(e.as_ref())).await.unwrap();
    let (c, _) = indexed(&app, "xling", &[("zh.md", ZH), ("en.md", EN)]).await;

    // English → Chinese: no word in common with the passage, so only the vector side sees it.
    for mode in ["vector", "hybrid"] {
        let v = search(&c, json!({"query": "What is the capital city of China?", "mode": mode, "topK": 5})).await;
        assert!(v.get("degraded").is_none(), "{v}");
        let q = quotes(&v);
        assert!(q[0].contains("北京"), "{mode}: the Chinese answer first, above English keyword noise: {v}");
    }
    // Chinese → English.
    for mode in ["vector", "hybrid"] {
        let v = search(&c, json!({"query": "子线程可以借用父线程栈上的数据吗？", "mode": mode, "topK": 5})).await;
        assert!(v.get("degraded").is_none(), "{v}");
        let q = quotes(&v);
        assert!(q[0].starts_with("Scoped threads"), "{mode}: the English answer first: {v}");
        assert!(!has_cjk(&q[0]));
    }
}
