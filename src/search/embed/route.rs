//! Language routing (`MNOTE_EMBED_ROUTING=language`; the default is e5 for everything, one
//! space): text with Chinese, Japanese or Korean letters goes to the multilingual model, the
//! rest to the English one. Each vector keeps its model, and a query searches the
//! vectors of the model its own text routes to, so the two spaces are never compared.
//!
//! The rule is the same for blocks and queries: any CJK letter (Han, kana, Hangul) routes to
//! the multilingual model, so mixed Chinese/English text is embedded by e5. A consequence,
//! inherent to two spaces: an English query does not reach Chinese blocks on the vector side
//! (and the reverse); lexical search and the fusion still do.

use std::{fmt, sync::Arc};

use futures_util::future::BoxFuture;

use super::{CachedQueries, EmbedError, EmbedKind, Embedder};

/// Whether `text` has a Chinese, Japanese or Korean letter (CJK punctuation does not count).
pub fn has_cjk(text: &str) -> bool {
    text.chars().any(|c| {
        matches!(c as u32,
            0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F // Han
            | 0x3040..=0x30FF | 0x31F0..=0x31FF // kana
            | 0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF) // Hangul
    })
}

/// Routes each text to one of two models by [`has_cjk`]. Both keep their own query cache.
pub struct LanguageRouter {
    english: Arc<dyn Embedder>,
    cjk: Arc<dyn Embedder>,
    id: String,
}

impl LanguageRouter {
    pub fn new(english: Arc<dyn Embedder>, cjk: Arc<dyn Embedder>) -> Self {
        let id = format!("route(en={}, cjk={})", english.model_id(), cjk.model_id());
        LanguageRouter { english: CachedQueries::wrap(english), cjk: CachedQueries::wrap(cjk), id }
    }

    fn pick(&self, text: &str) -> &Arc<dyn Embedder> {
        if has_cjk(text) { &self.cjk } else { &self.english }
    }
}

impl Embedder for LanguageRouter {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.english.dimension()
    }

    fn multilingual(&self) -> bool {
        true
    }

    fn legacy_vector_is_stale(&self, text: &str) -> bool {
        self.pick(text).legacy_vector_is_stale(text)
    }

    fn route(&self, text: &str) -> Option<Arc<dyn Embedder>> {
        Some(Arc::clone(self.pick(text)))
    }

    fn spaces(&self) -> Vec<(String, usize)> {
        let mut s = self.english.spaces();
        s.extend(self.cjk.spaces());
        s
    }

    fn embed<'a>(&'a self, texts: &'a [String], kind: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let Some(first) = texts.first() else { return Ok(Vec::new()) };
            let model = self.pick(first);
            if texts.iter().any(|t| !Arc::ptr_eq(self.pick(t), model)) {
                return Err(EmbedError::failed("texts of two languages in one call: route each text to its model first"));
            }
            model.embed(texts, kind).await
        })
    }
}

impl fmt::Debug for LanguageRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanguageRouter").field("english", &self.english).field("cjk", &self.cjk).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_letters_route_punctuation_and_other_scripts_do_not() {
        for t in ["线程作用域", "RRF融合", "日本語", "ひらがな", "カタカナ", "한국어", "Tokyo (東京)", "𠀀"]
        {
            assert!(has_cjk(t), "{t}");
        }
        for t in ["", "thread scope", "。，！「」", "ＡＢＣ１２３", "ภาษาไทย", "русский", "α-helix β-sheet", "😀"]
        {
            assert!(!has_cjk(t), "{t}");
        }
    }
}
