//! The sandbox shim: `mnote sandbox-shim [--uid U --gid G] [--no-confine | --read P…
//! --write P… --hide P… [--mount-namespace]] -- PROGRAM ARGS…`, the child side of
//! [`Supervised::sandboxed`](super::Supervised::sandboxed). Dispatched from `main` before any
//! runtime starts, so it is one thread and uses plain system calls (Landlock's
//! `restrict_self` confines the calling thread: here, the only one).
//!
//! 1. It becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever its program starts
//!    and orphans (double forks, `setsid` daemons) is re-parented to it, not to init;
//! 2. it confines the program's file access ([`confine`](super::confine): Landlock, else a
//!    mount namespace, else the program does not start and the shim exits with
//!    [`SANDBOX_UNAVAILABLE`]), unless `--no-confine` (the operator opted out), and says which
//!    in the first line of its stderr;
//! 3. it starts PROGRAM with the environment it was given (the supervisor's allow-list),
//!    with `PR_SET_NO_NEW_PRIVS`, and, given `--uid/--gid` (only when it runs as root), as
//!    that user with no supplementary groups; it keeps no stdin/stdout of its own;
//! 4. when PROGRAM ends, or on SIGTERM/SIGINT/SIGHUP (the supervisor ending the run), it
//!    kills every process below it with SIGKILL, again as orphans come to it, until it has
//!    no child left (bounded by [`CLEANUP_LIMIT`]);
//! 5. it ends the way PROGRAM ended: the same exit code, or the same signal.
//!
//! It is not dumpable (`PR_SET_DUMPABLE` 0): a program of the same uid can neither ptrace it
//! nor read its `/proc/<pid>/environ`.

use std::{
    ffi::OsString,
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Command, ExitCode},
    time::{Duration, Instant},
};

use super::confine::{self, Available, Confinement, Rules, SANDBOX_UNAVAILABLE};

/// The hidden subcommand (`mnote sandbox-shim`).
pub const SUBCOMMAND: &str = "sandbox-shim";
/// Exit code when the program could not be started (as a shell's "not found").
const CANNOT_START: u8 = 127;
/// How long the shim keeps killing and reaping descendants before it gives up.
const CLEANUP_LIMIT: Duration = Duration::from_secs(5);

/// `Some(exit code)` when this process was started as the shim; `None` otherwise.
pub fn dispatch() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != SUBCOMMAND {
        return None;
    }
    Some(match Invocation::parse(args.collect()) {
        Ok(inv) => run(inv),
        Err(e) => {
            eprintln!("mnote sandbox-shim: {e}");
            ExitCode::from(2)
        }
    })
}

#[derive(Debug, PartialEq)]
struct Invocation {
    user: Option<(u32, u32)>,
    /// What the program may open; `None`: not confined (`--no-confine`).
    fs: Option<Rules>,
    /// `--mount-namespace`: the fallback even where Landlock is available (how its test runs
    /// it on a kernel with Landlock; the supervisor never asks for it).
    mounts_only: bool,
    program: OsString,
    args: Vec<OsString>,
}

impl Invocation {
    fn parse(args: Vec<OsString>) -> Result<Self, String> {
        let (mut uid, mut gid) = (None, None);
        let (mut rules, mut no_confine, mut mounts_only) = (Rules::default(), false, false);
        let mut it = args.into_iter();
        loop {
            let arg = it.next().ok_or("no `--` before the program")?;
            let number = |v: Option<OsString>| -> Result<u32, String> {
                v.and_then(|v| v.to_str().and_then(|s| s.parse().ok())).ok_or_else(|| "a bad --uid/--gid".to_string())
            };
            let path = |v: Option<OsString>| -> Result<PathBuf, String> {
                v.map(PathBuf::from).filter(|p| p.is_absolute()).ok_or_else(|| format!("{arg:?} wants an absolute path"))
            };
            match arg.to_str() {
                Some("--uid") => uid = Some(number(it.next())?),
                Some("--gid") => gid = Some(number(it.next())?),
                Some("--read") => rules.read.push(path(it.next())?),
                Some("--write") => rules.write.push(path(it.next())?),
                Some("--hide") => rules.hide.push(path(it.next())?),
                Some("--no-confine") => no_confine = true,
                Some("--mount-namespace") => mounts_only = true,
                Some("--") => break,
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        let user = match (uid, gid) {
            (Some(u), Some(g)) => Some((u, g)),
            (None, None) => None,
            _ => return Err("--uid and --gid go together".into()),
        };
        let fs = match (no_confine, rules == Rules::default()) {
            (false, _) => Some(rules),
            (true, true) => None,
            (true, false) => return Err("--no-confine takes no --read/--write/--hide".into()),
        };
        let program = it.next().ok_or("no program")?;
        Ok(Invocation { user, fs, mounts_only, program, args: it.collect() })
    }
}

/// How the program is confined, decided before it starts.
enum Plan {
    Off,
    /// Enforced in the child between fork and exec (the kernel's ABI).
    Landlock(landlock::RulesetCreated, i32),
    /// This process is already in its covered mount namespace.
    Mounted,
}

/// The confinement `fs` asks for, with what this machine offers; an error when there is none.
fn prepare(fs: Option<&Rules>, mounts_only: bool) -> Result<Plan, String> {
    let Some(rules) = fs else { return Ok(Plan::Off) };
    if mounts_only {
        return confine::hide_with_mounts(&rules.hide).map(|()| Plan::Mounted);
    }
    match confine::available() {
        Available::Landlock { abi } => Ok(Plan::Landlock(confine::landlock_ruleset(rules)?, abi)),
        Available::MountNamespace => confine::hide_with_mounts(&rules.hide).map(|()| Plan::Mounted),
        Available::Nothing => Err("the kernel offers no Landlock and the server is not root (no mount namespace)".into()),
    }
}

fn run(inv: Invocation) -> ExitCode {
    // SAFETY: prctl/sigprocmask with valid arguments; this process has one thread.
    let signals = unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        // Blocked here and taken with sigwaitinfo; the program starts with none blocked.
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let plan = match prepare(inv.fs.as_ref(), inv.mounts_only) {
        Ok(plan) => plan,
        Err(why) => return unavailable(why),
    };
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args);
    if let Some((uid, gid)) = inv.user {
        // std drops the supplementary groups (setgroups(0)) before setuid when run as root.
        cmd.uid(uid).gid(gid);
    }
    // SAFETY: only async-signal-safe calls (sigprocmask, prctl) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match plan {
        Plan::Off => confine::report(&Confinement::Off),
        Plan::Mounted => confine::report(&Confinement::MountNamespace),
        Plan::Landlock(ruleset, abi) => {
            // After the std's setuid and the closure above (no_new_privs); the child reports.
            let mut ruleset = Some(ruleset);
            // SAFETY: this process has one thread, so the child may allocate; restrict_self
            // is a system call on the ruleset's descriptor.
            unsafe {
                cmd.pre_exec(move || ruleset.take().map_or(Ok(()), |r| confine::enforce(r, abi)));
            }
        }
    }
    let program = match cmd.spawn() {
        Ok(child) => child.id() as libc::pid_t,
        Err(e) if e.raw_os_error() == Some(confine::NOT_CONFINED_ERRNO) => {
            eprintln!("mnote sandbox-shim: {} was not started: it could not be confined", inv.program.to_string_lossy());
            return ExitCode::from(SANDBOX_UNAVAILABLE);
        }
        Err(e) => {
            eprintln!("mnote sandbox-shim: cannot start {}: {e}", inv.program.to_string_lossy());
            return ExitCode::from(CANNOT_START);
        }
    };
    release_stdio();
    let mut status = None;
    // Until the program ends or we are told to end it.
    while status.is_none() {
        // SAFETY: `signals` is an initialised set; no info is requested.
        let sig = unsafe { libc::sigwaitinfo(&signals, std::ptr::null_mut()) };
        match sig {
            libc::SIGCHLD => {
                reap(program, &mut status);
            }
            libc::SIGTERM | libc::SIGINT | libc::SIGHUP => break,
            _ => {} // EINTR
        }
    }
    kill_descendants(program, &mut status);
    end_like(status)
}

/// No confinement: say so (the first stderr line) and do not start the program.
fn unavailable(why: String) -> ExitCode {
    confine::report(&Confinement::Unavailable(why.clone()));
    eprintln!("mnote sandbox-shim: the program was not started: {why}");
    ExitCode::from(SANDBOX_UNAVAILABLE)
}

/// Stdin and stdout become `/dev/null`: the supervisor's pipes then close when the program
/// (and what it started) closes them. Stderr stays, for the shim's own messages.
fn release_stdio() {
    // SAFETY: open/dup2/close on descriptors this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// Reap every ended child; keep the program's wait status when it is among them.
fn reap(program: libc::pid_t, status: &mut Option<libc::c_int>) -> bool {
    loop {
        let mut st = 0;
        // SAFETY: waitpid with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if pid == program {
            *status = Some(st);
        }
        if pid == 0 {
            return false; // children left, none ended
        }
        if pid < 0 {
            return true; // ECHILD: none left
        }
    }
}

/// SIGKILL every process below this one until none is left (or [`CLEANUP_LIMIT`]).
fn kill_descendants(program: libc::pid_t, status: &mut Option<libc::c_int>) {
    let me = std::process::id() as libc::pid_t;
    let until = Instant::now() + CLEANUP_LIMIT;
    loop {
        for pid in children_of(me) {
            // SAFETY: kill(2) on our own child (not yet reaped, so the pid is its).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if reap(program, status) || Instant::now() > until {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The pids whose parent is `parent` (from `/proc/<pid>/stat`).
fn children_of(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse::<libc::pid_t>().ok())
                == Some(parent)
        })
        .collect()
}

/// Exit as the program did: its exit code, or its signal raised on ourselves.
fn end_like(status: Option<libc::c_int>) -> ExitCode {
    let Some(st) = status else { return ExitCode::from(CANNOT_START) };
    if libc::WIFEXITED(st) {
        return ExitCode::from(libc::WEXITSTATUS(st) as u8);
    }
    let sig = if libc::WIFSIGNALED(st) { libc::WTERMSIG(st) } else { libc::SIGKILL };
    // SAFETY: reset the signal to its default action, unblock it, raise it.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    ExitCode::from(128 + sig as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_invocation_names_the_user_and_the_program() {
        let inv = Invocation::parse(args(&["--uid", "65534", "--gid", "65534", "--", "python3", "a.py", "--x"])).unwrap();
        assert_eq!(inv.user, Some((65534, 65534)));
        assert_eq!((inv.program.to_str(), inv.args), (Some("python3"), args(&["a.py", "--x"])));
        assert_eq!(inv.fs, Some(Rules::default()), "confined unless told otherwise");
        let inv = Invocation::parse(args(&["--no-confine", "--", "agent"])).unwrap();
        assert_eq!((inv.user, inv.fs, inv.args.len()), (None, None, 0));
        let inv = Invocation::parse(args(&["--read", "/usr", "--write", "/tmp/run", "--hide", "/data", "--", "a"])).unwrap();
        let rules = Rules { read: vec!["/usr".into()], write: vec!["/tmp/run".into()], hide: vec!["/data".into()] };
        assert_eq!(inv.fs, Some(rules));
        assert!(Invocation::parse(args(&["--no-confine", "--read", "/usr", "--", "a"])).is_err());
        assert!(Invocation::parse(args(&["--read", "usr", "--", "a"])).is_err(), "relative");
        assert!(Invocation::parse(args(&["--hide", "/data", "--mount-namespace", "--", "a"])).unwrap().mounts_only);
        assert!(Invocation::parse(args(&["--uid", "1", "--", "a"])).is_err());
        assert!(Invocation::parse(args(&["agent"])).is_err());
        assert!(Invocation::parse(args(&["--"])).is_err());
    }
}
