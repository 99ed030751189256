//! What a sandboxed child may open, enforced by the kernel (the shim's side of
//! [`Sandbox::fs`](super::Sandbox)):
//!
//! - **Landlock** (any ABI; the rights of [`TARGET_ABI`] best effort): the child may read and
//!   execute beneath the `read` paths, do anything beneath the `write` paths, and open nothing
//!   else, `/proc` included (so not `/proc/<server pid>/…`). A `hide` path is never granted:
//!   a `read` or `write` path that contains one is granted entry by entry around it (Landlock
//!   has no deny rule). The ruleset is built by the shim and enforced in the child between
//!   fork and exec, after `setuid` and with `PR_SET_NO_NEW_PRIVS`.
//! - **No Landlock, shim running as root:** a private mount namespace in which every `hide`
//!   path is covered (an empty read-only tmpfs over a directory, `/dev/null` over a file).
//!   Weaker: everything else stays as file permissions make it, `/proc` included.
//! - **Neither:** the program is not started; the shim reports `unavailable` and exits with
//!   [`SANDBOX_UNAVAILABLE`].
//!
//! The shim tells the supervisor which one applied in the first line of its stderr, written
//! before the program runs (so the program cannot write before it): [`REPORT_PREFIX`] and a
//! [`Confinement`].

use std::{
    ffi::CString,
    fmt,
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    str::FromStr,
};

use landlock::{
    ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
};

/// The first stderr line of a sandboxed child starts with this; a [`Confinement`] follows.
pub const REPORT_PREFIX: &str = "mnote-sandbox: ";
/// The shim's exit code when no confinement could be applied (the program never ran).
pub const SANDBOX_UNAVAILABLE: u8 = 125;
/// The file-system rights asked for: every right up to ABI 5 (`IoctlDev`). ABI 9's
/// `ResolveUnix` (connecting to pathname UNIX sockets) is network, which stays open; ABIs 6–8
/// add no file-system right. An older kernel enforces what it knows (`partial`).
const TARGET_ABI: ABI = ABI::V5;

/// Which confinement a sandboxed child got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Landlock with the kernel's `abi`; `full`: every right of [`TARGET_ABI`] is enforced
    /// (else the older kernel's subset, reading and executing always among them).
    Landlock { abi: i32, full: bool },
    /// A private mount namespace with the `hide` paths covered (no Landlock here).
    MountNamespace,
    /// None: the operator opted out.
    Off,
    /// None was possible: the program was not started.
    Unavailable(String),
}

impl fmt::Display for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Confinement::Landlock { abi, full } => write!(f, "landlock abi={abi} {}", if *full { "full" } else { "partial" }),
            Confinement::MountNamespace => f.write_str("mount_namespace"),
            Confinement::Off => f.write_str("off"),
            Confinement::Unavailable(why) => write!(f, "unavailable {}", why.replace('\n', " ")),
        }
    }
}

impl FromStr for Confinement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (word, rest) = s.split_once(' ').unwrap_or((s, ""));
        match (word, rest) {
            ("mount_namespace", "") => Ok(Confinement::MountNamespace),
            ("off", "") => Ok(Confinement::Off),
            ("unavailable", why) => Ok(Confinement::Unavailable(why.to_string())),
            ("landlock", rest) => {
                let (abi, level) = rest.split_once(' ').ok_or_else(|| format!("not a confinement: {s:?}"))?;
                let abi = abi.strip_prefix("abi=").and_then(|a| a.parse().ok()).ok_or_else(|| format!("not an ABI: {s:?}"))?;
                match level {
                    "full" => Ok(Confinement::Landlock { abi, full: true }),
                    "partial" => Ok(Confinement::Landlock { abi, full: false }),
                    _ => Err(format!("not a confinement: {s:?}")),
                }
            }
            _ => Err(format!("not a confinement: {s:?}")),
        }
    }
}

/// What this machine offers a sandboxed child, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Available {
    Landlock { abi: i32 },
    MountNamespace,
    Nothing,
}

/// What this machine offers now: Landlock when the kernel has it enabled, else a mount
/// namespace when this process is root, else nothing.
pub fn available() -> Available {
    match landlock_abi() {
        Some(abi) => Available::Landlock { abi },
        // SAFETY: geteuid has no preconditions.
        None if unsafe { libc::geteuid() } == 0 => Available::MountNamespace,
        None => Available::Nothing,
    }
}

/// The kernel's Landlock ABI version; `None` when it has no Landlock or it is disabled.
pub fn landlock_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number (or -1).
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (v >= 1).then_some(v as i32)
}

/// The paths a confined child may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Read and execute beneath these.
    pub read: Vec<PathBuf>,
    /// Everything beneath these.
    pub write: Vec<PathBuf>,
    /// Never reachable, even beneath a `read` or `write` path.
    pub hide: Vec<PathBuf>,
}

/// `grants` without anything at or beneath a `hidden` path: a grant that contains a hidden
/// path is replaced by its entries (recursively, `list` lists a directory), except symbolic
/// links among them (what they point at is granted where it lies, or not at all). Paths are
/// compared as given: pass canonical ones.
pub fn carve(grants: &[PathBuf], hidden: &[PathBuf], list: &dyn Fn(&Path) -> Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for grant in grants {
        carve_one(grant, hidden, list, &mut out);
    }
    out
}

fn carve_one(grant: &Path, hidden: &[PathBuf], list: &dyn Fn(&Path) -> Vec<PathBuf>, out: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| grant.starts_with(h)) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(grant)) {
        out.push(grant.to_path_buf());
        return;
    }
    for entry in list(grant) {
        carve_one(&entry, hidden, list, out);
    }
}

/// The entries of `dir` that are not symbolic links.
pub fn list_dir(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(|e| e.ok()).filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink())).map(|e| e.path()).collect()
}

/// `path` with its symbolic links resolved; as given when it does not exist.
pub fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// The Landlock ruleset of `rules` (built before fork: it opens the granted paths as this
/// process, which may be root). Paths that do not exist are left out.
pub fn landlock_ruleset(rules: &Rules) -> Result<RulesetCreated, String> {
    let hidden: Vec<PathBuf> = rules.hide.iter().map(|p| canonical(p)).collect();
    let grants = |paths: &[PathBuf]| carve(&paths.iter().map(|p| canonical(p)).collect::<Vec<_>>(), &hidden, &list_dir);
    let (read, write) = (grants(&rules.read), grants(&rules.write));
    let failed = |e: landlock::RulesetError| format!("landlock: {e}");
    Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(failed)?
        .create()
        .map_err(failed)?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(TARGET_ABI)))
        .map_err(failed)?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(TARGET_ABI)))
        .map_err(failed)
}

/// Enforce `ruleset` on this thread (the child, between fork and exec; it also sets
/// `PR_SET_NO_NEW_PRIVS`) and report it on stderr. Not enforced → reported `unavailable` and
/// an error (the program must not start).
pub fn enforce(ruleset: RulesetCreated, abi: i32) -> std::io::Result<()> {
    let confinement = match ruleset.restrict_self() {
        Ok(s) if s.ruleset == RulesetStatus::FullyEnforced => Confinement::Landlock { abi, full: true },
        Ok(s) if s.ruleset == RulesetStatus::PartiallyEnforced => Confinement::Landlock { abi, full: false },
        Ok(_) => Confinement::Unavailable("landlock: the ruleset was not enforced".into()),
        Err(e) => Confinement::Unavailable(format!("landlock: {e}")),
    };
    report(&confinement);
    match confinement {
        Confinement::Unavailable(_) => Err(std::io::Error::from_raw_os_error(NOT_CONFINED_ERRNO)),
        _ => Ok(()),
    }
}

/// The error [`enforce`] fails the child's start with: no `execve`, `setuid` or `chdir` gives
/// it, so the shim can tell a refused confinement from a program that cannot start.
pub const NOT_CONFINED_ERRNO: i32 = libc::ENOTRECOVERABLE;

/// Enter a private mount namespace (this process and what it starts) and cover each `hide`
/// path that exists. Needs root (CAP_SYS_ADMIN).
pub fn hide_with_mounts(hide: &[PathBuf]) -> Result<(), String> {
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: unshare/mount with valid NUL-terminated strings or nulls.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(os("unshare(CLONE_NEWNS)"));
        }
        // Our mounts must not propagate back to the server's namespace.
        let (none, no_data) = (std::ptr::null(), std::ptr::null());
        if libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, no_data) != 0 {
            return Err(os("making the mounts private"));
        }
    }
    for path in hide {
        let Ok(meta) = std::fs::metadata(path) else { continue };
        let target = CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("a NUL in {}", path.display()))?;
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        // SAFETY: mount with valid NUL-terminated strings.
        let rc = unsafe {
            if meta.is_dir() {
                libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), flags, c"size=4k,mode=0555".as_ptr().cast())
            } else {
                libc::mount(c"/dev/null".as_ptr(), target.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null())
            }
        };
        if rc != 0 {
            return Err(os(&format!("covering {}", path.display())));
        }
    }
    Ok(())
}

/// Write the report line on stderr (one `write`, no buffering, no lock: also between fork
/// and exec).
pub fn report(confinement: &Confinement) {
    let line = format!("{REPORT_PREFIX}{confinement}\n");
    // SAFETY: write(2) of an initialised buffer to fd 2.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Vec<PathBuf> {
        p.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_grant_is_carved_around_the_hidden_paths() {
        // /usr/local/bin holds the server; /srv/docs is a grantable root.
        let tree = |dir: &Path| -> Vec<PathBuf> {
            match dir.to_str().unwrap() {
                "/usr" => paths(&["/usr/bin", "/usr/lib", "/usr/local"]),
                "/usr/local" => paths(&["/usr/local/bin", "/usr/local/share"]),
                "/srv" => paths(&["/srv/docs", "/srv/www"]),
                other => panic!("listed {other}"),
            }
        };
        let hidden = paths(&["/usr/local/bin", "/srv/docs", "/var/lib/mnote"]);
        let got = carve(&paths(&["/usr", "/etc", "/srv", "/srv/docs/team", "/var/lib/mnote"]), &hidden, &tree);
        assert_eq!(got, paths(&["/usr/bin", "/usr/lib", "/usr/local/share", "/etc", "/srv/www"]));
        assert!(carve(&paths(&["/"]), &[], &tree).len() == 1, "nothing hidden: the grant whole");
    }

    #[test]
    fn the_report_line_round_trips() {
        for c in [
            Confinement::Landlock { abi: 7, full: true },
            Confinement::Landlock { abi: 1, full: false },
            Confinement::MountNamespace,
            Confinement::Off,
            Confinement::Unavailable("no landlock, not root".into()),
        ] {
            assert_eq!(c.to_string().parse::<Confinement>(), Ok(c.clone()), "{c}");
        }
        for bad in ["", "landlock", "landlock abi=x full", "landlock abi=7 most", "offf", "off now"] {
            assert!(bad.parse::<Confinement>().is_err(), "{bad}");
        }
    }

    #[test]
    fn this_kernel_offers_landlock() {
        // The machine these tests run on has Landlock (ABI 7 when this was written); the
        // integration tests' confinement checks depend on it, so say so here first.
        let abi = landlock_abi();
        assert!(abi.is_some_and(|a| a >= 1), "no Landlock on this kernel ({abi:?}): the ACP sandbox tests cannot run");
        assert_eq!(available(), Available::Landlock { abi: abi.unwrap() });
    }
}
