//! A KB's LightRAG endpoint: the operator's URL allow-list, the API key sealed at rest, and
//! the SQL of `rag_binding`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::db::TenantTx;

use super::client::{LightRag, RagError};
use crate::{
    config::RagConfig,
    error::{AppError, AppResult},
    platform::SecretString,
};

#[derive(Debug, Clone)]
pub struct Binding {
    pub id: Uuid,
    pub kb_id: Uuid,
    pub url: String,
    pub label: Option<String>,
    pub api_key_cipher: Option<Vec<u8>>,
    pub active: bool,
    pub lightrag_version: Option<String>,
    pub reachable: Option<bool>,
    pub last_error_code: Option<String>,
    pub last_error_message: Option<String>,
    pub checked_at: Option<DateTime<Utc>>,
}

/// What the API and pages show of a binding: never the key, only whether one is set.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindingView {
    pub kb_id: Uuid,
    pub url: String,
    pub label: Option<String>,
    pub api_key_set: bool,
    pub version: Option<String>,
    pub reachable: Option<bool>,
    pub checked_at: Option<DateTime<Utc>>,
    pub error: Option<super::ErrorView>,
}

impl Binding {
    pub fn view(&self) -> BindingView {
        BindingView {
            kb_id: self.kb_id,
            url: self.url.clone(),
            label: self.label.clone(),
            api_key_set: self.api_key_cipher.is_some(),
            version: self.lightrag_version.clone(),
            reachable: self.reachable,
            checked_at: self.checked_at,
            error: self
                .last_error_code
                .clone()
                .map(|code| super::ErrorView { code, message: self.last_error_message.clone().unwrap_or_default() }),
        }
    }

    /// The API key, opened.
    pub fn key(&self, cfg: &RagConfig) -> Result<Option<SecretString>, RagError> {
        self.api_key_cipher.as_ref().map(|sealed| open_key(cfg, self.kb_id, sealed)).transpose()
    }

    /// A client for this endpoint, with its key opened.
    pub fn client(&self, cfg: &RagConfig) -> Result<LightRag, RagError> {
        Ok(LightRag::new(&self.url, self.key(cfg)?, cfg.timeout)?.with_max_body(cfg.max_body_bytes))
    }
}

/// The associated data a KB's sealed key is bound to.
fn aad(kb_id: Uuid) -> String {
    format!("mnote:kb:{kb_id}:lightrag_api_key:v1")
}

pub fn seal_key(cfg: &RagConfig, kb_id: Uuid, key: &str) -> AppResult<Vec<u8>> {
    let master = cfg
        .secret_key
        .as_ref()
        .ok_or_else(|| AppError::Upstream("the server has no secret key (MNOTE_SECRET_KEY) to store API keys with".into()))?;
    Ok(master.seal(key.as_bytes(), aad(kb_id).as_bytes()))
}

fn open_key(cfg: &RagConfig, kb_id: Uuid, sealed: &[u8]) -> Result<SecretString, RagError> {
    let unusable = |m: &str| RagError { kind: super::client::RagErrorKind::Unauthorized, message: m.to_string() };
    let master = cfg.secret_key.as_ref().ok_or_else(|| unusable("the server has no secret key to open the stored API key"))?;
    let plain = master.open(sealed, aad(kb_id).as_bytes()).map_err(|e| unusable(&e.to_string()))?;
    String::from_utf8(plain).map(SecretString::new).map_err(|_| unusable("the stored API key is not text"))
}

/// `url` normalised, if it lies under one of the operator's allowed prefixes
/// (`MNOTE_RAG_ALLOWED_URLS`). Userinfo, query and fragment are refused.
pub fn allowed_url(cfg: &RagConfig, url: &str) -> AppResult<String> {
    use crate::platform::http::{AllowList, allow_listed};
    allow_listed(&cfg.allowed_urls, url).map_err(|e| {
        AppError::invalid(
            "url",
            match e {
                AllowList::Malformed => "an http(s) URL without user, query or fragment",
                AllowList::NoneAllowed => {
                    "no LightRAG endpoint is allowed on this server (the operator sets MNOTE_RAG_ALLOWED_URLS)"
                }
                AllowList::NotAllowed => "this URL is not among the LightRAG endpoints the operator allows",
            },
        )
    })
}

pub async fn active(tx: &mut TenantTx, kb_id: Uuid) -> sqlx::Result<Option<Binding>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Binding,
        r#"select id, kb_id, url, label, api_key_cipher, active, lightrag_version, reachable, last_error_code,
             last_error_message, checked_at as "checked_at: _"
         from rag_binding where tenant_id = $2 and kb_id = $1 and active"#,
        kb_id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await
}

/// Every binding of the tenant visible in this transaction (retired ones included).
pub async fn all(tx: &mut TenantTx) -> sqlx::Result<Vec<Binding>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Binding,
        r#"select id, kb_id, url, label, api_key_cipher, active, lightrag_version, reachable, last_error_code,
             last_error_message, checked_at as "checked_at: _"
         from rag_binding where tenant_id = $1 order by created_at"#,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// The live bindings of the given KBs the caller can see.
pub async fn active_for(tx: &mut TenantTx, kb_ids: &[Uuid]) -> sqlx::Result<Vec<Binding>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        Binding,
        r#"select id, kb_id, url, label, api_key_cipher, active, lightrag_version, reachable, last_error_code,
             last_error_message, checked_at as "checked_at: _"
         from rag_binding where tenant_id = $2 and active and kb_id = any($1) order by kb_id"#,
        kb_ids,
        tenant,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Bind `kb_id` to `url`. The same URL keeps its documents (only label and key change);
/// another URL retires the old binding, whose documents the sync worker then deletes.
pub async fn put(
    conn: &mut crate::db::TenantTx,
    tenant: Uuid,
    kb_id: Uuid,
    url: &str,
    label: Option<&str>,
    key_cipher: Option<Vec<u8>>,
    by: Uuid,
) -> sqlx::Result<Binding> {
    if let Some(b) = active(conn, kb_id).await? {
        if b.url == url {
            let cipher = key_cipher.or(b.api_key_cipher.clone());
            return sqlx::query_as!(
                Binding,
                r#"update rag_binding set label = $2, api_key_cipher = $3 where tenant_id = $4 and id = $1
                 returning id, kb_id, url, label, api_key_cipher, active, lightrag_version, reachable,
                     last_error_code, last_error_message, checked_at as "checked_at: _""#,
                b.id,
                label,
                cipher,
                tenant,
            )
            .fetch_one(&mut **conn)
            .await;
        }
        retire(conn, kb_id).await?;
    }
    sqlx::query_as!(
        Binding,
        r#"insert into rag_binding (tenant_id, id, kb_id, url, label, api_key_cipher, created_by)
         values ($1, $2, $3, $4, $5, $6, $7)
         returning id, kb_id, url, label, api_key_cipher, active, lightrag_version, reachable, last_error_code,
             last_error_message, checked_at as "checked_at: _""#,
        tenant,
        Uuid::new_v4(),
        kb_id,
        url,
        label,
        key_cipher,
        by,
    )
    .fetch_one(&mut **conn)
    .await
}

/// Unbind: the binding stays (inactive) until its documents are deleted.
pub async fn retire(tx: &mut TenantTx, kb_id: Uuid) -> sqlx::Result<bool> {
    let tenant = tx.tenant_id();
    Ok(sqlx::query!("update rag_binding set active = false where tenant_id = $2 and kb_id = $1 and active", kb_id, tenant)
        .execute(&mut **tx)
        .await?
        .rows_affected()
        > 0)
}

/// Remember what the last contact with the endpoint showed.
pub async fn record_check(tx: &mut TenantTx, id: Uuid, outcome: Result<Option<&str>, &RagError>) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    let (reachable, version, code, message) = match outcome {
        Ok(v) => (true, v, None, None),
        Err(e) => (false, None, Some(e.code()), Some(e.message.as_str())),
    };
    sqlx::query!(
        "update rag_binding set reachable = $2, lightrag_version = coalesce($3, lightrag_version),
             last_error_code = $4, last_error_message = $5, checked_at = now() where tenant_id = $6 and id = $1",
        id,
        reachable,
        version,
        code,
        message,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn delete(tx: &mut TenantTx, id: Uuid) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!("delete from rag_binding where tenant_id = $2 and id = $1", id, tenant).execute(&mut **tx).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(allowed: &[&str]) -> RagConfig {
        RagConfig { allowed_urls: allowed.iter().map(|s| s.to_string()).collect(), ..RagConfig::for_tests() }
    }

    #[test]
    fn only_urls_under_an_allowed_prefix_pass() {
        let c = cfg(&["http://127.0.0.1:9621", "https://rag.example.com/tenant-a/"]);
        assert_eq!(allowed_url(&c, "http://127.0.0.1:9621").unwrap(), "http://127.0.0.1:9621");
        assert_eq!(allowed_url(&c, "https://rag.example.com/tenant-a/v1").unwrap(), "https://rag.example.com/tenant-a/v1");
        for bad in [
            "http://127.0.0.1:96210",
            "http://127.0.0.1:9621@evil.example/",
            "http://user:pw@127.0.0.1:9621/",
            "https://rag.example.com/tenant-b/",
            "https://rag.example.com/tenant-a/../tenant-b",
            "http://127.0.0.1:9621/?x=1",
            "file:///etc/passwd",
            "http://169.254.169.254/latest/meta-data",
        ] {
            assert!(allowed_url(&c, bad).is_err(), "{bad} must be refused");
        }
        assert!(allowed_url(&cfg(&[]), "http://127.0.0.1:9621").is_err(), "an empty allow-list allows nothing");
    }

    #[test]
    fn keys_are_sealed_to_their_kb() {
        let c = RagConfig::for_tests();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let sealed = seal_key(&c, a, "sk-secret").unwrap();
        assert_eq!(open_key(&c, a, &sealed).unwrap().expose(), "sk-secret");
        assert!(open_key(&c, b, &sealed).is_err(), "a key copied to another KB does not open");
    }
}
