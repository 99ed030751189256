//! The agent's stdio as newline-delimited JSON-RPC lines for the ACP crate's `Lines`
//! transport. We read the lines ourselves (rather than the crate's `ByteStreams`) for three
//! reasons: every line is agent activity (the idle timeout), a line is bounded
//! (`MNOTE_ACP_MAX_LINE_BYTES`, default 8 MiB: an agent cannot make us buffer
//! without end; a longer line ends the run as `acp_line_too_long` as soon as the cap is
//! read), and anything on stdout that is not JSON is a protocol violation we report
//! (`acp_protocol_error`) instead of skipping.

use std::{
    io,
    sync::{Arc, Mutex},
    time::Instant,
};

use futures_util::{Sink, Stream};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader},
    sync::mpsc::UnboundedSender,
};

/// How the agent broke the transport.
#[derive(Debug)]
pub enum Violation {
    /// A line longer than the cap (`acp_line_too_long`).
    LineTooLong(String),
    /// Not UTF-8, not JSON (`acp_protocol_error`).
    Protocol(String),
}

/// When the agent last wrote something (or we last answered it: while it waits for one of
/// our tool calls it is not idle).
#[derive(Clone)]
pub struct Activity(Arc<Mutex<Instant>>);

impl Activity {
    pub fn new() -> Self {
        Activity(Arc::new(Mutex::new(Instant::now())))
    }

    pub fn touch(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    pub fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct Reader<R> {
    reader: BufReader<R>,
    activity: Activity,
    violations: UnboundedSender<Violation>,
    max_line: usize,
}

/// The agent's messages, one JSON text per item. A violation (a line that is not JSON, not
/// UTF-8 or longer than `max_line` bytes) is sent to `violations` and ends the stream, as end
/// of file does.
pub fn incoming<R>(
    stdout: R,
    activity: Activity,
    violations: UnboundedSender<Violation>,
    max_line: usize,
) -> impl Stream<Item = io::Result<String>> + Send + 'static
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let state = Reader { reader: BufReader::new(stdout), activity, violations, max_line };
    futures_util::stream::unfold(Some(state), |state| async move {
        let mut st = state?;
        loop {
            let mut buf = Vec::new();
            match (&mut st.reader).take(st.max_line as u64 + 1).read_until(b'\n', &mut buf).await {
                Err(e) => return Some((Err(e), None)),
                Ok(0) => return None,
                Ok(_) => {}
            }
            st.activity.touch();
            match check_line(buf, st.max_line) {
                Ok(None) => continue,
                Ok(Some(line)) => return Some((Ok(line), Some(st))),
                Err(v) => {
                    let _ = st.violations.send(v);
                    return None;
                }
            }
        }
    })
}

/// One raw line → its JSON text (`None`: blank), or why it breaks the protocol.
fn check_line(buf: Vec<u8>, max_line: usize) -> Result<Option<String>, Violation> {
    if buf.len() > max_line {
        return Err(Violation::LineTooLong(format!("the agent wrote a line longer than {}", size(max_line))));
    }
    let line = String::from_utf8(buf).map_err(|_| Violation::Protocol("the agent wrote a line that is not UTF-8".to_string()))?;
    let text = line.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        let shown: String = text.chars().take(120).collect();
        return Err(Violation::Protocol(format!("the agent wrote something other than JSON-RPC on its stdout: {shown:?}")));
    }
    Ok(Some(text.to_string()))
}

/// `8 MiB`, `1 KiB`, `100 bytes`.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Our messages to the agent, one line each.
pub fn outgoing<W>(stdin: W) -> impl Sink<String, Error = io::Error> + Send + 'static
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    futures_util::sink::unfold(stdin, |mut w, line: String| async move {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        w.write_all(&bytes).await?;
        w.flush().await?;
        Ok::<_, io::Error>(w)
    })
}

#[cfg(test)]
mod tests {
    use futures_util::{SinkExt, StreamExt};

    use crate::config::DEFAULT_ACP_MAX_LINE_BYTES as MAX_LINE_BYTES;

    use super::*;

    #[tokio::test]
    async fn lines_are_json_texts_and_blank_lines_are_skipped() {
        let input: &[u8] = b"{\"a\":1}\r\n\n  \n[2]\n{\"tail\":true}";
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let got: Vec<String> = incoming(input, Activity::new(), tx, MAX_LINE_BYTES).map(|l| l.unwrap()).collect().await;
        assert_eq!(got, vec!["{\"a\":1}", "[2]", "{\"tail\":true}"]);
        assert!(rx.try_recv().is_err(), "no violation");
    }

    #[tokio::test]
    async fn a_line_that_is_not_json_ends_the_stream_with_a_violation() {
        let input: &[u8] = b"{\"a\":1}\nStarting agent v2...\n{\"b\":2}\n";
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let got: Vec<String> = incoming(input, Activity::new(), tx, MAX_LINE_BYTES).map(|l| l.unwrap()).collect().await;
        assert_eq!(got, vec!["{\"a\":1}"]);
        assert!(matches!(rx.try_recv().unwrap(), Violation::Protocol(m) if m.contains("Starting agent")));
    }

    #[tokio::test]
    async fn an_overlong_line_is_a_violation_not_a_buffer() {
        let mut input = vec![b'"'; MAX_LINE_BYTES + 10];
        input.push(b'\n');
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let got: Vec<io::Result<String>> =
            incoming(std::io::Cursor::new(input), Activity::new(), tx, MAX_LINE_BYTES).collect().await;
        assert!(got.is_empty());
        assert!(matches!(rx.try_recv().unwrap(), Violation::LineTooLong(m) if m.ends_with("longer than 8 MiB")));
    }

    #[tokio::test]
    async fn the_line_cap_is_configurable_and_stops_reading_at_it() {
        // A line of 4 KiB + 1 under a 4 KiB cap, with no end in sight: read up to the cap only.
        let (w, r) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            let mut w = w;
            let _ = w.write_all(b"{\"ok\":1}\n").await;
            loop {
                if w.write_all(&[b'a'; 64]).await.is_err() {
                    return;
                }
            }
        });
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let got: Vec<String> = incoming(r, Activity::new(), tx, 4096).map(|l| l.unwrap()).collect().await;
        assert_eq!(got, vec!["{\"ok\":1}"]);
        assert!(matches!(rx.try_recv().unwrap(), Violation::LineTooLong(m) if m.ends_with("longer than 4 KiB")));
        writer.abort();
    }

    #[tokio::test]
    async fn every_line_counts_as_activity() {
        let activity = Activity::new();
        let before = activity.last();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let _: Vec<_> = incoming(&b"{}\n"[..], activity.clone(), tx, MAX_LINE_BYTES).collect().await;
        assert!(activity.last() > before);
    }

    #[tokio::test]
    async fn outgoing_messages_end_with_a_newline() {
        let (w, mut r) = tokio::io::duplex(1024);
        let mut sink = Box::pin(outgoing(w));
        sink.send("{\"x\":1}".to_string()).await.unwrap();
        sink.send("{}".to_string()).await.unwrap();
        drop(sink);
        let mut out = String::new();
        r.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "{\"x\":1}\n{}\n");
    }
}
