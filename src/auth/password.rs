//! argon2id password hashing, off the async runtime.

use argon2::{
    Argon2,
    password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash},
};

use crate::error::{AppError, AppResult};

pub const MIN_PASSWORD_LEN: usize = 10;

pub fn validate_new_password(pw: &str) -> AppResult<()> {
    if pw.chars().count() < MIN_PASSWORD_LEN {
        return Err(AppError::invalid("password", format!("password must be at least {MIN_PASSWORD_LEN} characters")));
    }
    Ok(())
}

pub async fn hash(password: String) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| anyhow::anyhow!("hashing password: {e}"))
    })
    .await?
}

/// Verify a password. With `hash = None` (unknown account) a dummy hash is checked anyway so
/// the response time does not reveal whether the account exists.
pub async fn verify(password: String, hash: Option<String>) -> anyhow::Result<bool> {
    const DUMMY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$2IVQsVWmRWQ7T9AV5mJgsDkLq/JZfFgW26Wc98SbwPU";
    let known = hash.is_some();
    let hash = hash.unwrap_or_else(|| DUMMY.to_string());
    tokio::task::spawn_blocking(move || {
        let parsed = PasswordHash::new(&hash).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
        let ok = Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok();
        Ok(ok && known)
    })
    .await?
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn hash_and_verify() {
        let h = super::hash("correct horse battery".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(super::verify("correct horse battery".into(), Some(h.clone())).await.unwrap());
        assert!(!super::verify("wrong".into(), Some(h)).await.unwrap());
        assert!(!super::verify("anything".into(), None).await.unwrap());
    }
}
