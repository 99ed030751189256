//! One supervisor for child processes that may crash, hang or blow up their memory (the
//! `mnote parse-file` and `mnote render-page` children): an address-space limit
//! (`RLIMIT_AS`, set between fork and exec), a timeout, kill on drop or timeout, stdout
//! captured, a bounded tail of stderr kept, and the exit status reported. Long-lived
//! children that talk over pipes (ACP agents) start with [`Supervised::spawn_interactive`]:
//! the same limit and stderr tail, killed with their process group.
//!
//! A child that must not see the server (an ACP agent: someone else's program) is built with
//! [`Supervised::sandboxed`]: it runs under the [`shim`] (`mnote sandbox-shim`), with only
//! the environment it is given, optionally as another user, without new privileges, with
//! its file access confined by the kernel ([`confine`]: Landlock, else a mount namespace,
//! else it does not start; [`Interactive::confinement`] tells which), and the shim, a child
//! subreaper, kills everything the child started (also what left its process group with
//! `setsid`) when the child ends or the supervisor ends it (SIGTERM).
//!
//! ```ignore
//! let out = Supervised::new(cmd).memory_limit(2 << 30).timeout(Duration::from_secs(30)).run().await?;
//! ```

pub mod confine;
pub mod shim;

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    process::{ChildStdin, ChildStdout},
};

/// Bytes of stderr kept (the end of it; the beginning is dropped as the child writes more).
const STDERR_KEEP_BYTES: usize = 8 * 1024;
/// How long a sandboxed child's shim may take to kill and reap its tree after SIGTERM
/// before it is killed itself (longer than the shim's own cleanup limit).
const SHIM_GRACE: Duration = Duration::from_secs(6);

/// How [`Supervised::sandboxed`] confines a child.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The `mnote` executable, run as the shim.
    pub shim: PathBuf,
    /// The child's whole environment (nothing of the server's is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Run the child as this `(uid, gid)`, with no supplementary groups (the server must run
    /// as root); `None`: the server's user.
    pub user: Option<(u32, u32)>,
    /// What the child may open ([`confine`]); `None`: its file access is not confined (the
    /// operator opted out).
    pub fs: Option<confine::Rules>,
}

/// A child process to run under limits. Build with [`Supervised::new`], then [`run`](Self::run).
pub struct Supervised {
    cmd: tokio::process::Command,
    memory_bytes: Option<u64>,
    timeout: Option<Duration>,
    stdin: Option<Vec<u8>>,
    capture_stdout: bool,
    report: Option<Report>,
    sandboxed: bool,
}

/// Lines of stderr that start with `prefix` go to `on_line` (without the prefix) instead of
/// being kept in the tail: how a child reports progress while it runs.
struct Report {
    prefix: &'static str,
    on_line: Box<dyn Fn(&str) + Send + Sync>,
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
        Supervised { cmd, memory_bytes: None, timeout: None, stdin: None, capture_stdout: true, report: None, sandboxed: false }
    }

    /// Supervise `program args…` started in `cwd` under the sandbox shim (see the module
    /// docs). Ending it ([`Interactive::kill`], drop) asks the shim to end the whole tree.
    pub fn sandboxed(program: &str, args: &[String], cwd: &Path, sandbox: Sandbox) -> Self {
        let mut cmd = tokio::process::Command::new(&sandbox.shim);
        cmd.arg(shim::SUBCOMMAND);
        if let Some((uid, gid)) = sandbox.user {
            cmd.arg("--uid").arg(uid.to_string()).arg("--gid").arg(gid.to_string());
        }
        match &sandbox.fs {
            None => {
                cmd.arg("--no-confine");
            }
            Some(rules) => {
                for (flag, paths) in [("--read", &rules.read), ("--write", &rules.write), ("--hide", &rules.hide)] {
                    for p in paths {
                        cmd.arg(flag).arg(p);
                    }
                }
            }
        }
        cmd.arg("--").arg(program).args(args).current_dir(cwd).env_clear().envs(sandbox.env);
        Supervised { sandboxed: true, ..Supervised::new(cmd) }
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

    /// Call `on_line` with each stderr line that starts with `prefix` (the rest of the line)
    /// while the child runs; such lines are not part of the tail.
    pub fn report_lines(mut self, prefix: &'static str, on_line: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.report = Some(Report { prefix, on_line: Box::new(on_line) });
        self
    }

    /// Send the child's stdout to `/dev/null` instead of capturing it.
    pub fn discard_stdout(mut self) -> Self {
        self.capture_stdout = false;
        self
    }

    /// Start the child and wait for it (or for the timeout).
    pub async fn run(self) -> Result<Output, SuperviseError> {
        let Supervised { mut cmd, memory_bytes, timeout, stdin, capture_stdout, report, .. } = self;
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(if capture_stdout { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(mem) = memory_bytes {
            limit_address_space(&mut cmd, mem);
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
            let ((), out, err, status) = tokio::join!(feed, read_out, read_tail(&mut stderr, report.as_ref()), child.wait());
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

impl Supervised {
    /// Start a long-lived child that talks over pipes (an ACP agent): its stdin and stdout
    /// are the caller's to take, the tail of its stderr is kept in the background, the
    /// memory limit applies, and it runs in a process group of its own, which is killed with
    /// it (on [`Interactive::kill`] or drop). The one-shot [`timeout`](Self::timeout),
    /// [`stdin_bytes`](Self::stdin_bytes) and [`discard_stdout`](Self::discard_stdout) do
    /// not apply: the caller decides when the child has run long enough.
    pub fn spawn_interactive(self) -> Result<Interactive, SuperviseError> {
        let Supervised { mut cmd, memory_bytes, sandboxed, .. } = self;
        // A sandboxed child's shim is asked to end (SIGTERM) rather than killed outright: it
        // has a tree to kill first.
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(!sandboxed).process_group(0);
        if let Some(mem) = memory_bytes {
            limit_address_space(&mut cmd, mem);
        }
        let mut child = cmd.spawn().map_err(SuperviseError::Spawn)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let tail = Arc::new(Mutex::new(Vec::new()));
        // A sandboxed child's first stderr line is the shim's report.
        let (report_tx, report) = if sandboxed {
            let (tx, rx) = tokio::sync::oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let stderr_reader = child.stderr.take().map(|e| tokio::spawn(keep_tail(e, tail.clone(), report_tx)));
        Ok(Interactive { child, stdin, stdout, tail, stderr_reader, status: None, sandboxed, report })
    }
}

/// A running interactive child (see [`Supervised::spawn_interactive`]). Dropping it kills
/// the child and its process group.
pub struct Interactive {
    child: tokio::process::Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    tail: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
    /// Set once the child has been waited for (reaped): its pid may be reused after that.
    status: Option<ExitStatus>,
    /// Started with [`Supervised::sandboxed`]: the child is the shim.
    sandboxed: bool,
    /// The shim's report line (without [`confine::REPORT_PREFIX`]), once.
    report: Option<tokio::sync::oneshot::Receiver<Option<String>>>,
}

impl Interactive {
    /// The child's pid while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        if self.status.is_some() { None } else { self.child.id() }
    }

    /// How a sandboxed child is confined, as its shim reported before the program started:
    /// `None` when it reported nothing within `wait` (or nothing readable), or the child is
    /// not sandboxed. Asked once.
    pub async fn confinement(&mut self, wait: Duration) -> Option<Result<confine::Confinement, String>> {
        let line = tokio::time::timeout(wait, self.report.take()?).await.ok()?.ok()??;
        Some(line.parse())
    }

    /// The child's stdin (once).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The child's stdout (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The exit status if the child has ended or ends within `grace`; `None` while it runs.
    pub async fn exited_within(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.status {
            return Some(s);
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(s)) => {
                self.status = Some(s);
                Some(s)
            }
            _ => None,
        }
    }

    /// Kill the child's process group (the child and whatever it started) and reap the
    /// child; a sandboxed child's shim first gets [`SHIM_GRACE`] to kill its whole tree.
    /// Idempotent; returns the exit status when it could be read.
    pub async fn kill(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() && self.sandboxed {
            self.signal(libc::SIGTERM);
            if let Ok(Ok(s)) = tokio::time::timeout(SHIM_GRACE, self.child.wait()).await {
                self.status = Some(s);
            }
        }
        if self.status.is_none() {
            self.kill_group();
            let _ = self.child.start_kill();
            if let Ok(s) = self.child.wait().await {
                self.status = Some(s);
            }
        }
        self.status
    }

    /// The last `chars` characters of stderr, trimmed. Waits up to `settle` for stderr to
    /// reach its end first (after the child exited, so its last words are included).
    pub async fn stderr_tail(&mut self, chars: usize, settle: Duration) -> String {
        if let Some(reader) = &mut self.stderr_reader
            && tokio::time::timeout(settle, reader).await.is_ok()
        {
            self.stderr_reader = None;
        }
        let bytes = self.tail.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let text = String::from_utf8_lossy(&bytes);
        let tail: Vec<char> = text.chars().rev().take(chars).collect();
        tail.into_iter().rev().collect::<String>().trim().to_string()
    }

    /// Send `sig` to the child while it is not reaped.
    fn signal(&self, sig: libc::c_int) {
        if self.status.is_none()
            && let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok())
        {
            // SAFETY: kill(2) on our unreaped child; no memory is touched.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    fn kill_group(&self) {
        // Only while the child is not reaped: its pid (the group's id) cannot be reused yet.
        if self.status.is_none()
            && let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok())
        {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Interactive {
    fn drop(&mut self) {
        if self.sandboxed {
            // The shim kills the tree and ends; tokio reaps it in the background.
            self.signal(libc::SIGTERM);
        } else {
            self.kill_group();
        }
        if let Some(r) = self.stderr_reader.take() {
            r.abort();
        }
    }
}

/// Keep the last [`STDERR_KEEP_BYTES`] of `r` in `tail` as they arrive, until its end. With
/// `report`, the first line goes there instead when it is the shim's report (`None` when it
/// is not, or stderr ended first).
async fn keep_tail(
    mut r: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Vec<u8>>>,
    mut report: Option<tokio::sync::oneshot::Sender<Option<String>>>,
) {
    // Bytes read before the first line's end (with `report` only).
    let mut first = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            if let Some(tx) = report.take() {
                let _ = tx.send(None);
                tail.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&first);
            }
            return;
        }
        let mut bytes = &buf[..n];
        if report.is_some() {
            let end = bytes.iter().position(|&b| b == b'\n');
            first.extend_from_slice(&bytes[..end.map_or(bytes.len(), |e| e + 1)]);
            if end.is_none() && first.len() <= STDERR_KEEP_BYTES {
                continue;
            }
            bytes = &bytes[end.map_or(bytes.len(), |e| e + 1)..];
            let line = String::from_utf8_lossy(&first).trim_end().to_string();
            let ours = line.strip_prefix(confine::REPORT_PREFIX).map(str::to_string);
            if ours.is_none() {
                tail.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&first);
            }
            if let Some(tx) = report.take() {
                let _ = tx.send(ours);
            }
        }
        let mut kept = tail.lock().unwrap_or_else(|e| e.into_inner());
        kept.extend_from_slice(bytes);
        if kept.len() > STDERR_KEEP_BYTES {
            let excess = kept.len() - STDERR_KEEP_BYTES;
            kept.drain(..excess);
        }
    }
}

/// Set `RLIMIT_AS` of the child to `bytes`, between fork and exec.
fn limit_address_space(cmd: &mut tokio::process::Command, bytes: u64) {
    // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Read `r` to its end, keeping only the last [`STDERR_KEEP_BYTES`].
async fn read_tail(r: &mut (impl AsyncRead + Unpin), report: Option<&Report>) -> std::io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    // With a report, the current (unfinished) line waits here until its newline.
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            kept.extend_from_slice(&line);
            return Ok(trim_front(kept));
        }
        let Some(rep) = report else {
            kept.extend_from_slice(&buf[..n]);
            kept = trim_front(kept);
            continue;
        };
        for &b in &buf[..n] {
            line.push(b);
            if b != b'\n' {
                if line.len() > STDERR_KEEP_BYTES {
                    // A line this long is no report: keep it as ordinary stderr.
                    kept.append(&mut line);
                }
                continue;
            }
            match line.strip_prefix(rep.prefix.as_bytes()) {
                Some(rest) => (rep.on_line)(String::from_utf8_lossy(rest).trim_end()),
                None => kept.extend_from_slice(&line),
            }
            line.clear();
        }
        kept = trim_front(kept);
    }
}

fn trim_front(mut kept: Vec<u8>) -> Vec<u8> {
    if kept.len() > STDERR_KEEP_BYTES {
        kept.drain(..kept.len() - STDERR_KEEP_BYTES);
    }
    kept
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
    async fn report_lines_reach_the_caller_while_the_rest_stays_in_the_tail() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let script = "echo 'before' >&2; printf '@p 1 3\\n' >&2; echo 'x@p not at the start' >&2; \
                      printf '@p 3 3\\nafter' >&2";
        let out = Supervised::new(sh(script))
            .report_lines("@p ", move |l| {
                let _ = tx.send(l.to_string());
            })
            .run()
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Ok(l) = rx.try_recv() {
            got.push(l);
        }
        assert_eq!(got, ["1 3", "3 3"]);
        assert_eq!(out.stderr_tail(200), "before\nx@p not at the start\nafter");
    }

    #[tokio::test]
    async fn a_hanging_child_times_out() {
        let err = Supervised::new(sh("sleep 30")).timeout(Duration::from_millis(200)).run().await.unwrap_err();
        assert!(matches!(err, SuperviseError::Timeout(_)), "{err}");
    }

    #[tokio::test]
    async fn an_interactive_child_talks_over_pipes_and_leaves_its_status_and_stderr() {
        let mut child = Supervised::new(sh("ulimit -v; read line; echo \"got $line\"; echo oops >&2; exit 3"))
            .memory_limit(512 << 20)
            .spawn_interactive()
            .unwrap();
        let (mut stdin, stdout) = (child.take_stdin().unwrap(), child.take_stdout().unwrap());
        stdin.write_all(b"hello\n").await.unwrap();
        let mut out = String::new();
        tokio::io::BufReader::new(stdout).read_to_string(&mut out).await.unwrap();
        assert_eq!(out, format!("{}\ngot hello\n", 512 * 1024));
        let status = child.exited_within(Duration::from_secs(10)).await.expect("exited");
        assert_eq!(status.code(), Some(3));
        assert_eq!(child.stderr_tail(100, Duration::from_secs(10)).await, "oops");
        assert_eq!(child.id(), None);
    }

    #[tokio::test]
    async fn killing_an_interactive_child_kills_what_it_started() {
        let mut child = Supervised::new(sh("sleep 60 & echo $!; wait")).spawn_interactive().unwrap();
        let mut line = String::new();
        tokio::io::AsyncBufReadExt::read_line(&mut tokio::io::BufReader::new(child.take_stdout().unwrap()), &mut line)
            .await
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        assert!(child.exited_within(Duration::from_millis(50)).await.is_none(), "still running");
        let status = child.kill().await.expect("reaped");
        assert!(!status.success());
        // The grandchild is gone too (killed with the group; reaped by init).
        let mut gone = false;
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gone, "the grandchild {grandchild} survived");
    }

    #[tokio::test]
    async fn the_memory_limit_applies_and_a_missing_program_is_a_spawn_error() {
        let out = Supervised::new(sh("ulimit -v")).memory_limit(512 << 20).run().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), (512 * 1024).to_string());
        let err = Supervised::new(tokio::process::Command::new("/nonexistent/x")).run().await.unwrap_err();
        assert!(matches!(err, SuperviseError::Spawn(_)), "{err}");
    }
}
