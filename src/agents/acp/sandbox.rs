//! What an ACP agent process runs with (the supervisor's shim does the rest, see
//! `platform::supervise::shim`):
//! - an allow-listed environment: PATH, LANG, LANGUAGE, LC_*, TZ, TERM from the server's, the
//!   variables the operator names in MNOTE_ACP_ENV, and HOME = TMPDIR = the run's own fresh
//!   directory; nothing else (no database URL, no `MNOTE_*`, no key or token);
//! - its user: a server running as root runs agents as MNOTE_ACP_USER (default `nobody`),
//!   never as root; a server that is not root runs them as itself;
//! - what it may open ([`FsPolicy`], enforced by the shim, see `platform::supervise::confine`):
//!   read and execute beneath the system directories ([`SYSTEM_READ`]), its program's
//!   directory and MNOTE_ACP_READ_PATHS; read and write [`DEVICES`], its run directory and
//!   MNOTE_ACP_WRITE_PATHS; nothing else (no `/proc`, no `/tmp`); never the data dir, the key
//!   file, a grantable root or the server's own directory, even beneath a granted path.
//!   Without any confinement the agent does not start (`agent_sandbox_unavailable`, see
//!   [`admit`]) unless the operator set MNOTE_ACP_SANDBOX=off;
//! - the values its stderr must never show when we quote it ([`known_secrets`]).

use std::{
    ffi::{CString, OsStr, OsString},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

pub use crate::platform::supervise::confine::Confinement;
use crate::{
    agents::AgentError,
    config::{AcpSandbox, Config},
    platform::supervise::confine::Rules,
};

/// The system directories a confined agent may read and execute beneath (what an
/// interpreter and its libraries need: Python, Node, a shell).
pub const SYSTEM_READ: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];
/// The devices a confined agent may read and write.
pub const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// What a confined agent may reach of the file system, from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsPolicy {
    /// MNOTE_ACP_READ_PATHS.
    pub read: Vec<PathBuf>,
    /// MNOTE_ACP_WRITE_PATHS.
    pub write: Vec<PathBuf>,
    /// Never reachable: the data dir, the key file, every grantable root, the server's own
    /// directory (its executable's, and the shim's).
    pub hide: Vec<PathBuf>,
}

impl FsPolicy {
    pub fn from_config(cfg: &Config) -> Self {
        let mut hide = vec![cfg.data_dir.clone()];
        hide.extend(cfg.rag.secret_key_file.clone());
        hide.extend(cfg.grantable_roots.iter().cloned());
        let exe = std::env::current_exe().ok();
        for bin in [Some(&cfg.parser_exe), exe.as_ref()].into_iter().flatten() {
            hide.extend(bin.canonicalize().ok().and_then(|b| b.parent().map(Path::to_path_buf)));
        }
        hide.dedup();
        FsPolicy { read: cfg.agents.acp_read_paths.clone(), write: cfg.agents.acp_write_paths.clone(), hide }
    }

    /// The rules of one run of `program` (found in `path`, the agent's PATH) in `run_dir`.
    pub fn rules(&self, program: &str, path: Option<&OsStr>, run_dir: &Path) -> Rules {
        let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        read.extend(etc_link_targets());
        read.extend(program_dirs(program, path));
        read.extend(self.read.iter().cloned());
        let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
        write.push(run_dir.to_path_buf());
        write.extend(self.write.iter().cloned());
        Rules { read, write, hide: self.hide.clone() }
    }
}

/// The directories of the agent's program: where `program` is found (as given when it names a
/// path, else the first match in `path`) and where it really lies (symbolic links resolved).
pub fn program_dirs(program: &str, path: Option<&OsStr>) -> Vec<PathBuf> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| p.is_absolute())
    } else {
        path.into_iter().flat_map(|p| std::env::split_paths(p)).map(|d| d.join(program)).find(|p| p.is_file())
    };
    let Some(found) = found else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = found.parent().map(Path::to_path_buf).into_iter().collect();
    if let Some(real) = found.canonicalize().ok().and_then(|r| r.parent().map(Path::to_path_buf))
        && !dirs.contains(&real)
    {
        dirs.push(real);
    }
    dirs
}

/// Where the symbolic links directly in `/etc` point, outside `/proc` and `/sys`: a host's
/// `resolv.conf` may be one into `/run` (systemd-resolved), which name resolution needs.
fn etc_link_targets() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/etc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| e.path().canonicalize().ok())
        .filter(|t| !t.starts_with("/etc") && !t.starts_with("/proc") && !t.starts_with("/sys"))
        .collect()
}

/// Whether a run may go on with the confinement its shim reported (`report`: `None` when it
/// reported nothing): only a confinement, or none when the operator opted out (`mode` off).
/// Otherwise the run fails with `agent_sandbox_unavailable`.
pub fn admit(mode: AcpSandbox, report: Option<Result<Confinement, String>>) -> Result<Confinement, AgentError> {
    let refused = |why: String| {
        AgentError::upstream(
            "agent_sandbox_unavailable",
            format!("the agent was not started: it cannot be confined here ({why}); see MNOTE_ACP_SANDBOX"),
        )
    };
    match (mode, report) {
        (_, None) => Err(refused("the sandbox shim reported no confinement".into())),
        (_, Some(Err(e))) => Err(refused(format!("the sandbox shim's report: {e}"))),
        (_, Some(Ok(Confinement::Unavailable(why)))) => Err(refused(why)),
        (AcpSandbox::On, Some(Ok(Confinement::Off))) => Err(refused("the shim confined nothing".into())),
        (_, Some(Ok(c))) => Ok(c),
    }
}

/// Variables of the server's environment every agent gets (when set), besides `LC_*`.
const PASSED: &[&str] = &["PATH", "LANG", "LANGUAGE", "TZ", "TERM"];
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The agent user of a server that runs as root, unless MNOTE_ACP_USER names another.
const DEFAULT_USER: &str = "nobody";

/// The agent's whole environment: the allow-list from `server` (the server's environment),
/// the `declared` names, and HOME/TMPDIR = `home`.
pub fn environment(
    server: impl Iterator<Item = (OsString, OsString)>,
    declared: &[String],
    home: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = server
        .filter(|(name, _)| {
            name.to_str().is_some_and(|n| PASSED.contains(&n) || n.starts_with("LC_") || declared.iter().any(|d| d.as_str() == n))
        })
        .collect();
    if !env.iter().any(|(n, _)| n == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env.push(("HOME".into(), home.into()));
    env.push(("TMPDIR".into(), home.into()));
    env
}

/// The `(uid, gid)` to run the agent as: `None` to stay the server's user. `euid` is the
/// server's effective uid; `lookup` finds a user by name.
pub fn run_as(
    configured: Option<&str>,
    euid: u32,
    lookup: impl Fn(&str) -> Option<(u32, u32)>,
) -> Result<Option<(u32, u32)>, String> {
    if euid != 0 {
        return match configured {
            None => Ok(None),
            Some(name) if lookup(name).is_some_and(|(uid, _)| uid == euid) => Ok(None),
            Some(name) => {
                Err(format!("MNOTE_ACP_USER={name}: only a server that runs as root can run its agents as another user"))
            }
        };
    }
    let name = configured.unwrap_or(DEFAULT_USER);
    match lookup(name) {
        None => Err(format!("the agent user {name} (MNOTE_ACP_USER) does not exist")),
        Some((0, _)) => Err(format!("the agent user {name} (MNOTE_ACP_USER) is root; agents never run as root")),
        Some(ids) => Ok(Some(ids)),
    }
}

/// For `mnote serve` with an ACP command: make this process not dumpable (an agent of the
/// same uid can then neither ptrace it nor read its `/proc/<pid>/environ`) and say what an
/// agent could still reach: a data dir or key file others may read, and, when its file access
/// is not confined (`mode` off) and the server is not root, that the agent has the server's
/// uid and so its file access (the key file); or that no run can start (no confinement here).
pub fn prepare_server(data_dir: &Path, key_file: Option<PathBuf>, mode: AcpSandbox) -> Vec<String> {
    // SAFETY: prctl with constant arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let mut warnings = Vec::new();
    let open_to_others = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o077 != 0);
    if open_to_others(data_dir) {
        warnings.push(format!("the data dir {} is open to other users: chmod 700 it", data_dir.display()));
    }
    let key_file = key_file.unwrap_or_else(|| data_dir.join("secret.key"));
    if open_to_others(&key_file) {
        warnings.push(format!("the key file {} is open to other users: chmod 600 it", key_file.display()));
    }
    match (mode, crate::platform::supervise::confine::available()) {
        (AcpSandbox::On, crate::platform::supervise::confine::Available::Nothing) => warnings.push(
            "this kernel offers no Landlock and the server is not root (no mount namespace): every ACP run fails \
             with agent_sandbox_unavailable (MNOTE_ACP_SANDBOX=off runs agents unconfined)"
                .into(),
        ),
        (AcpSandbox::Off, _) => {
            warnings.push("MNOTE_ACP_SANDBOX=off: ACP agents' file access is not confined by the kernel".into())
        }
        (AcpSandbox::On, _) => {}
    }
    if euid() != 0 && mode == AcpSandbox::Off {
        warnings.push(
            "ACP agents run as the server's own user (the server is not root): they can read the files it can, \
             the key file included; run the server as root (agents then run as MNOTE_ACP_USER) or give the key \
             in MNOTE_SECRET_KEY"
                .into(),
        );
    }
    warnings
}

/// A user's `(uid, gid)` from the password database.
pub fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    let mut buf = vec![libc::c_char::default(); 16 * 1024];
    // SAFETY: getpwnam_r writes into `pwd` and `buf` (of the given length) only; `result` is
    // null or points at `pwd`.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result = std::ptr::null_mut();
        let rc = libc::getpwnam_r(name.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result);
        (rc == 0 && !result.is_null()).then_some((pwd.pw_uid, pwd.pw_gid))
    }
}

/// The server's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The secret values of `env` (the server's environment, which holds whatever the operator
/// passes to agents): every variable named like a credential (`*KEY*`, `*TOKEN*`,
/// `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`) and the password of every URL
/// (`scheme://user:password@host`). Longest first, so a secret containing another is
/// redacted whole.
pub fn known_secrets(env: impl Iterator<Item = (String, String)>) -> Vec<String> {
    const SECRET_NAMES: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];
    let mut secrets: Vec<String> = Vec::new();
    for (name, value) in env {
        let upper = name.to_ascii_uppercase();
        let value = value.trim();
        if SECRET_NAMES.iter().any(|s| upper.contains(s)) && !value.is_empty() {
            secrets.push(value.to_string());
        }
        if let Some(password) = url_password(value) {
            secrets.push(password.to_string());
        }
    }
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    secrets
}

/// `password` of `scheme://user:password@host…`.
fn url_password(value: &str) -> Option<&str> {
    let (_, rest) = value.split_once("://")?;
    let userinfo = &rest[..rest.find('@')?];
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty() && !password.contains('/')).then_some(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(n, v)| (OsString::from(n), OsString::from(v))).collect()
    }

    #[test]
    fn the_environment_is_an_allow_list() {
        let server = os(&[
            ("PATH", "/usr/bin"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("HOME", "/root"),
            ("DATABASE_URL", "postgres://mnote_app:pw@h/db"),
            ("MNOTE_TEST_ADMIN_URL", "postgres://postgres@h/postgres"),
            ("MNOTE_EMBED_API_KEY", "k"),
            ("PGPASSWORD", "pw"),
            ("OPENAI_API_KEY", "sk-x"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
        ]);
        let env = environment(server.into_iter(), &["OPENAI_API_KEY".into()], Path::new("/tmp/run"));
        let names: Vec<&str> = env.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(names, ["PATH", "LANG", "LC_ALL", "OPENAI_API_KEY", "HOME", "TMPDIR"]);
        assert_eq!(env[4].1, "/tmp/run");
        // No PATH in the server's: a default one.
        let env = environment(std::iter::empty(), &[], Path::new("/tmp/run"));
        assert_eq!(env[0], (OsString::from("PATH"), OsString::from(DEFAULT_PATH)));
    }

    #[test]
    fn a_root_server_runs_agents_as_another_user_never_as_root() {
        let users = |name: &str| match name {
            "nobody" => Some((65534, 65534)),
            "agent" => Some((990, 990)),
            "root" => Some((0, 0)),
            "me" => Some((1000, 1000)),
            _ => None,
        };
        assert_eq!(run_as(None, 0, users), Ok(Some((65534, 65534))));
        assert_eq!(run_as(Some("agent"), 0, users), Ok(Some((990, 990))));
        assert!(run_as(Some("root"), 0, users).unwrap_err().contains("never run as root"));
        assert!(run_as(Some("ghost"), 0, users).unwrap_err().contains("does not exist"));
        // Not root: the server's own user, and no other.
        assert_eq!(run_as(None, 1000, users), Ok(None));
        assert_eq!(run_as(Some("me"), 1000, users), Ok(None));
        assert!(run_as(Some("agent"), 1000, users).is_err());
        assert_eq!(lookup_user("root"), Some((0, 0)));
    }

    #[test]
    fn a_run_without_confinement_fails_unless_the_operator_opted_out() {
        let landlock = Confinement::Landlock { abi: 7, full: true };
        let code = |r: Result<Confinement, AgentError>| r.map_err(|e| e.code());
        assert_eq!(code(admit(AcpSandbox::On, Some(Ok(landlock.clone())))), Ok(landlock));
        assert_eq!(code(admit(AcpSandbox::On, Some(Ok(Confinement::MountNamespace)))), Ok(Confinement::MountNamespace));
        let unavailable = Some(Ok(Confinement::Unavailable("no landlock, not root".into())));
        for (mode, report) in [
            (AcpSandbox::On, unavailable.clone()),
            (AcpSandbox::Off, unavailable),
            (AcpSandbox::On, None),
            (AcpSandbox::On, Some(Err("not a confinement".into()))),
            (AcpSandbox::On, Some(Ok(Confinement::Off))),
        ] {
            assert_eq!(code(admit(mode, report.clone())), Err("agent_sandbox_unavailable"), "{mode:?} {report:?}");
        }
        // Only the operator's explicit MNOTE_ACP_SANDBOX=off lets an unconfined agent run.
        assert_eq!(code(admit(AcpSandbox::Off, Some(Ok(Confinement::Off)))), Ok(Confinement::Off));
    }

    #[test]
    fn the_rules_grant_the_system_the_program_and_the_run_but_hide_the_server() {
        let policy = FsPolicy {
            read: vec!["/opt/agent".into()],
            write: vec!["/var/cache/agent".into()],
            hide: vec!["/var/lib/mnote".into(), "/srv/docs".into()],
        };
        let rules = policy.rules("sh", Some(OsStr::new("/nonexistent:/bin:/usr/bin")), Path::new("/tmp/mnote-acp-run"));
        assert!(rules.read.contains(&PathBuf::from("/usr")) && rules.read.contains(&PathBuf::from("/etc")));
        assert!(rules.read.contains(&PathBuf::from("/opt/agent")));
        assert!(!rules.read.iter().any(|p| p.starts_with("/proc") || p.starts_with("/tmp")), "{:?}", rules.read);
        assert_eq!(rules.write[DEVICES.len()..], [PathBuf::from("/tmp/mnote-acp-run"), PathBuf::from("/var/cache/agent")]);
        assert_eq!(rules.hide, policy.hide);
        assert_eq!(program_dirs("/opt/agent/bin/run", None), [PathBuf::from("/opt/agent/bin")]);
        assert!(program_dirs("no-such-program-here", Some(OsStr::new("/usr/bin"))).is_empty());
    }

    #[test]
    fn secrets_are_the_credential_variables_and_url_passwords() {
        let env = [
            ("OPENAI_API_KEY", "abc"),
            ("MNOTE_METRICS_TOKEN", " t0k "),
            ("DATABASE_URL", "postgres://mnote_app:pw9@127.0.0.1/mnote"),
            ("MNOTE_TEST_ADMIN_URL", "postgres://postgres@127.0.0.1/postgres"),
            ("HOME", "/root"),
            ("EMPTY_TOKEN", ""),
        ];
        let got = known_secrets(env.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        assert_eq!(got, ["abc", "pw9", "t0k"]);
    }
}
