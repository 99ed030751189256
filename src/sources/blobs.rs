//! Upload storage by content hash: a file's bytes live once, at
//! [`upload_blob_path`](super::upload_blob_path) of their `sha256:<hex>`, written through a
//! temporary file and renamed into place (a reader never sees half a blob).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use uuid::Uuid;

/// A blob being written: bytes go to a temporary file and into the hash as they arrive.
pub struct BlobWriter {
    uploads_dir: PathBuf,
    tmp: PathBuf,
    file: tokio::fs::File,
    hasher: Sha256,
    size: u64,
}

impl BlobWriter {
    /// Start a blob under `uploads_dir` (its temporary file in `uploads_dir/tmp`).
    pub async fn create(uploads_dir: &Path) -> std::io::Result<Self> {
        let tmp_dir = uploads_dir.join("tmp");
        tokio::fs::create_dir_all(&tmp_dir).await?;
        let tmp = tmp_dir.join(Uuid::new_v4().to_string());
        let file = tokio::fs::File::create(&tmp).await?;
        Ok(BlobWriter { uploads_dir: uploads_dir.to_path_buf(), tmp, file, hasher: Sha256::new(), size: 0 })
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub async fn write(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        self.size += chunk.len() as u64;
        self.hasher.update(chunk);
        self.file.write_all(chunk).await
    }

    /// Move the bytes to their content-addressed place: `(size, "sha256:<hex>")`.
    pub async fn finish(mut self) -> std::io::Result<(u64, String)> {
        if let Err(e) = self.file.flush().await {
            self.discard().await;
            return Err(e);
        }
        let sha = format!("sha256:{}", hex::encode(self.hasher.finalize()));
        let dest = super::upload_blob_path(&self.uploads_dir, &sha);
        tokio::fs::create_dir_all(dest.parent().expect("blob path has a parent")).await?;
        tokio::fs::rename(&self.tmp, &dest).await?;
        Ok((self.size, sha))
    }

    /// Give up: remove the temporary file.
    pub async fn discard(self) {
        drop(self.file);
        let _ = tokio::fs::remove_file(&self.tmp).await;
    }
}

/// Store `bytes` by their hash: `"sha256:<hex>"`.
pub async fn store(uploads_dir: &Path, bytes: &[u8]) -> std::io::Result<String> {
    let mut w = BlobWriter::create(uploads_dir).await?;
    if let Err(e) = w.write(bytes).await {
        w.discard().await;
        return Err(e);
    }
    Ok(w.finish().await?.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn blobs_land_at_their_hash_and_leave_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let sha = store(d.path(), b"hello").await.unwrap();
        assert_eq!(sha, "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
        assert_eq!(std::fs::read(super::super::upload_blob_path(d.path(), &sha)).unwrap(), b"hello");
        assert_eq!(std::fs::read_dir(d.path().join("tmp")).unwrap().count(), 0);
    }
}
