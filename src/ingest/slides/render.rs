//! Drawing slides: the deck converted to PDF by LibreOffice (`soffice --headless
//! --convert-to pdf`) through the crate's child-process supervisor — its own throwaway
//! profile (`-env:UserInstallation`), a timeout and the parse memory limit — once per file
//! version (cached by hash beside the page images), then each slide is a PDF page the viewer's
//! pdfium renderer draws like any other.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::Config;
use crate::platform::supervise::{SuperviseError, Supervised};

/// Pixels per point of a drawn slide.
pub const SCALE: f64 = 2.0;
/// The scale of a slide in the viewer's strip (360 px across a 16:9 slide: sharp at 2× density).
pub const THUMB_SCALE: f64 = 0.5;
/// A conversion may take this long (a cold LibreOffice start is most of it).
pub const TIMEOUT: Duration = Duration::from_secs(180);

/// Where the PDF of a deck version is cached.
pub fn pdf_path(data_dir: &Path, sha256: &str) -> PathBuf {
    let hex: String = sha256.trim_start_matches("sha256:").chars().filter(|c| c.is_ascii_hexdigit()).collect();
    let shard = hex.get(..2).unwrap_or("00").to_string();
    data_dir.join("cache").join("slides").join(shard).join(format!("{hex}.pdf"))
}

/// The deck's PDF, converted now if it is not cached yet. `src`: the open original.
pub async fn pdf_of(config: &Config, soffice: &Path, src: std::fs::File, sha256: &str) -> Result<PathBuf, String> {
    let out = pdf_path(&config.data_dir, sha256);
    if out.is_file() {
        return Ok(out);
    }
    let dir = out.parent().ok_or("the cache path has no parent")?;
    tokio::fs::create_dir_all(dir).await.map_err(|e| format!("cache directory: {e}"))?;
    let work = WorkDir::new(dir).await?;
    let input = work.path().join("deck.pptx");
    let mut reader = tokio::fs::File::from_std(src);
    let mut writer = tokio::fs::File::create(&input).await.map_err(|e| e.to_string())?;
    tokio::io::copy(&mut reader, &mut writer).await.map_err(|e| format!("copying the original: {e}"))?;
    drop(writer);
    let pdf = convert(config, soffice, &work, &input, "pdf").await?;
    tokio::fs::rename(&pdf, &out).await.map_err(|e| e.to_string())?;
    Ok(out)
}

/// `input` (inside `work`) converted by LibreOffice to `to` (`pdf`, `docx`, `pptx`), in `work`:
/// its own profile there, the parse memory limit, a timeout.
pub async fn convert(config: &Config, soffice: &Path, work: &WorkDir, input: &Path, to: &str) -> Result<PathBuf, String> {
    let mut cmd = tokio::process::Command::new(soffice);
    cmd.arg(format!("-env:UserInstallation=file://{}", work.path().join("profile").display()))
        .args(["--headless", "--norestore", "--nologo", "--convert-to", to, "--outdir"])
        .arg(work.path())
        .arg(input)
        .env("HOME", work.path());
    let timeout = TIMEOUT.min(config.parse_timeout.max(Duration::from_secs(30)));
    let run = Supervised::new(cmd).memory_limit(config.parse_memory_bytes).timeout(timeout).discard_stdout().run().await;
    match run {
        Err(SuperviseError::Timeout(t)) => return Err(format!("LibreOffice took longer than {t:?}")),
        Err(e) => return Err(format!("starting LibreOffice: {e}")),
        Ok(child) if !child.status.success() => {
            return Err(format!("LibreOffice failed ({}): {}", child.status, child.stderr_tail(300)));
        }
        Ok(_) => {}
    }
    let out = input.with_extension(to);
    if !out.is_file() {
        return Err(format!("LibreOffice wrote no .{to} file"));
    }
    Ok(out)
}

/// A conversion's directory (input, profile, output), removed when it is dropped.
pub struct WorkDir(PathBuf);

impl WorkDir {
    /// A new directory inside `parent`.
    pub async fn new(parent: &Path) -> Result<WorkDir, String> {
        let w = WorkDir(parent.join(format!(".soffice-{}", uuid::Uuid::new_v4().simple())));
        tokio::fs::create_dir_all(w.path()).await.map_err(|e| format!("work directory: {e}"))?;
        Ok(w)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
