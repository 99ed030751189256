//! One request to the model and its streamed response: send, then read SSE chunks
//! (`eventsource-stream`) until `data: [DONE]`, streaming answer text into the journal as it
//! arrives. Every wait (the response head, each chunk, an error body) races the run's
//! cancellation and the idle timeout; dropping the response closes the connection.

use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::marker::MarkerGate;
use super::{
    accumulate::{Accumulator, Turn},
    upstream::{self, BAD_RESPONSE, STREAM_ERROR},
    wire::{ChatRequest, Chunk, Completion},
};
use crate::{
    agents::{AgentError, verdict::ModelSaid},
    journal::sink::{EventSink, JournalError},
    platform::{SecretString, http},
};

/// Largest error body or non-streamed completion read.
const MAX_BODY: usize = 4 << 20;
/// Largest error body quoted from (the rest is not read).
const MAX_ERROR_BODY: usize = 16 << 10;

/// Where and how to ask.
pub struct Endpoint<'a> {
    pub client: &'a http::Client,
    pub url: &'a reqwest::Url,
    /// `scheme://host[:port]/path` of `url`, for messages.
    pub shown: &'a str,
    pub key: Option<&'a SecretString>,
    pub idle: Duration,
    /// The longest line of the event stream (`MNOTE_AGENT_MAX_LINE_BYTES`): a longer one fails
    /// the request as `llm_bad_response` as soon as it passes the limit, however fast it comes.
    pub max_line: usize,
}

/// A byte stream's failure, or a line over the limit.
#[derive(Debug)]
enum LineError {
    Transport(reqwest::Error),
    TooLong(usize),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Transport(e) => e.fmt(f),
            LineError::TooLong(n) => write!(f, "a line longer than {n} bytes"),
        }
    }
}

/// `bytes`, failing once a line (bytes since the last CR or LF) passes `max`.
fn limit_lines<B: AsRef<[u8]>>(
    bytes: impl futures_util::Stream<Item = reqwest::Result<B>>,
    max: usize,
) -> impl futures_util::Stream<Item = Result<B, LineError>> {
    let mut line = 0usize;
    bytes.map(move |part| {
        let part = part.map_err(LineError::Transport)?;
        let b = part.as_ref();
        line = match b.iter().rposition(|b| *b == b'\n' || *b == b'\r') {
            Some(i) => b.len() - i - 1,
            None => line + b.len(),
        };
        if line > max { Err(LineError::TooLong(max)) } else { Ok(part) }
    })
}

/// The answer as streamed across rounds. A round after tool calls starts on a new paragraph
/// when earlier rounds wrote text, so the streamed text and the final answer stay the same.
/// A response's leading verdict marker (`[not-found]`, `[partial]`) is held back and left out
/// ([`MarkerGate`]).
pub struct Streamed<'a> {
    events: &'a EventSink,
    text: String,
    new_round: bool,
    gate: MarkerGate,
    said: ModelSaid,
}

impl<'a> Streamed<'a> {
    pub fn new(events: &'a EventSink) -> Self {
        Streamed { events, text: String::new(), new_round: false, gate: MarkerGate::default(), said: ModelSaid::Answer }
    }

    /// The next text belongs to a new response.
    pub async fn next_round(&mut self) -> Result<(), JournalError> {
        self.end_response().await?;
        self.new_round = true;
        Ok(())
    }

    /// The response ended: what its start held back is streamed, its marker remembered.
    pub async fn end_response(&mut self) -> Result<(), JournalError> {
        let rest = self.gate.flush();
        if self.gate.said() == ModelSaid::NotFound || self.said == ModelSaid::Answer {
            self.said = self.gate.said();
        }
        self.gate = MarkerGate::default();
        self.emit(&rest).await
    }

    /// What the model's markers said.
    pub fn said(&self) -> ModelSaid {
        self.said
    }

    async fn push(&mut self, delta: &str) -> Result<(), JournalError> {
        let passed = self.gate.pass(delta);
        self.emit(&passed).await
    }

    async fn emit(&mut self, delta: &str) -> Result<(), JournalError> {
        if delta.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.new_round) && !self.text.trim().is_empty() {
            let sep = if self.text.ends_with("\n\n") {
                ""
            } else if self.text.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            self.text.push_str(sep);
            self.events.delta(sep).await?;
        }
        self.text.push_str(delta);
        self.events.delta(delta).await
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

/// `"N s"` (one decimal below a whole second count).
pub fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{:.1} s", d.as_secs_f64()) }
}

fn idle_error(idle: Duration) -> AgentError {
    AgentError::Timeout(format!("the model sent nothing for {}", seconds(idle)))
}

/// `fut`, unless the run is cancelled or `idle` passes first.
async fn wait<T>(cancel: &CancellationToken, idle: Duration, fut: impl Future<Output = T>) -> Result<T, AgentError> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(AgentError::Cancelled),
        r = tokio::time::timeout(idle, fut) => r.map_err(|_| idle_error(idle)),
    }
}

/// Send `body` and read the whole response into a [`Turn`], streaming its text into `out`.
pub async fn complete(
    ep: &Endpoint<'_>,
    body: &ChatRequest<'_>,
    cancel: &CancellationToken,
    out: &mut Streamed<'_>,
) -> Result<Turn, AgentError> {
    let mut req = ep.client.post(ep.url.clone()).json(body);
    if let Some(k) = ep.key {
        // bearer_auth marks the header sensitive: HTTP-level debug logs hide it too.
        req = req.bearer_auth(k.expose());
    }
    let resp = wait(cancel, ep.idle, ep.client.send(req)).await?.map_err(|e| upstream::send_error(ep.shown, &e, ep.key))?;
    let status = resp.status();
    if !status.is_success() {
        let body = match read_body(resp, MAX_ERROR_BODY, cancel, ep.idle).await {
            Err(AgentError::Cancelled) => return Err(AgentError::Cancelled),
            // A body that does not come is no reason to hide the status.
            r => r.unwrap_or_default(),
        };
        return Err(AgentError::upstream(
            upstream::code_of_status(status),
            upstream::status_message(ep.shown, status, &body, ep.key),
        ));
    }
    let is_json = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    let mut acc = Accumulator::default();
    if is_json {
        // A server that ignores `stream: true` answers with the whole completion.
        let bytes = read_body(resp, MAX_BODY, cancel, ep.idle).await?;
        let full: Completion = serde_json::from_slice(&bytes).map_err(|e| bad(ep, &format!("an unreadable completion ({e})")))?;
        let step = acc.push(full.into_chunk());
        if let Some(e) = step.error {
            return Err(stream_error(ep, &e));
        }
        out.push(&step.text).await?;
        return Ok(acc.finish());
    }
    let mut events = limit_lines(resp.bytes_stream(), ep.max_line).eventsource();
    let mut done = false;
    while let Some(item) = wait(cancel, ep.idle, events.next()).await? {
        let ev = match item {
            Ok(ev) => ev,
            Err(EventStreamError::Transport(LineError::TooLong(n))) => {
                return Err(bad(ep, &format!("a line longer than {n} bytes")));
            }
            Err(EventStreamError::Transport(LineError::Transport(e))) => {
                let e = http::HttpError::transport(e);
                return Err(AgentError::upstream(
                    STREAM_ERROR,
                    upstream::clean(&format!("the stream from {} broke: {}", ep.shown, e.message), ep.key),
                ));
            }
            Err(e) => return Err(bad(ep, &format!("not an event stream ({e})"))),
        };
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            done = true;
            break;
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| bad(ep, &format!("an unreadable chunk ({e})")))?;
        let step = acc.push(chunk);
        if let Some(e) = step.error {
            return Err(stream_error(ep, &e));
        }
        out.push(&step.text).await?;
    }
    if !done && !acc.finished() {
        return Err(AgentError::upstream(
            STREAM_ERROR,
            format!("the stream from {} ended before the answer was complete", ep.shown),
        ));
    }
    Ok(acc.finish())
}

fn bad(ep: &Endpoint<'_>, what: &str) -> AgentError {
    AgentError::upstream(BAD_RESPONSE, upstream::clean(&format!("{} sent {what}", ep.shown), ep.key))
}

fn stream_error(ep: &Endpoint<'_>, message: &str) -> AgentError {
    AgentError::upstream(STREAM_ERROR, upstream::clean(&format!("the model failed mid-answer: {message}"), ep.key))
}

/// At most `limit` bytes of the body (a longer JSON completion is refused; an error body is
/// cut).
async fn read_body(
    resp: reqwest::Response,
    limit: usize,
    cancel: &CancellationToken,
    idle: Duration,
) -> Result<Vec<u8>, AgentError> {
    let mut body = Vec::new();
    let mut bytes = resp.bytes_stream();
    while let Some(part) = wait(cancel, idle, bytes.next()).await? {
        let part = part.map_err(|e| {
            AgentError::upstream(STREAM_ERROR, format!("the response broke off: {}", http::HttpError::transport(e).message))
        })?;
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(&part[..part.len().min(room)]);
        if body.len() >= limit {
            break;
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::AgentId;
    use crate::journal::{Event, EventSource};

    #[tokio::test]
    async fn a_new_round_starts_a_new_paragraph_in_both_the_stream_and_the_text() {
        let sink = EventSink::memory(EventSource::Agent(AgentId::Hermes));
        let mut s = Streamed::new(&sink);
        s.next_round().await.unwrap(); // the first round never gets a break
        s.push("Let me look.").await.unwrap();
        s.next_round().await.unwrap();
        s.push("Found it").await.unwrap();
        s.push(".").await.unwrap();
        s.end_response().await.unwrap();
        assert_eq!(s.text(), "Let me look.\n\nFound it.");
        assert_eq!(sink.streamed().await, s.text());
        let deltas: Vec<_> = sink.recorded().into_iter().map(|(_, e)| e).collect();
        assert_eq!(deltas[1], Event::MessageDelta { text: "\n\n".into() });
    }

    #[tokio::test]
    async fn a_responses_verdict_marker_is_remembered_and_never_streamed() {
        let sink = EventSink::memory(EventSource::Agent(AgentId::Hermes));
        let mut s = Streamed::new(&sink);
        s.push("Let me look.").await.unwrap();
        s.next_round().await.unwrap();
        for d in ["[not-", "found]", " The knowledge bases", " do not say."] {
            s.push(d).await.unwrap();
        }
        s.end_response().await.unwrap();
        assert_eq!(s.text(), "Let me look.\n\nThe knowledge bases do not say.");
        assert_eq!(sink.streamed().await, s.text());
        assert_eq!(s.said(), ModelSaid::NotFound);
    }

    #[test]
    fn idle_timeouts_name_their_length() {
        assert_eq!(seconds(Duration::from_secs(60)), "60 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(idle_error(Duration::from_secs(1)).code(), "agent_timeout");
    }
}
