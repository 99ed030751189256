//! Files both test binaries (`tests/api`, `tests/browser`) read from outside the test itself:
//! the real-world documents and the test ACP agent. Included by each with `#[path]`.

use std::path::{Path, PathBuf};

/// A real-world test document (`tests/testdata/SOURCES.tsv`, provisioned by `./dev test` into
/// `$MNOTE_TESTDATA_DIR`). Panics (never skips) when it is missing.
pub fn testdata(rel: &str) -> PathBuf {
    let dir = std::env::var_os("MNOTE_TESTDATA_DIR").map(PathBuf::from).expect(
        "MNOTE_TESTDATA_DIR is not set: run the tests through `./dev test`, which provisions the \
         real-world test documents of tests/testdata/SOURCES.tsv",
    );
    let path = dir.join(rel);
    assert!(path.is_file(), "{} is missing: `./dev test` provisions MNOTE_TESTDATA_DIR", path.display());
    path
}

/// `scripts/acp_agent.py`, copied once per test binary into a directory anyone may read: the
/// server runs ACP agents as an unprivileged user when it runs as root, and a checkout under
/// a private home directory would be out of that user's reach.
pub fn acp_agent_script() -> &'static Path {
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mnote-test-acp-agent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = dir.join("acp_agent.py");
        std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/acp_agent.py"), &script).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    })
}

/// The example agent compiled into the pinned npm `@agentclientprotocol/sdk`
/// (`dist/examples/agent.js`, from `$MNOTE_CLIENTS_DIR`, installed by `./dev test`), copied once
/// per test binary with the one package it imports (`zod`) into a `node_modules` anyone may
/// read, for the same reason as [`acp_agent_script`]. Panics (never skips) when it is missing.
/// (The browser tests do not use it.)
#[allow(dead_code)]
pub fn third_party_acp_agent() -> &'static Path {
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let clients = std::env::var_os("MNOTE_CLIENTS_DIR").map(PathBuf::from).expect(
            "MNOTE_CLIENTS_DIR is not set: run the tests through `./dev test`, which installs the pinned \
             third-party clients of tests/clients",
        );
        let modules = std::env::temp_dir().join(format!("mnote-test-acp-sdk-{}", std::process::id())).join("node_modules");
        for package in ["@agentclientprotocol/sdk", "zod"] {
            let from = clients.join(package);
            assert!(from.is_dir(), "{} is missing: `./dev test` installs it", from.display());
            copy_readable(&from, &modules.join(package));
        }
        world_readable_dirs(&modules);
        modules.join("@agentclientprotocol/sdk/dist/examples/agent.js")
    })
}

/// `from` copied to `to` recursively, directories 0755 and files 0644.
#[allow(dead_code)]
fn copy_readable(from: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().unwrap().is_dir() {
            copy_readable(&src, &dst);
        } else if entry.file_type().unwrap().is_file() {
            std::fs::copy(&src, &dst).unwrap();
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
}

/// Every directory from `dir` up to the temporary directory made traversable by anyone.
#[allow(dead_code)]
fn world_readable_dirs(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let top = std::env::temp_dir();
    let mut d = Some(dir);
    while let Some(p) = d {
        if p == top {
            break;
        }
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        d = p.parent();
    }
}
