//! What an ACP agent process runs with (the supervisor's shim does the rest, see
//! `platform::supervise::shim`):
//! - an allow-listed environment: PATH, LANG, LANGUAGE, LC_*, TZ, TERM from the server's, the
//!   variables the operator names in MNOTE_ACP_ENV, and HOME = TMPDIR = the run's own fresh
//!   directory; nothing else (no database URL, no `MNOTE_*`, no key or token);
//! - its user: a server running as root runs agents as MNOTE_ACP_USER (default `nobody`),
//!   never as root; a server that is not root runs them as itself;
//! - the values its stderr must never show when we quote it ([`known_secrets`]).

use std::{
    ffi::{CString, OsString},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

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
/// agent could still reach: a data dir or key file others may read, and, when the server is
/// not root, that the agent has the server's uid and so its file access (the key file).
pub fn prepare_server(data_dir: &Path, key_file: Option<PathBuf>) -> Vec<String> {
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
    if euid() != 0 {
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
