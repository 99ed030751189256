//! One supervisor for child processes that may crash, hang or blow up their memory (the
//! `mnote parse-file` and `mnote render-page` children): an address-space limit
//! (`RLIMIT_AS`, set between fork and exec), a timeout, kill on drop or timeout, stdout
//! captured, a bounded tail of stderr kept, and the exit status reported.
//!
//! ```ignore
//! let out = Supervised::new(cmd).memory_limit(2 << 30).timeout(Duration::from_secs(30)).run().await?;
//! ```

use std::{process::ExitStatus, process::Stdio, time::Duration};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Bytes of stderr kept (the end of it; the beginning is dropped as the child writes more).
const STDERR_KEEP_BYTES: usize = 8 * 1024;

/// A child process to run under limits. Build with [`Supervised::new`], then [`run`](Self::run).
pub struct Supervised {
    cmd: tokio::process::Command,
    memory_bytes: Option<u64>,
    timeout: Option<Duration>,
    stdin: Option<Vec<u8>>,
    capture_stdout: bool,
}

/// What a finished child left.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    /// Everything the child wrote on stdout (empty with [`Supervised::discard_stdout`]).
    pub stdout: Vec<u8>,
    /// The last bytes of stderr (bounded); read it with [`Output::stderr_tail`].
    stderr: Vec<u8>,
}

impl Output {
    /// The last `chars` characters of stderr, trimmed.
    pub fn stderr_tail(&self, chars: usize) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let tail: Vec<char> = text.chars().rev().take(chars).collect();
        tail.into_iter().rev().collect::<String>().trim().to_string()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// The child could not be started.
    #[error("{0}")]
    Spawn(std::io::Error),
    /// Reading its output or waiting for it failed.
    #[error("{0}")]
    Io(std::io::Error),
    /// It ran longer than the timeout and was killed.
    #[error("the child took longer than {0:?}")]
    Timeout(Duration),
}

impl Supervised {
    /// Supervise `cmd` (program, arguments and environment already set). Stdin, stdout and
    /// stderr are set by the supervisor; the child is killed when the run is dropped.
    pub fn new(cmd: tokio::process::Command) -> Self {
        Supervised { cmd, memory_bytes: None, timeout: None, stdin: None, capture_stdout: true }
    }

    /// Address-space limit (`RLIMIT_AS`) of the child, in bytes.
    pub fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_bytes = Some(bytes);
        self
    }

    /// Kill the child when it runs longer than this.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Write these bytes to the child's stdin, then close it (default: stdin is `/dev/null`).
    pub fn stdin_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Send the child's stdout to `/dev/null` instead of capturing it.
    pub fn discard_stdout(mut self) -> Self {
        self.capture_stdout = false;
        self
    }

    /// Start the child and wait for it (or for the timeout).
    pub async fn run(self) -> Result<Output, SuperviseError> {
        let Supervised { mut cmd, memory_bytes, timeout, stdin, capture_stdout } = self;
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(if capture_stdout { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(mem) = memory_bytes {
            // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit { rlim_cur: mem as libc::rlim_t, rlim_max: mem as libc::rlim_t };
                    if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(SuperviseError::Spawn)?;
        let child_stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let mut stderr = child.stderr.take().expect("piped");
        let run = async {
            let feed = async {
                if let (Some(mut w), Some(bytes)) = (child_stdin, stdin.as_deref()) {
                    // A child that exits without reading its input is not an error here; its
                    // exit status tells.
                    let _ = w.write_all(bytes).await;
                }
            };
            let read_out = async {
                let mut out = Vec::new();
                if let Some(mut s) = stdout {
                    s.read_to_end(&mut out).await?;
                }
                Ok::<_, std::io::Error>(out)
            };
            let ((), out, err, status) = tokio::join!(feed, read_out, read_tail(&mut stderr), child.wait());
            let (out, err) = (out.map_err(SuperviseError::Io)?, err.map_err(SuperviseError::Io)?);
            let status = status.map_err(SuperviseError::Io)?;
            Ok::<_, SuperviseError>(Output { status, stdout: out, stderr: err })
        };
        match timeout {
            // On timeout the child is dropped with the future, and killed (kill_on_drop).
            Some(t) => tokio::time::timeout(t, run).await.map_err(|_| SuperviseError::Timeout(t))?,
            None => run.await,
        }
    }
}

/// Read `r` to its end, keeping only the last [`STDERR_KEEP_BYTES`].
async fn read_tail(r: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(kept);
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > STDERR_KEEP_BYTES {
            kept.drain(..kept.len() - STDERR_KEEP_BYTES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    #[tokio::test]
    async fn captures_stdout_status_and_the_end_of_stderr() {
        let out = Supervised::new(sh("cat; i=0; while [ $i -lt 3000 ]; do printf 'e%04d\\n' $i >&2; i=$((i+1)); done; exit 4"))
            .stdin_bytes(b"hello".to_vec())
            .timeout(Duration::from_secs(20))
            .run()
            .await
            .unwrap();
        assert_eq!(out.stdout, b"hello");
        assert_eq!(out.status.code(), Some(4));
        assert!(out.stderr.len() <= STDERR_KEEP_BYTES);
        assert!(out.stderr_tail(12).ends_with("e2999"), "{}", out.stderr_tail(12));
    }

    #[tokio::test]
    async fn a_hanging_child_times_out() {
        let err = Supervised::new(sh("sleep 30")).timeout(Duration::from_millis(200)).run().await.unwrap_err();
        assert!(matches!(err, SuperviseError::Timeout(_)), "{err}");
    }

    #[tokio::test]
    async fn the_memory_limit_applies_and_a_missing_program_is_a_spawn_error() {
        let out = Supervised::new(sh("ulimit -v")).memory_limit(512 << 20).run().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), (512 * 1024).to_string());
        let err = Supervised::new(tokio::process::Command::new("/nonexistent/x")).run().await.unwrap_err();
        assert!(matches!(err, SuperviseError::Spawn(_)), "{err}");
    }
}
