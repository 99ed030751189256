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

/// Why [`open_beneath`] gave no file.
#[derive(Debug)]
pub enum OpenError {
    /// Nothing (or not a regular file) at that name.
    Missing,
    /// The name leads out of the root (`..`, an absolute symlink, a symlink out, a magic link).
    Outside,
    /// A regular file with several hard links outside the data directory
    /// (`MNOTE_ALLOW_HARD_LINKS` not set).
    HardLink,
    Io(std::io::Error),
}

impl From<OpenError> for AppError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Missing => AppError::FileMissing("the file is no longer available".into()),
            OpenError::Outside => AppError::PathOutsideGrant,
            OpenError::HardLink => AppError::HardLinkRefused,
            OpenError::Io(e) => AppError::Internal(e.into()),
        }
    }
}

fn classify(e: std::io::Error) -> OpenError {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => OpenError::Missing,
        // EXDEV: RESOLVE_BENEATH refused to leave the root; ELOOP: a symlink under
        // O_NOFOLLOW (fallback walk) or a magic link.
        Some(libc::EXDEV | libc::ELOOP) => OpenError::Outside,
        _ => OpenError::Io(e),
    }
}

/// Open the regular file `rel` (relative to `root`, `/`-separated, as stored for a source)
/// for reading, resolved by the kernel relative to an open handle of `root` and never
/// allowed to leave it.
///
/// Why: checking a path ([`confine`]) and opening it again by name is a race — a directory
/// inside the grant swapped for a symlink to somewhere else (`renameat2(RENAME_EXCHANGE)`)
/// between the check and the open serves the outside file. Here the check *is* the open:
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` resolves every component (symlinks
/// included) under the root's descriptor and fails with `EXDEV` if any step would leave it.
/// Kernels without openat2 (ENOSYS, before 5.6) get a component-by-component walk with
/// `openat(O_NOFOLLOW)`, which refuses every symlink. Callers then read, hash, serve or hand
/// to a child process only the returned descriptor, never the path.
///
/// A file with `st_nlink > 1` is refused unless `allow_hard_links`: a hard link placed in a
/// granted directory is indistinguishable from the file it names (it may be a secret).
pub fn open_beneath(root: &Path, rel: &str, allow_hard_links: bool) -> Result<std::fs::File, OpenError> {
    use std::{ffi::CString, os::fd::FromRawFd, os::unix::ffi::OsStrExt};
    let rel = rel.trim_end_matches('/');
    if rel.is_empty() || rel.contains('\0') {
        return Err(OpenError::Missing);
    }
    if Path::new(rel).components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(OpenError::Outside);
    }
    let root_c = CString::new(root.as_os_str().as_bytes()).map_err(|_| OpenError::Outside)?;
    // SAFETY: plain syscalls on NUL-terminated strings; every returned fd is owned below.
    let dir = unsafe { libc::open(root_c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if dir < 0 {
        return Err(classify(std::io::Error::last_os_error()));
    }
    let dir = unsafe { std::os::fd::OwnedFd::from_raw_fd(dir) };
    let rel_c = CString::new(rel).map_err(|_| OpenError::Outside)?;
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    let fd = unsafe {
        use std::os::fd::AsRawFd;
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            rel_c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    let fd = if fd >= 0 {
        fd as i32
    } else {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(classify(e));
        }
        walk_nofollow(dir, rel, flags)?
    };
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.is_file() {
        return Err(OpenError::Missing);
    }
    // Reads block normally again (O_NONBLOCK only kept a FIFO from hanging the open).
    use std::os::fd::AsRawFd;
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, libc::O_RDONLY) };
    if !allow_hard_links && std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(OpenError::HardLink);
    }
    Ok(file)
}

/// The pre-openat2 fallback: each directory component with `O_NOFOLLOW`, the
/// file with `O_NOFOLLOW`, each relative to the previous descriptor (no symlink is followed:
/// `ELOOP`). Not `O_PATH` for the directories: with it, `O_NOFOLLOW` opens the link itself.
fn walk_nofollow(root: std::os::fd::OwnedFd, rel: &str, flags: i32) -> Result<i32, OpenError> {
    use std::{
        ffi::CString,
        os::fd::{AsRawFd, FromRawFd, OwnedFd},
    };
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let mut dir = root;
    for (i, part) in parts.iter().enumerate() {
        let c = CString::new(*part).map_err(|_| OpenError::Outside)?;
        let last = i + 1 == parts.len();
        // Directories without O_DIRECTORY: with it a symlink gives ENOTDIR, not ELOOP; the
        // next openat on a non-directory fails with ENOTDIR (missing) anyway.
        let f =
            if last { flags | libc::O_NOFOLLOW } else { libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK };
        // SAFETY: openat on an owned directory fd and a NUL-terminated name.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), f) };
        if fd < 0 {
            return Err(classify(std::io::Error::last_os_error()));
        }
        if last {
            return Ok(fd);
        }
        dir = unsafe { OwnedFd::from_raw_fd(fd) };
    }
    Err(OpenError::Missing)
}

/// Where a child started with [`pass_to_child`] finds the file.
pub const CHILD_FILE: &str = "/proc/self/fd/3";

/// Hand an open file to a child process as its fd 3 (the child opens [`CHILD_FILE`]), so the
/// child reads exactly the file the parent opened (and hashed) and never resolves the
/// original path again. `file` must stay open until the child has started.
pub fn pass_to_child(cmd: &mut tokio::process::Command, file: &std::fs::File) -> &'static Path {
    use std::os::fd::AsRawFd;
    let raw = file.as_raw_fd();
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself would keep close-on-exec: clear it instead.
            let r = if raw == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(raw, 3) };
            if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
        });
    }
    Path::new(CHILD_FILE)
}

/// The same file as a path for code in this process that wants one (`/proc/self/fd/N`: the
/// kernel's handle of the open file, not the original name).
pub fn fd_path(file: &std::fs::File) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
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
    fn open_beneath_cases() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().canonicalize().unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(base.join("out")).unwrap();
        std::fs::write(root.join("sub/a.md"), "inside").unwrap();
        std::fs::write(base.join("out/a.md"), "secret").unwrap();
        std::os::unix::fs::symlink(root.join("sub/a.md"), root.join("link-in")).unwrap();
        std::os::unix::fs::symlink("sub/a.md", root.join("rel-in")).unwrap();
        std::os::unix::fs::symlink(base.join("out"), root.join("dir-out")).unwrap();
        std::os::unix::fs::symlink("../out/a.md", root.join("rel-out")).unwrap();
        std::fs::hard_link(base.join("out/a.md"), root.join("hard.md")).unwrap();
        let read = |rel: &str| {
            open_beneath(&root, rel, false).map(|f| std::io::read_to_string(f).unwrap()).map_err(|e| format!("{e:?}"))
        };
        assert_eq!(read("sub/a.md").unwrap(), "inside");
        assert_eq!(read("rel-in").unwrap(), "inside");
        for out in ["dir-out/a.md", "rel-out", "../out/a.md", "sub/../../out/a.md", "/etc/passwd", "link-in"] {
            // An absolute symlink is refused by RESOLVE_BENEATH even when it points inside
            // (stored resource paths are canonical, so they contain no symlink).
            let e = read(out).unwrap_err();
            assert!(e.starts_with("Outside"), "{out}: {e}");
        }
        assert!(read("sub").unwrap_err().starts_with("Missing"));
        assert!(read("sub/none.md").unwrap_err().starts_with("Missing"));
        assert!(read("hard.md").unwrap_err().starts_with("HardLink"));
        assert_eq!(std::io::read_to_string(open_beneath(&root, "hard.md", true).unwrap()).unwrap(), "secret");
        // The pre-openat2 walk refuses every symlink.
        let dir = |p: &Path| {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
        };
        let fd = walk_nofollow(dir(&root), "sub/a.md", libc::O_RDONLY | libc::O_CLOEXEC).unwrap();
        unsafe { libc::close(fd) };
        for out in ["dir-out/a.md", "rel-in", "rel-out"] {
            assert!(matches!(walk_nofollow(dir(&root), out, libc::O_RDONLY), Err(OpenError::Outside)), "{out}");
        }
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
