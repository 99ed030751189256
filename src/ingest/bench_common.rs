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

/// `<parser child> parse-file --kind <kind> <path>` (`mnote-parse`, or `mnote`) with the environment the pipeline's supervisor
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

/// One side of a row: a timed run over its files.
pub(super) type Side<'a> = &'a mut dyn FnMut() -> anyhow::Result<()>;

/// The three sides of a row — ours as the pipeline runs it, ours in-process, the baseline —
/// timed `rounds` times in that order, each round printed; the summed wall-clock and CPU
/// seconds of each side.
pub(super) fn time_sides(
    label: &str,
    baseline: &str,
    rounds: usize,
    mut sides: [Side<'_>; 3],
) -> anyhow::Result<[(Duration, f64); 3]> {
    let mut total = [(Duration::ZERO, 0.0); 3];
    for round in 1..=rounds {
        let mut took = [(Duration::ZERO, 0.0); 3];
        for (t, side) in took.iter_mut().zip(sides.iter_mut()) {
            let ((), d, cpu) = timed(side)?;
            *t = (d, cpu);
        }
        let [a, b, c] = took.map(|(d, _)| d.as_secs_f64());
        println!("  {label} round {round}: ours {a:.3} s (in-process {b:.3} s), {baseline} {c:.3} s");
        for (t, (d, cpu)) in total.iter_mut().zip(took) {
            t.0 += d;
            t.1 += cpu;
        }
    }
    Ok(total)
}
