//! Per-tenant settings (`tenant_setting`): today only "external parsing upload (MinerU)".
//! A missing row means every setting is at its default (off).

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::TenantTx;

#[derive(Clone, Debug, Default, PartialEq, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct TenantSettings {
    /// Scanned PDFs and images of this tenant may be sent to MinerU for parsing.
    pub external_parsing_upload: bool,
    pub updated_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The settings of the transaction's tenant (RLS picks the row).
pub async fn get(tx: &mut TenantTx) -> sqlx::Result<TenantSettings> {
    let tenant = tx.tenant_id();
    let row = sqlx::query_as!(
        TenantSettings,
        r#"select external_parsing_upload, updated_at as "updated_at: _" from tenant_setting where tenant_id = $1"#,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.unwrap_or_default())
}

/// Turn external parsing upload on or off. Row-level security lets only the tenant's
/// owners and admins write (callers check the role first for a clear error).
pub async fn set_external_parsing_upload(
    conn: &mut PgConnection,
    tenant: Uuid,
    by: Uuid,
    enabled: bool,
) -> sqlx::Result<TenantSettings> {
    sqlx::query_as!(
        TenantSettings,
        r#"insert into tenant_setting (tenant_id, external_parsing_upload, updated_by) values ($1, $2, $3)
         on conflict (tenant_id) do update set external_parsing_upload = excluded.external_parsing_upload,
             updated_by = excluded.updated_by
         returning external_parsing_upload, updated_at as "updated_at: _""#,
        tenant,
        enabled,
        by,
    )
    .fetch_one(conn)
    .await
}
