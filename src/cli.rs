//! The `mnote` command line. Every command that touches tenant data goes through the same
//! service functions and row-level security as the HTTP API, acting as a real member.

use std::io::Read;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use sqlx::PgPool;

use crate::{
    auth::{Auth, Via, tokens},
    config::Config,
    db::{self, Scope, TenantTx},
    error::AppError,
    grants::{self, Grantee, Permission},
    kbs, startup,
    tenants::{self, queries as tq, queries::Role},
};

#[derive(Parser)]
#[command(name = "mnote", version, about = "MNote Evidence Server")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the web UI and API on $MNOTE_BIND.
    Serve,
    /// Apply database migrations as $MNOTE_MIGRATION_DATABASE_URL and grant the app role.
    Migrate,
    /// Tenant administration.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Accounts.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Directory grants.
    Grant {
        #[command(subcommand)]
        command: GrantCommand,
    },
    /// Knowledge bases.
    Kb {
        #[command(subcommand)]
        command: KbCommand,
    },
    /// Register files or directories into a KB and wait until they are parsed and indexed.
    Index {
        #[command(flatten)]
        who: TenantActor,
        #[arg(long)]
        kb: String,
        #[arg(required = true)]
        paths: Vec<std::path::PathBuf>,
    },
    /// Drop every evidence row of a tenant and rebuild them from the stored artifacts.
    Reindex {
        #[arg(long)]
        tenant: String,
    },
    /// Benchmarks (see docs/BENCHMARKS.md).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Parse one file and print its artifact as JSON (this is also the supervised parser child).
    #[command(hide = true)]
    ParseFile {
        #[arg(long)]
        kind: String,
        /// Only report page sizes and scanned pages (routing to an external provider).
        #[arg(long)]
        probe: bool,
        path: std::path::PathBuf,
    },
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Parse throughput of the PDF, OCR and DOCX providers against baselines in the same run.
    Ingest {
        #[arg(long, default_value = "../shared/testdata/docs")]
        docs: std::path::PathBuf,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
}

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Create the tenant and its owner if missing (idempotent).
    Bootstrap {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        email: String,
        /// Read the password from standard input (first line).
        #[arg(long, required = true)]
        password_stdin: bool,
    },
}

#[derive(Subcommand)]
pub enum UserCommand {
    /// Add an account to a tenant (creating it when new).
    Add {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        email: String,
        #[arg(long, default_value = "member")]
        role: Role,
        #[arg(long)]
        password_stdin: bool,
    },
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create an API token; the token is the last line of standard output.
    Create {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: String,
    },
}

#[derive(Subcommand)]
pub enum GrantCommand {
    /// Grant a server directory to one member or to all members.
    Add {
        #[command(flatten)]
        who: TenantActor,
        #[arg(long)]
        path: std::path::PathBuf,
        #[arg(long, conflicts_with = "all_members", required_unless_present = "all_members")]
        email: Option<String>,
        #[arg(long)]
        all_members: bool,
        #[arg(long, value_parser = ["read", "read_index"])]
        permission: String,
    },
}

#[derive(Subcommand)]
pub enum KbCommand {
    /// Create a knowledge base.
    Create {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        name: String,
        #[arg(long, value_parser = ["private", "team"], default_value = "team")]
        visibility: String,
        /// Owner's email (default: the tenant's first owner).
        #[arg(long)]
        owner: Option<String>,
    },
}

#[derive(Args)]
pub struct TenantActor {
    #[arg(long)]
    pub tenant: String,
    /// Act as this member (default: the tenant's first owner).
    #[arg(long = "as")]
    pub as_email: Option<String>,
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

pub async fn app_pool() -> anyhow::Result<(Config, PgPool)> {
    let cfg = Config::from_env()?;
    let pool = db::connect(&cfg.database_url, 4).await?;
    Ok((cfg, pool))
}

/// Resolve `--tenant` (and `--as`) to an `Auth` for a real member of that tenant.
pub async fn act_as(pool: &PgPool, tenant: &str, email: Option<&str>) -> anyhow::Result<Auth> {
    let tenant_id = tq::tenant_by_name(pool, tenant).await?.with_context(|| format!("no tenant named {tenant:?}"))?;
    let mut tx = TenantTx::begin(pool, tenant_id, Scope::System).await?;
    let member = match email {
        Some(e) => tq::member_by_email(&mut tx, e).await?.with_context(|| format!("{e} is not a member of {tenant}"))?,
        None => {
            let members = tq::members(&mut tx).await?;
            members
                .into_iter()
                .filter(|m| m.role == Role::Owner)
                .min_by_key(|m| m.created_at)
                .with_context(|| format!("tenant {tenant} has no owner"))?
        }
    };
    tx.commit().await?;
    Ok(Auth { user_id: member.user_id, tenant_id, role: member.role, email: member.email, via: Via::Token })
}

fn app_err(e: AppError) -> anyhow::Error {
    anyhow::anyhow!("{}: {}", e.code(), e.public_message())
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve => {
            let cfg = Config::from_env()?;
            tracing::info!(?cfg, "starting");
            let state = startup::prepare(cfg).await?;
            startup::serve(state).await
        }
        Command::Migrate => {
            let url = std::env::var("MNOTE_MIGRATION_DATABASE_URL")
                .or_else(|_| std::env::var("DATABASE_URL"))
                .context("set MNOTE_MIGRATION_DATABASE_URL (the owner role) to migrate")?;
            let app_role = std::env::var("DATABASE_URL").ok().and_then(|u| db::url_user(&u));
            let owner = db::connect(&url, 2).await?;
            let app_role = app_role.filter(|r| Some(r.as_str()) != db::url_user(&url).as_deref());
            db::migrate(&owner, app_role.as_deref()).await?;
            println!("migrations applied{}", app_role.map(|r| format!("; app role {r} granted")).unwrap_or_default());
            let embed = crate::search::embed::EmbedConfig::from_env()?;
            if let Some(space) = crate::search::vectors::space_of_config(&embed) {
                crate::search::vectors::ensure_index(&owner, &space).await?;
                println!("vector index ready for {} ({} dimensions)", space.model, space.dim);
            }
            Ok(())
        }
        Command::Admin { command: AdminCommand::Bootstrap { tenant, email, password_stdin } } => {
            let pw = read_password(password_stdin)?.unwrap_or_default();
            let (_, pool) = app_pool().await?;
            let b = tenants::bootstrap(&pool, &tenant, &email, &pw).await.map_err(app_err)?;
            println!(
                "tenant {tenant}: {}; owner {email}: {}",
                if b.created_tenant { "created" } else { "exists" },
                if b.created_user { "created" } else { "exists" }
            );
            Ok(())
        }
        Command::User { command: UserCommand::Add { tenant, email, role, password_stdin } } => {
            let pw = read_password(password_stdin)?;
            let (_, pool) = app_pool().await?;
            let tenant_id = tq::tenant_by_name(&pool, &tenant).await?.with_context(|| format!("no tenant named {tenant:?}"))?;
            let (_, created) = tenants::add_user(&pool, tenant_id, &email, role, pw.as_deref()).await.map_err(app_err)?;
            println!("{email}: {} {} of {tenant}", if created { "created," } else { "existing account," }, role.as_str());
            Ok(())
        }
        Command::Token { command: TokenCommand::Create { tenant, email, name } } => {
            let (_, pool) = app_pool().await?;
            let who = act_as(&pool, &tenant, Some(&email)).await?;
            let mut tx = TenantTx::begin(&pool, who.tenant_id, Scope::User(who.user_id)).await?;
            let (rec, plain) = tokens::create(&mut tx, who.tenant_id, who.user_id, &name).await?;
            tx.commit().await?;
            println!("token {} ({}) for {email} in {tenant}; it is shown only once:", rec.id, rec.name);
            println!("{plain}");
            Ok(())
        }
        Command::Grant { command: GrantCommand::Add { who, path, email, all_members, permission } } => {
            let (cfg, pool) = app_pool().await?;
            let actor = act_as(&pool, &who.tenant, who.as_email.as_deref()).await?;
            let abs = std::path::absolute(&path).with_context(|| format!("{}", path.display()))?;
            let grantee = if all_members { Grantee::AllMembers } else { Grantee::Email(email.unwrap_or_default()) };
            let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
            let (g, created) = grants::create(
                &mut tx,
                &cfg,
                &actor,
                &abs.to_string_lossy(),
                grantee,
                Permission::parse(&permission).map_err(app_err)?,
            )
            .await
            .map_err(app_err)?;
            tx.commit().await?;
            println!("grant {} {}: {} → {} ({})", g.id, if created { "created" } else { "exists" }, g.root_path,
                g.user_email.as_deref().unwrap_or("all members"), g.permission);
            Ok(())
        }
        Command::Index { who, kb, paths } => crate::ingest::progress::index_command(&who.tenant, who.as_email.as_deref(), &kb, &paths).await,
        Command::Reindex { tenant } => {
            let (_, pool) = app_pool().await?;
            let actor = act_as(&pool, &tenant, None).await?;
            let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::System).await?;
            let (sources, blocks) = crate::ingest::index::rebuild_all(&mut tx, actor.tenant_id).await?;
            tx.commit().await?;
            println!("rebuilt {blocks} evidence blocks of {sources} sources from their artifacts");
            Ok(())
        }
        Command::Bench { command: BenchCommand::Ingest { docs, rounds } } => crate::ingest::bench::ingest_command(&docs, rounds),
        Command::ParseFile { kind, probe, path } => {
            let code = if probe {
                crate::ingest::worker::probe_file_main(&path, &kind)
            } else {
                crate::ingest::worker::parse_file_main(&path, &kind)
            };
            std::process::exit(code);
        }
        Command::Kb { command: KbCommand::Create { tenant, name, visibility, owner } } => {
            let (_, pool) = app_pool().await?;
            let owner_auth = act_as(&pool, &tenant, owner.as_deref()).await?;
            let mut tx = TenantTx::begin(&pool, owner_auth.tenant_id, Scope::User(owner_auth.user_id)).await?;
            let kb = kbs::create(&mut tx, &owner_auth, &name, "", &visibility, None).await.map_err(app_err)?;
            tx.commit().await?;
            println!("knowledge base {} created: {} ({})", kb.id, kb.name, kb.visibility);
            Ok(())
        }
    }
}
