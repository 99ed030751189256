//! A bounded cache of query vectors in front of an [`Embedder`]: people repeat searches (the
//! search page re-runs a query on every filter change; agents retry), and a local model spends
//! more CPU on one query vector than the rest of a hybrid search together. Passages pass
//! straight through; only single-text query calls are cached.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex},
};

use futures_util::future::BoxFuture;

use super::{EmbedError, EmbedKind, Embedder};

/// Two generations of at most `CAPACITY / 2` entries each: a hit in the old generation moves
/// to the new one, and when the new one is full the old one is dropped (LRU-like, O(1)).
const CAPACITY: usize = 8192;

#[derive(Default)]
struct Generations {
    new: HashMap<String, Arc<Vec<f32>>>,
    old: HashMap<String, Arc<Vec<f32>>>,
}

impl Generations {
    fn get(&mut self, k: &str) -> Option<Arc<Vec<f32>>> {
        if let Some(v) = self.new.get(k) {
            return Some(v.clone());
        }
        let v = self.old.remove(k)?;
        self.put(k.to_string(), v.clone());
        Some(v)
    }

    fn put(&mut self, k: String, v: Arc<Vec<f32>>) {
        if self.new.len() >= CAPACITY / 2 {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(k, v);
    }
}

pub struct CachedQueries {
    inner: Arc<dyn Embedder>,
    cache: Mutex<Generations>,
}

impl CachedQueries {
    /// `inner` behind a cache; a router (several spaces) is returned as it is, since each of
    /// its models has its own cache (a query vector is only meaningful with its model).
    pub fn wrap(inner: Arc<dyn Embedder>) -> Arc<dyn Embedder> {
        if inner.spaces().len() > 1 {
            return inner;
        }
        Arc::new(CachedQueries { inner, cache: Mutex::default() })
    }
}

impl fmt::Debug for CachedQueries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedQueries").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl Embedder for CachedQueries {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn multilingual(&self) -> bool {
        self.inner.multilingual()
    }

    fn min_similarity(&self) -> Option<f64> {
        self.inner.min_similarity()
    }

    fn cross_min_similarity(&self) -> Option<f64> {
        self.inner.cross_min_similarity()
    }

    fn non_cjk_min_similarity(&self) -> Option<f64> {
        self.inner.non_cjk_min_similarity()
    }

    fn legacy_vector_is_stale(&self, text: &str) -> bool {
        self.inner.legacy_vector_is_stale(text)
    }

    fn embed<'a>(&'a self, texts: &'a [String], kind: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let [text] = texts else { return self.inner.embed(texts, kind).await };
            if kind != EmbedKind::Query {
                return self.inner.embed(texts, kind).await;
            }
            if let Some(v) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(text) {
                return Ok(vec![v.as_ref().clone()]);
            }
            let out = self.inner.embed(texts, kind).await?;
            if let [v] = out.as_slice() {
                self.cache.lock().unwrap_or_else(|e| e.into_inner()).put(text.clone(), Arc::new(v.clone()));
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);
    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn dimension(&self) -> usize {
            1
        }
        fn embed<'a>(&'a self, texts: &'a [String], _: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Box::pin(async move { Ok(texts.iter().map(|t| vec![t.len() as f32]).collect()) })
        }
    }

    #[tokio::test]
    async fn repeated_queries_are_embedded_once_and_passages_always() {
        let inner = Arc::new(Counting::default());
        let e = CachedQueries::wrap(inner.clone());
        let q = vec!["scoped threads".to_string()];
        assert_eq!(e.embed(&q, EmbedKind::Query).await.unwrap(), vec![vec![14.0]]);
        assert_eq!(e.embed(&q, EmbedKind::Query).await.unwrap(), vec![vec![14.0]]);
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        e.embed(&q, EmbedKind::Passage).await.unwrap();
        e.embed(&q, EmbedKind::Passage).await.unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 3);
        // Bounded: old entries go, recent ones stay.
        for i in 0..CAPACITY + 10 {
            e.embed(&[format!("q{i}")], EmbedKind::Query).await.unwrap();
        }
        let before = inner.0.load(Ordering::SeqCst);
        e.embed(&[format!("q{}", CAPACITY + 9)], EmbedKind::Query).await.unwrap();
        e.embed(&q, EmbedKind::Query).await.unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), before + 1, "recent hit, evicted miss");
    }
}
