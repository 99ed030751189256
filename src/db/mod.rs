//! Database access: pools, migrations, the app-role safety check and tenant-scoped
//! transactions. SQL for each feature lives in that feature's `queries.rs`.

pub mod notify;
pub mod read;
mod tenant_tx;

use std::time::Duration;

use anyhow::{Context, bail};
use sqlx::{PgConnection, PgPool, postgres::PgPoolOptions};

pub use tenant_tx::{Scope, TenantTx};

/// An enum stored in a `text` column: bound and read as its name (`as_str`, `FromStr`), so
/// code compares enums, not strings. In the query macros: `col as "col: _"`, `value as _`.
macro_rules! text_column {
    ($t:ty) => {
        impl sqlx::Type<sqlx::Postgres> for $t {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::Type<sqlx::Postgres>>::type_info()
            }
            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <&str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $t {
            fn decode(v: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                Ok(<&str as sqlx::Decode<sqlx::Postgres>>::decode(v)?.parse()?)
            }
        }

        impl sqlx::Encode<'_, sqlx::Postgres> for $t {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<sqlx::Postgres>>::encode(self.as_str(), buf)
            }
        }
    };
}
pub(crate) use text_column;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Let the rest of this transaction see (`true`) or not see deleted KBs and removed sources
/// (policies `kb_not_deleted`, `source_not_deleted`).
pub async fn include_deleted(conn: &mut PgConnection, on: bool) -> sqlx::Result<()> {
    sqlx::query!("select set_config('app.deleted', $1, true)", if on { "include" } else { "" }).fetch_one(conn).await?;
    Ok(())
}

pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .with_context(|| format!("connecting to {}", url.split('@').next_back().unwrap_or("")))
}

/// Run the migrations as the owner role, then grant the app role exactly the DML it needs.
pub async fn migrate(owner: &PgPool, app_role: Option<&str>) -> anyhow::Result<()> {
    accept_rewritten_migrations(owner).await?;
    MIGRATOR.run(owner).await.context("running migrations")?;
    if let Some(role) = app_role {
        grant_app_role(owner, role).await?;
    }
    Ok(())
}

/// Migrations whose text was changed after they shipped, with the SHA-384 they had: a
/// database that applied the old text takes the new checksum instead of failing with
/// "previously applied but has been modified". Only changes with no effect on an existing
/// schema belong here.
const REWRITTEN_MIGRATIONS: &[(i64, &str)] = &[
    // The foundation no longer creates pg_trgm (nothing uses it; the portable Postgres build
    // does not ship it). Where it was created it stays, unused.
    (20261129000001, "8e2617822d6b11c86cc0e07793045289b28eca7cece02ebd5edb4fe1d82e33980cbe4f4814b45d97c9b4f7173cb328e4"),
];

async fn accept_rewritten_migrations(owner: &PgPool) -> anyhow::Result<()> {
    let has_table =
        sqlx::query_scalar!(r#"select to_regclass('_sqlx_migrations') is not null as "exists!""#).fetch_one(owner).await?;
    if !has_table {
        return Ok(());
    }
    for (version, old_sha384) in REWRITTEN_MIGRATIONS {
        let Some(m) = MIGRATOR.iter().find(|m| m.version == *version) else { continue };
        let old = hex_decode(old_sha384).context("REWRITTEN_MIGRATIONS holds a bad checksum")?;
        let n = sqlx::query!(
            "update _sqlx_migrations set checksum = $1 where version = $2 and checksum = $3",
            m.checksum.as_ref(),
            version,
            &old,
        )
        .execute(owner)
        .await?
        .rows_affected();
        if n > 0 {
            tracing::info!(version, "migration {version} was rewritten (no schema change); its checksum is updated");
        }
    }
    Ok(())
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

/// The app role gets DML on the tables (RLS still applies) and nothing else: no ownership,
/// hence no `ALTER TABLE … DISABLE ROW LEVEL SECURITY`. The audit log is append-only: INSERT
/// and SELECT on `audit_event`, its old rows purged only through `mnote_audit_purge` (a
/// SECURITY DEFINER function that keeps at least 30 days).
pub async fn grant_app_role(owner: &PgPool, role: &str) -> anyhow::Result<()> {
    let exists = sqlx::query_scalar!(r#"select exists (select 1 from pg_roles where rolname = $1) as "exists!""#, role)
        .fetch_one(owner)
        .await?;
    if !exists {
        bail!("app role {role:?} does not exist");
    }
    let role = quote_ident(role);
    for stmt in [
        format!("grant usage on schema public, tower_sessions to {role}"),
        format!("grant select, insert, update, delete on all tables in schema public to {role}"),
        format!("grant select, insert, update, delete on all tables in schema tower_sessions to {role}"),
        format!("grant usage, select on all sequences in schema public to {role}"),
        format!("revoke all on table _sqlx_migrations from {role}"),
        format!("grant select on table _sqlx_migrations to {role}"),
        format!("revoke update, delete, truncate on table audit_event from {role}"),
        format!("grant execute on function mnote_audit_purge(integer) to {role}"),
    ] {
        // dynamic SQL: GRANT takes the role as an identifier, not a parameter.
        sqlx::query(&stmt).execute(owner).await.with_context(|| stmt.clone())?;
    }
    Ok(())
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// The user name in a postgres URL (`postgres://user:pw@host/db`).
pub fn url_user(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let (creds, _) = rest.rsplit_once('@')?;
    let user = creds.split(':').next()?;
    (!user.is_empty()).then(|| user.to_string())
}

/// The stable code of [`refuse_citus`]'s error (CLI output, logs, docs).
pub const CITUS_UNSUPPORTED: &str = "citus_unsupported";

/// `mnote serve` and `mnote migrate` refuse a database with the `citus` extension. Citus
/// re-creates `AS RESTRICTIVE` row-level-security policies as permissive ones on its
/// workers, so the rules that narrow a tenant's access would widen it instead; it also
/// rejects policies with subqueries and never forwards the session settings that carry the
/// tenant. Isolation is this product's first promise, so the distributed engine is refused
/// outright (deploy/README.md).
pub async fn refuse_citus(pool: &PgPool) -> anyhow::Result<()> {
    let citus = sqlx::query_scalar!(r#"select extversion::text as "version!" from pg_extension where extname = 'citus'"#)
        .fetch_optional(pool)
        .await
        .context("reading the database's extensions")?;
    if let Some(version) = citus {
        bail!(
            "{CITUS_UNSUPPORTED}: the database has the citus extension ({version}). MNote does not \
             support Citus: its workers turn restrictive row-level-security policies into permissive \
             ones, so one team could read another team's data. Use a plain PostgreSQL (with pgvector); \
             see deploy/README.md"
        );
    }
    Ok(())
}

/// `mnote serve` refuses to run with a role that could bypass row-level security.
pub async fn ensure_app_role_is_confined(pool: &PgPool) -> anyhow::Result<()> {
    let me = sqlx::query!(
        r#"select current_user::text as "user!", rolsuper as "superuser!", rolbypassrls as "bypass!"
           from pg_roles where rolname = current_user"#
    )
    .fetch_one(pool)
    .await?;
    let (user, superuser, bypass) = (me.user, me.superuser, me.bypass);
    if superuser || bypass {
        bail!(
            "refusing to serve: database role {user:?} is superuser or has BYPASSRLS; \
             DATABASE_URL must use a confined app role (see README)"
        );
    }
    let owned = sqlx::query_scalar!(
        r#"select c.relname::text as "name!" from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname in ('public', 'tower_sessions') and c.relkind = 'r'
           and pg_get_userbyid(c.relowner) = current_user"#,
    )
    .fetch_all(pool)
    .await?;
    if !owned.is_empty() {
        bail!(
            "refusing to serve: database role {user:?} owns tables ({}) and so could disable \
             row-level security; run migrations with MNOTE_MIGRATION_DATABASE_URL as a separate owner role",
            owned.join(", ")
        );
    }
    Ok(())
}

/// True when every migration in the binary has been applied (for /readyz and serve).
pub async fn is_migrated(pool: &PgPool) -> anyhow::Result<bool> {
    let applied =
        sqlx::query_scalar!("select version from _sqlx_migrations where success order by version").fetch_all(pool).await?;
    Ok(MIGRATOR.iter().filter(|m| m.migration_type.is_up_migration()).all(|m| applied.contains(&m.version)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn url_user_parses() {
        assert_eq!(super::url_user("postgres://app:pw@h:1/db").as_deref(), Some("app"));
        assert_eq!(super::url_user("postgres://app@h/db").as_deref(), Some("app"));
        assert_eq!(super::url_user("postgres://h/db"), None);
    }
}
