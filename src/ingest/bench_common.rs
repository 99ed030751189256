//! What the rows of `mnote bench ingest` share ([`super::bench`], [`super::bench_sheet`],
//! [`super::bench_web`]): a result row, CPU and wall-clock timing, the parser child as the
//! pipeline runs it, a quiet command and a temporary directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// One row of the result table.
pub(super) struct Row {
    pub(super) name: &'static str,
    pub(super) unit: &'static str,
    pub(super) items: f64,
    pub(super) secs: f64,
    /// CPU seconds (user + system) of this process and its children.
    pub(super) cpu: f64,
}

impl Row {
    pub(super) fn rate(&self) -> f64 {
        if self.secs > 0.0 { self.items / self.secs } else { 0.0 }
    }
}

/// User + system CPU seconds used so far by this process and by its waited-for children.
pub(super) fn cpu_now() -> f64 {
    let get = |who| {
        // SAFETY: getrusage only writes the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return 0.0;
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        secs(u.ru_utime) + secs(u.ru_stime)
    };
    get(libc::RUSAGE_SELF) + get(libc::RUSAGE_CHILDREN)
}

/// Wall-clock and CPU time of `f`.
pub(super) fn timed<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(T, Duration, f64)> {
    let (cpu, t) = (cpu_now(), Instant::now());
    let out = f()?;
    Ok((out, t.elapsed(), cpu_now() - cpu))
}

/// `mnote parse-file --kind <kind> <path>` with the environment the pipeline's supervisor
/// gives its parser children (`worker::parse_supervised`), output to /dev/null.
pub(super) fn parse_file_child(exe: &Path, kind: &str, path: &Path) -> anyhow::Result<()> {
    let mut cmd = Command::new(exe);
    cmd.args(["parse-file", "--kind", kind]).arg(path).env("OMP_THREAD_LIMIT", "1").env("RUST_LOG", "error");
    if kind == "pdf" {
        cmd.envs(super::pdf::child_env());
    }
    let what = format!("{cmd:?}");
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

pub(super) fn run_quiet(cmd: &mut Command) -> anyhow::Result<()> {
    let what = format!("{cmd:?}");
    let out = cmd.stdin(Stdio::null()).output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!("{what} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Temp directory removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
