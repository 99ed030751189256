//! A knowledge-RAG answer as LightRAG writes it (`/query/stream`), for the assistant's runs:
//! the caller's bound KBs (as [`super::query::run`]), one endpoint after the other; each
//! endpoint's references arrive first and are cited at our evidence (the post-filter and the
//! mapping of [`super::query::cite`]), then its answer in pieces, cut at the `[n]` markers,
//! which are renumbered to the kept references. LightRAG's own "no context" reply (text ending
//! in `[no-context]`, or an answer with no reference the caller may see) is never passed on:
//! the result says `no_context` and the caller words it.

use tokio::sync::mpsc::UnboundedSender;

use super::{
    ErrorView,
    client::{QueryRequest, StreamLine},
    query::{self, EndpointError, QueryInput, QueryResult, Reference, Timings},
};
use crate::{
    auth::Auth,
    error::{AppError, AppResult},
    state::AppState,
};

/// Longest `[…]` held back while it may still become a marker.
const MAX_MARKER: usize = 16;

/// What the streamed answer sends on, in order.
#[derive(Debug, Clone)]
pub enum Piece {
    /// An endpoint's references, cited (appended to the ones sent before).
    References(Vec<Reference>),
    /// A piece of the answer's text.
    Text(String),
    /// A citation marker: the index of its reference among all sent so far.
    Marker(usize),
}

/// How a streamed answer ended.
#[derive(Debug)]
pub struct Streamed {
    /// References, errors and timings as [`query::run`] has them; `answer` is the text as
    /// sent, markers as `[n]` of our numbers.
    pub result: QueryResult,
    /// No endpoint had anything to answer from (LightRAG's `[no-context]`, or no reference
    /// the caller may see): no text was sent.
    pub no_context: bool,
}

/// Cuts a streamed answer at its markers: `[n]` → its reference, `[no-context]` dropped, a
/// `[` that could still become one of those is held back until it is decided.
#[derive(Debug, Default)]
pub struct Markers {
    held: String,
    /// Provider numbers → index among all references.
    map: Vec<(String, usize)>,
    pub saw_no_context: bool,
}

impl Markers {
    pub fn new(map: Vec<(String, usize)>) -> Self {
        Markers { map, ..Default::default() }
    }

    /// The pieces `text` completes (what is still undecided stays held).
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.held.push_str(text);
        let mut out = Vec::new();
        let mut plain = String::new();
        loop {
            let Some(i) = self.held.find('[') else {
                plain.push_str(&self.held);
                self.held.clear();
                break;
            };
            plain.push_str(&self.held[..i]);
            let rest = &self.held[i + 1..];
            let close = rest.find(']');
            let inner = &rest[..close.unwrap_or(rest.len())];
            let digits = !inner.is_empty() && inner.chars().all(|c| c.is_ascii_digit());
            let no_ctx = "no-context".starts_with(inner) && !inner.is_empty();
            match close {
                None if (digits || no_ctx || inner.is_empty()) && inner.len() < MAX_MARKER => {
                    // Undecided: keep it for the next piece.
                    self.held.drain(..i);
                    break;
                }
                Some(j) if digits => {
                    if !plain.is_empty() {
                        out.push(Piece::Text(std::mem::take(&mut plain)));
                    }
                    match self.map.iter().find(|(p, _)| p == inner) {
                        Some((_, n)) => out.push(Piece::Marker(*n)),
                        // A reference the caller may not see (dropped): nothing backs it.
                        None => plain.push_str("[–]"),
                    }
                    self.held.drain(..i + 1 + j + 1);
                }
                Some(j) if inner == "no-context" => {
                    self.saw_no_context = true;
                    self.held.drain(..i + 1 + j + 1);
                }
                _ => {
                    plain.push('[');
                    self.held.drain(..i + 1);
                }
            }
        }
        if !plain.is_empty() {
            out.push(Piece::Text(plain));
        }
        out
    }

    /// Whatever is still held, as text (the stream ended).
    pub fn finish(&mut self) -> Vec<Piece> {
        let rest = std::mem::take(&mut self.held);
        if rest.is_empty() { Vec::new() } else { vec![Piece::Text(rest)] }
    }
}

/// Stream the answer to `input` into `out` (see the module docs). Endpoint failures make the
/// result `degraded` with per-endpoint errors, as in [`query::run`]; a closed `out` stops the
/// stream.
pub async fn answer(state: &AppState, auth: &Auth, input: QueryInput, out: &UnboundedSender<Piece>) -> AppResult<Streamed> {
    let started = std::time::Instant::now();
    let q = query::validate(&input.query)?;
    let mut tx = auth.tx(state).await?;
    let bindings = query::bindings_for(&mut tx, auth, &input.kb_ids).await?;
    tx.commit().await?;
    let cfg = &state.config.rag;
    let groups = query::endpoints(cfg, bindings);
    let req = QueryRequest {
        query: q.clone(),
        mode: input.mode,
        top_k: input.top_k,
        chunk_top_k: input.top_k,
        include_references: true,
        include_chunk_content: true,
    };
    let mut result = QueryResult::empty(q.clone(), input.mode);
    let mut answer = String::new();
    let mut answered = false;
    let mut provider = std::time::Duration::ZERO;
    for (b, kbs) in &groups {
        let t0 = std::time::Instant::now();
        let r = endpoint(state, auth, b, kbs, &req, &q, &mut result, &mut answer, out).await;
        provider += t0.elapsed();
        match r {
            Ok(true) => answered = true,
            Ok(false) => {}
            Err(Failed::App(e)) => return Err(e),
            Err(Failed::Rag(e)) => {
                tracing::warn!(code = e.code(), "knowledge-RAG streamed query: {e}");
                result.degraded = true;
                result.degraded_reason.get_or_insert(e.code());
                result
                    .errors
                    .push(EndpointError { kb_ids: kbs.clone(), error: ErrorView { code: e.code().into(), message: e.message } });
            }
        }
    }
    let ms = |d: std::time::Duration| (d.as_secs_f64() * 100_000.0).round() / 100.0;
    result.timings = Timings { provider_ms: ms(provider), total_ms: ms(started.elapsed()) };
    result.answer = answered.then_some(answer);
    result.no_context = !answered && result.errors.len() < groups.len();
    Ok(Streamed { no_context: result.no_context, result })
}

/// One endpoint's streamed answer: `Ok(true)` when it answered from references the caller may
/// see (its text was sent), `Ok(false)` for LightRAG's no-context reply.
#[allow(clippy::too_many_arguments)]
async fn endpoint(
    state: &AppState,
    auth: &Auth,
    b: &super::binding::Binding,
    kbs: &[uuid::Uuid],
    req: &QueryRequest,
    q: &str,
    result: &mut QueryResult,
    answer: &mut String,
    out: &UnboundedSender<Piece>,
) -> Result<bool, Failed> {
    let client = b.client(&state.config.rag).map_err(Failed::Rag)?;
    let mut stream = client.query_stream(req).await.map_err(Failed::Rag)?;
    let mut markers: Option<Markers> = None;
    // Text that came before any reference line (a reply without references): held.
    let mut early = String::new();
    let mut sent_text = false;
    let send = |p: Piece, answer: &mut String, result: &QueryResult| {
        match &p {
            Piece::Text(t) => answer.push_str(t),
            Piece::Marker(i) => answer.push_str(&format!("[{}]", result.references[*i].reference_id)),
            Piece::References(_) => {}
        }
        let _ = out.send(p);
    };
    while let Some(line) = stream.next().await {
        let StreamLine { references, response, .. } = line.map_err(Failed::Rag)?;
        if let Some(refs) = references {
            let from = result.references.len();
            let mut map = Vec::new();
            let mut tx = auth.tx(state).await.map_err(|e| Failed::App(e.into()))?;
            for r in refs {
                let chunks = r.content.unwrap_or_default();
                match query::cite(&mut tx, &state.rag_blocks, state.config.public_url.as_deref(), kbs, &r.file_path, &chunks, q)
                    .await
                    .map_err(Failed::App)?
                {
                    Some(mut c) => {
                        c.reference_id = (result.references.len() + 1).to_string();
                        map.push((r.reference_id, result.references.len()));
                        result.references.push(c);
                    }
                    None => result.dropped_references += 1,
                }
            }
            tx.commit().await.map_err(|e| Failed::App(e.into()))?;
            if result.references.len() > from {
                let _ = out.send(Piece::References(result.references[from..].to_vec()));
                let mut m = Markers::new(map);
                if !early.is_empty() {
                    for p in m.push(&std::mem::take(&mut early)) {
                        sent_text = true;
                        send(p, answer, result);
                    }
                }
                markers = Some(m);
            }
        }
        if let Some(text) = response {
            match markers.as_mut() {
                Some(m) => {
                    for p in m.push(&text) {
                        sent_text = true;
                        send(p, answer, result);
                    }
                }
                None => early.push_str(&text),
            }
        }
        if out.is_closed() {
            break;
        }
    }
    if let Some(m) = markers.as_mut() {
        for p in m.finish() {
            sent_text = true;
            send(p, answer, result);
        }
        if sent_text && !answer.ends_with("\n\n") {
            answer.push_str("\n\n");
            let _ = out.send(Piece::Text("\n\n".into()));
        }
        return Ok(sent_text);
    }
    Ok(false)
}

/// Why an endpoint's answer stopped: LightRAG (the answer goes on degraded), or our side.
enum Failed {
    Rag(super::client::RagError),
    App(AppError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(pieces: &[Piece]) -> String {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Marker(i) => format!("<{i}>"),
                Piece::References(_) => String::new(),
            })
            .collect()
    }

    #[test]
    fn markers_are_cut_across_pieces_and_no_context_is_dropped() {
        let mut m = Markers::new(vec![("1".into(), 0), ("2".into(), 1)]);
        let mut all = Vec::new();
        for piece in ["Acme is in Lyon [", "1", "] and [2][3", "] see [x] a[b]. Sorry.[no-", "context]", " end ["] {
            all.extend(m.push(piece));
        }
        all.extend(m.finish());
        assert_eq!(text(&all), "Acme is in Lyon <0> and <1>[–] see [x] a[b]. Sorry. end [");
        assert!(m.saw_no_context);
        let mut m = Markers::new(Vec::new());
        assert_eq!(text(&m.push("[12345678901234567 ok")), "[12345678901234567 ok", "too long to be a marker");
        assert_eq!(text(&m.push("[9] gone")), "[–] gone", "a reference the caller may not see");
        assert!(!m.saw_no_context);
    }
}
