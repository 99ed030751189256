//! `mnote admin bootstrap`, `user add`, `token create`, `tenant roots`, `grant add`, `kb create`.

use std::{io::Read, path::Path};

use anyhow::{Context, bail};

use super::{TenantActor, TenantRootsCommand, app_err};
use crate::{
    audit::Action,
    auth::ClientIp,
    auth::directory::{self as tq, Role},
    auth::tokens,
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
    grants::{self, Grantee, Permission},
    kbs, tenants,
};

/// Where an operator's command comes from, in the audit log.
fn cli() -> ClientIp {
    ClientIp("cli".into())
}

fn read_password(stdin: bool) -> anyhow::Result<Option<String>> {
    if !stdin {
        return Ok(None);
    }
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).context("reading the password from stdin")?;
    let pw = s.lines().next().unwrap_or("").to_string();
    if pw.is_empty() {
        bail!("empty password on stdin");
    }
    Ok(Some(pw))
}

/// `mnote admin bootstrap`: the tenant and its owner, created if missing.
pub async fn bootstrap(tenant: &str, email: &str, password_stdin: bool) -> anyhow::Result<()> {
    let pw = read_password(password_stdin)?.unwrap_or_default();
    let (_, pool) = app_pool().await?;
    let b = tenants::bootstrap(&pool, tenant, email, &pw).await.map_err(app_err)?;
    println!(
        "tenant {tenant}: {}; owner {email}: {}",
        if b.created_tenant { "created" } else { "exists" },
        if b.created_user { "created" } else { "exists" }
    );
    Ok(())
}

/// `mnote user add`.
pub async fn add_user(tenant: &str, email: &str, role: Role, password_stdin: bool) -> anyhow::Result<()> {
    let pw = read_password(password_stdin)?;
    let (_, pool) = app_pool().await?;
    let tenant_id = tq::tenant_by_name(&pool, tenant).await?.with_context(|| format!("no tenant named {tenant:?}"))?;
    let (_, created) = tenants::add_user(&pool, tenant_id, email, role, pw.as_deref()).await.map_err(app_err)?;
    let account = if created { "created," } else { "existing account (its password unchanged)," };
    println!("{email}: {account} {} of {tenant}", role.as_str());
    Ok(())
}

/// `mnote token create`: the token is the last line of standard output.
pub async fn create_token(tenant: &str, email: &str, name: &str) -> anyhow::Result<()> {
    let (_, pool) = app_pool().await?;
    let who = act_as(&pool, tenant, Some(email)).await?;
    let mut tx = TenantTx::begin(&pool, who.tenant_id, Scope::User(who.user_id)).await?;
    let (rec, plain) = tokens::create(&mut tx, who.tenant_id, who.user_id, name).await?;
    who.audit(&mut tx, &cli(), Action::TokenCreate, format!("token:{} {}", rec.id, rec.name), "mnote token create").await?;
    tx.commit().await?;
    println!("token {} ({}) for {email} in {tenant}; it is shown only once:", rec.id, rec.name);
    println!("{plain}");
    Ok(())
}

/// `mnote tenant roots add|remove|list`: the operator's per-tenant grantable roots, written
/// in the background scope (the only scope the table's policies let write).
pub async fn tenant_roots(command: TenantRootsCommand) -> anyhow::Result<()> {
    let (cfg, pool) = app_pool().await?;
    let tenant_of = async |name: &str| -> anyhow::Result<uuid::Uuid> {
        tq::tenant_by_name(&pool, name).await?.with_context(|| format!("no tenant named {name:?}"))
    };
    match command {
        TenantRootsCommand::Add { tenant, path } => {
            let id = tenant_of(&tenant).await?;
            let abs = std::path::absolute(&path).with_context(|| format!("{}", path.display()))?;
            let (root, added) = grants::roots::add(&pool, &cfg, id, &abs.to_string_lossy()).await.map_err(app_err)?;
            println!("tenant {tenant}: root {root} {}", if added { "added" } else { "exists" });
        }
        TenantRootsCommand::Remove { tenant, path } => {
            let id = tenant_of(&tenant).await?;
            let abs = std::path::absolute(&path).with_context(|| format!("{}", path.display()))?;
            let removed = grants::roots::remove(&pool, id, &abs.to_string_lossy()).await.map_err(app_err)?;
            if !removed {
                bail!("tenant {tenant} has no root {}", abs.display());
            }
            println!("tenant {tenant}: root {} removed", abs.display());
        }
        TenantRootsCommand::List { tenant } => {
            let id = tenant_of(&tenant).await?;
            for r in grants::roots::list(&pool, id).await.map_err(app_err)? {
                println!("{r}");
            }
        }
    }
    Ok(())
}

/// `mnote grant add`.
pub async fn add_grant(
    who: &TenantActor,
    path: &Path,
    email: Option<String>,
    all_members: bool,
    permission: &str,
) -> anyhow::Result<()> {
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, &who.tenant, who.as_email.as_deref()).await?;
    let abs = std::path::absolute(path).with_context(|| format!("{}", path.display()))?;
    let grantee = if all_members { Grantee::AllMembers } else { Grantee::Email(email.unwrap_or_default()) };
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    let (g, created) =
        grants::create(&mut tx, &cfg, &actor, &abs.to_string_lossy(), grantee, Permission::parse(permission).map_err(app_err)?)
            .await
            .map_err(app_err)?;
    if created {
        let detail = format!("{} to {} (mnote grant add)", g.permission, g.user_email.as_deref().unwrap_or("all members"));
        actor.audit(&mut tx, &cli(), Action::GrantAdd, format!("grant:{} {}", g.id, g.root_path), detail).await?;
    }
    tx.commit().await?;
    println!(
        "grant {} {}: {} → {} ({})",
        g.id,
        if created { "created" } else { "exists" },
        g.root_path,
        g.user_email.as_deref().unwrap_or("all members"),
        g.permission
    );
    Ok(())
}

/// `mnote kb create`, owned by `owner` (default: the tenant's first owner).
pub async fn create_kb(tenant: &str, name: &str, visibility: &str, owner: Option<&str>) -> anyhow::Result<()> {
    let (_, pool) = app_pool().await?;
    let owner_auth = act_as(&pool, tenant, owner).await?;
    let mut tx = TenantTx::begin(&pool, owner_auth.tenant_id, Scope::User(owner_auth.user_id)).await?;
    let kb = kbs::create(&mut tx, &owner_auth, name, "", visibility, None).await.map_err(app_err)?;
    let target = format!("kb:{} {}", kb.id, kb.name);
    owner_auth.audit(&mut tx, &cli(), Action::KbCreate, target, format!("{} (mnote kb create)", kb.visibility)).await?;
    tx.commit().await?;
    println!("knowledge base {} created: {} ({})", kb.id, kb.name, kb.visibility);
    Ok(())
}
