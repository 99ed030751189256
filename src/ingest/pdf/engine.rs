//! Finding and binding `libpdfium.so` once per process, and naming its build.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use pdfium_render::prelude::*;

use crate::ingest::ParseError;

pub use crate::config::{PDFIUM_BUILD_ENV, PDFIUM_LIB_ENV};

/// Fallback locations under the project root: the provisioning documented in the brief, and
/// the versioned directory `./dev` installs.
const LOCAL_LIBS: [&str; 2] = [".local/pdfium/libpdfium.so", ".local/pdfium-5.15.2/libpdfium.so"];

/// sha256 of known `libpdfium.so` builds → pdfium build name for `provider_version`.
const KNOWN_BUILDS: [(&str, &str); 1] =
    [("c76dc0f7839644bfa7c3e3107a6068df714e339c861bb7d4519907b821d427f9", "pdfium/8149 (pypdfium2 5.15.2)")];

pub(super) struct Engine {
    pub(super) pdfium: Pdfium,
    /// `pdfium/8149 (…)` or `pdfium sha256:<12 hex>` for an unknown build.
    pub(super) build: String,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();
static BIND_LOCK: Mutex<()> = Mutex::new(());

/// Where `libpdfium.so` is: the configured path ([`crate::config::pdfium_lib`]) when set,
/// else the first existing local copy.
fn library_path(configured: Option<PathBuf>, root: &Path) -> Option<PathBuf> {
    match configured {
        Some(p) if !p.as_os_str().is_empty() => Some(p),
        _ => LOCAL_LIBS.iter().map(|p| root.join(p)).find(|p| p.is_file()),
    }
}

/// Bind pdfium once per process. A failed bind is not cached, so a library provisioned later
/// is picked up by the next parse.
pub(super) fn engine() -> Result<&'static Engine, ParseError> {
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let _guard = BIND_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = ENGINE.get() {
        return Ok(e);
    }
    let missing = |m: String| ParseError::new("pdf_engine_missing", m);
    let path = library_path(crate::config::pdfium_lib(), Path::new(env!("CARGO_MANIFEST_DIR")))
        .ok_or_else(|| missing(format!("libpdfium.so not found: set {PDFIUM_LIB_ENV} or run ./dev provision")))?;
    if !path.is_file() {
        return Err(missing(format!("{PDFIUM_LIB_ENV}={} does not exist", path.display())));
    }
    let bindings = Pdfium::bind_to_library(&path).map_err(|e| missing(format!("cannot load {}: {e:?}", path.display())))?;
    let build = library_build_for(&path, crate::config::pdfium_build_hint());
    let _ = ENGINE.set(Engine { pdfium: Pdfium::new(bindings), build });
    ENGINE.get().ok_or_else(|| missing("pdfium binding was not stored".into()))
}

/// pdfium has no version API; the library's hash names the build truthfully.
fn library_build(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let Ok(bytes) = std::fs::read(path) else { return "pdfium (unreadable)".into() };
    let hash = hex::encode(Sha256::digest(&bytes));
    KNOWN_BUILDS
        .iter()
        .find(|(h, _)| *h == hash)
        .map(|(_, name)| name.to_string())
        .unwrap_or_else(|| format!("pdfium sha256:{}", &hash[..12]))
}

/// `dev:inode:size:mtime` of a file: a library replaced or rewritten gets another identity.
fn file_identity(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!("{}:{}:{}:{}.{:09}", m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// The build name of the library at `path`: from `hint` ([`PDFIUM_BUILD_ENV`]) when it names
/// this very file, else from the library's hash.
fn library_build_for(path: &Path, hint: Option<String>) -> String {
    if let Some(hint) = hint
        && let Some((id, name)) = hint.split_once(' ')
        && !name.is_empty()
        && file_identity(path).is_some_and(|current| current == id)
    {
        return name.to_string();
    }
    library_build(path)
}

/// Environment for `mnote parse-file` children: [`PDFIUM_BUILD_ENV`] when pdfium is found. The
/// hash is computed once per process (again only if the library file changes).
pub fn child_env() -> Vec<(&'static str, String)> {
    static HINT: Mutex<Option<(PathBuf, String, String)>> = Mutex::new(None);
    let Some(path) = library_path(crate::config::pdfium_lib(), Path::new(env!("CARGO_MANIFEST_DIR"))) else {
        return Vec::new();
    };
    let Some(id) = file_identity(&path) else { return Vec::new() };
    let mut hint = HINT.lock().unwrap_or_else(|p| p.into_inner());
    let fresh = matches!(&*hint, Some((p, i, _)) if *p == path && *i == id);
    if !fresh {
        let build = library_build(&path);
        *hint = Some((path, id.clone(), build));
    }
    hint.as_ref().map(|(_, id, build)| vec![(PDFIUM_BUILD_ENV, format!("{id} {build}"))]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_path_prefers_the_environment() {
        let root = Path::new("/nonexistent-root");
        assert_eq!(library_path(Some("/opt/libpdfium.so".into()), root), Some(PathBuf::from("/opt/libpdfium.so")));
        assert_eq!(library_path(Some("".into()), root), None);
        assert_eq!(library_path(None, root), None);
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        if let Some(found) = library_path(None, here) {
            assert!(found.starts_with(here.join(".local")));
        }
    }

    #[test]
    fn build_hint_is_used_only_for_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libpdfium.so");
        std::fs::write(&lib, b"not really a library").unwrap();
        let hashed = library_build(&lib);
        assert!(hashed.starts_with("pdfium sha256:"), "{hashed}");
        let id = file_identity(&lib).unwrap();
        assert_eq!(library_build_for(&lib, Some(format!("{id} pdfium/1 (test)"))), "pdfium/1 (test)");
        assert_eq!(library_build_for(&lib, Some("1:2:3:4.000000000 pdfium/1 (test)".into())), hashed);
        assert_eq!(library_build_for(&lib, Some(format!("{id} "))), hashed);
        assert_eq!(library_build_for(&lib, None), hashed);
        // Rewritten in place: another size, so another identity.
        std::fs::write(&lib, b"another library build").unwrap();
        assert_ne!(library_build_for(&lib, Some(format!("{id} pdfium/1 (test)"))), "pdfium/1 (test)");
    }
}
