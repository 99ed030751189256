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
