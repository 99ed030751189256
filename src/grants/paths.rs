//! Path confinement: every file reference is checked against a canonical grant root.
//!
//! Pure functions over the filesystem; no database. A path is inside a root only if both
//! its lexical form (`..` resolved without touching the disk) and its canonical form
//! (symlinks resolved) stay under the root.

use std::path::{Component, Path, PathBuf};

use crate::error::AppError;

/// Resolve `.` and `..` lexically. Returns None when `..` climbs above the start.
pub fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Some(out)
}

fn reject_nul(raw: &str) -> Result<(), AppError> {
    if raw.contains('\0') { Err(AppError::PathOutsideGrant) } else { Ok(()) }
}

/// Validate a directory an admin wants to grant: absolute, existing, a directory, inside
/// one of the operator's grantable roots, and not overlapping the data directory.
pub fn grantable_dir(raw: &str, allowed: &[PathBuf], data_dir: &Path) -> Result<PathBuf, AppError> {
    reject_nul(raw)?;
    let p = Path::new(raw.trim());
    if !p.is_absolute() {
        return Err(AppError::invalid("path", "a grant needs an absolute directory path"));
    }
    let lexical = normalize(p).ok_or(AppError::PathOutsideGrant)?;
    if !allowed.iter().any(|r| lexical.starts_with(r)) {
        return Err(AppError::PathOutsideGrant);
    }
    let canon = p.canonicalize().map_err(|_| AppError::invalid("path", "no such directory"))?;
    if !canon.is_dir() {
        return Err(AppError::invalid("path", "not a directory"));
    }
    if !allowed.iter().any(|r| canon.starts_with(r)) || canon.starts_with(data_dir) || data_dir.starts_with(&canon) {
        return Err(AppError::PathOutsideGrant);
    }
    Ok(canon)
}

/// A file or directory confined to a grant root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// Canonical absolute path.
    pub abs: PathBuf,
    /// Relative to the root, `/`-separated; "" for the root itself.
    pub rel: String,
}

/// Resolve `raw` (absolute, or relative to `root`) and require it to stay inside `root`
/// lexically and after following symlinks. Missing paths inside the root are `invalid_input`.
pub fn confine(root: &Path, raw: &str) -> Result<Confined, AppError> {
    reject_nul(raw)?;
    let raw = raw.trim();
    let joined = if Path::new(raw).is_absolute() { PathBuf::from(raw) } else { root.join(raw) };
    let lexical = normalize(&joined).ok_or(AppError::PathOutsideGrant)?;
    if !lexical.starts_with(root) {
        return Err(AppError::PathOutsideGrant);
    }
    let abs = match joined.canonicalize() {
        Ok(a) => a,
        Err(_) if std::fs::symlink_metadata(&lexical).is_ok() => return Err(AppError::PathOutsideGrant),
        Err(_) => return Err(AppError::invalid("path", "no such file or directory")),
    };
    let rel = abs.strip_prefix(root).map_err(|_| AppError::PathOutsideGrant)?;
    let rel = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/");
    Ok(Confined { abs, rel })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<impl std::fmt::Debug, AppError>) -> &'static str {
        r.map(|_| "ok").unwrap_or_else(|e| e.code())
    }

    #[test]
    fn confinement_cases() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().canonicalize().unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.md"), "x").unwrap();
        std::fs::write(base.join("secret.txt"), "s").unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), root.join("link-out")).unwrap();
        std::os::unix::fs::symlink(root.join("sub/a.md"), root.join("link-in")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", root.join("dangling")).unwrap();

        let ok = confine(&root, "sub/a.md").unwrap();
        assert_eq!(ok.rel, "sub/a.md");
        assert_eq!(confine(&root, root.join("sub/a.md").to_str().unwrap()).unwrap(), ok);
        assert_eq!(confine(&root, "sub/../sub/a.md").unwrap(), ok);
        assert_eq!(confine(&root, "link-in").unwrap().rel, "sub/a.md");
        assert_eq!(confine(&root, "").unwrap().rel, "");
        for bad in [
            "../secret.txt",
            "sub/../../secret.txt",
            "link-out",
            "dangling",
            "/etc/passwd",
            "sub/a.md\0x",
            "../../../../../../etc",
        ] {
            assert_eq!(code(confine(&root, bad)), "path_outside_grant", "{bad:?}");
        }
        assert_eq!(code(confine(&root, "sub/missing.md")), "invalid_input");
    }

    #[test]
    fn grantable_dir_cases() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().canonicalize().unwrap();
        let allowed = base.join("docs");
        let data = base.join("data");
        std::fs::create_dir_all(allowed.join("team")).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(allowed.join("f.md"), "x").unwrap();
        let roots = vec![allowed.clone()];
        assert_eq!(grantable_dir(allowed.join("team").to_str().unwrap(), &roots, &data).unwrap(), allowed.join("team"));
        assert_eq!(code(grantable_dir(data.to_str().unwrap(), &roots, &data)), "path_outside_grant");
        assert_eq!(code(grantable_dir("/etc", &roots, &data)), "path_outside_grant");
        let escape = format!("{}/team/../../data", allowed.display());
        assert_eq!(code(grantable_dir(&escape, &roots, &data)), "path_outside_grant");
        assert_eq!(code(grantable_dir("team", &roots, &data)), "invalid_input");
        assert_eq!(code(grantable_dir(allowed.join("f.md").to_str().unwrap(), &roots, &data)), "invalid_input");
        assert_eq!(code(grantable_dir("/tmp\0", &roots, &data)), "path_outside_grant");
    }
}
