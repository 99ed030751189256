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
    /// Search a tenant's evidence as one of its members (same core and visibility as the API).
    Search {
        #[command(flatten)]
        who: TenantActor,
        /// What to look for.
        query: String,
        #[arg(long, value_parser = ["hybrid", "lexical", "vector", "graph"], default_value = "hybrid")]
        mode: String,
        #[arg(long, default_value_t = 10)]
        top_k: usize,
        /// Only this knowledge base (by name).
        #[arg(long)]
        kb: Option<String>,
        /// Print the API response (`mnote.evidence_search_response.v1`) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Retrieval quality on a BEIR-format collection (ingested into the KB if not yet there):
    /// nDCG@10, Recall@100, MRR@10 and latency, through the API's search code path.
    Eval {
        #[command(flatten)]
        who: TenantActor,
        /// The KB holding the collection (created, private, when missing).
        #[arg(long)]
        kb: String,
        #[arg(long)]
        corpus: std::path::PathBuf,
        #[arg(long)]
        queries: std::path::PathBuf,
        #[arg(long)]
        qrels: std::path::PathBuf,
        /// One mode or a comma-separated list, e.g. `lexical,vector,hybrid`.
        #[arg(long, default_value = "hybrid")]
        mode: String,
        /// Reciprocal-rank fusion constant (default: the server's).
        #[arg(long)]
        rrf_k: Option<f64>,
        /// Evaluate only the first N judged queries.
        #[arg(long)]
        limit_queries: Option<usize>,
        /// Rank lexically in SQL instead of the in-memory mirror (they must agree).
        #[arg(long)]
        lexical_sql: bool,
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
    /// Render one page of a PDF (or an image) to PNG (the viewer's supervised renderer child).
    #[command(hide = true)]
    RenderPage {
        #[arg(long)]
        kind: String,
        #[arg(long)]
        page: u32,
        #[arg(long)]
        width: u32,
        #[arg(long)]
        height: u32,
        src: std::path::PathBuf,
        out: std::path::PathBuf,
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
    /// The generated 8,400-paragraph DOCX parsed and indexed (no embeddings) into the tenant's
    /// database, rolled back afterwards.
    Index {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// Passage-embedding throughput of the configured embedder on a sample of a tenant's
    /// blocks (nothing is written).
    Embed {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value_t = 1000)]
        limit: i64,
    },
    /// Search latency with concurrent clients through the HTTP API vs in-process, on a
    /// collection topped up to `--blocks` blocks (synthetic vectors; see docs/BENCHMARKS.md).
    Search {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value = "latency")]
        kb: String,
        #[arg(long)]
        corpus: std::path::PathBuf,
        #[arg(long)]
        queries: std::path::PathBuf,
        #[arg(long, default_value_t = 100_000)]
        blocks: usize,
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Distinct queries per HTTP pass (at most the queries not used in-process).
        #[arg(long, default_value_t = 600)]
        requests: usize,
        #[arg(long, default_value = "lexical,hybrid")]
        mode: String,
        /// Also run this many queries per mode in-process with SQL lexical ranking (no
        /// mirror), as the baseline the mirror is compared with.
        #[arg(long, default_value_t = 10)]
        sql_baseline: usize,
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
        Command::Search { who, query, mode, top_k, kb, json } => {
            search_command(&who, &query, &mode, top_k, kb.as_deref(), json).await
        }
        Command::Eval { who, kb, corpus, queries, qrels, mode, rrf_k, limit_queries, lexical_sql } => {
            crate::search::eval::eval_command(crate::search::eval::EvalArgs {
                tenant: &who.tenant,
                as_email: who.as_email.as_deref(),
                kb: &kb,
                corpus: &corpus,
                queries: &queries,
                qrels: &qrels,
                modes: &mode,
                rrf_k,
                limit_queries,
                lexical_sql,
            })
            .await
        }
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
        Command::Bench { command: BenchCommand::Index { tenant, rounds } } => crate::ingest::bench::index_command(&tenant, rounds).await,
        Command::Bench { command: BenchCommand::Embed { tenant, limit } } => crate::search::bench::embed_command(&tenant, limit).await,
        Command::Bench { command: BenchCommand::Search { tenant, kb, corpus, queries, blocks, clients, requests, mode, sql_baseline } } => {
            crate::search::bench::search_command(crate::search::bench::BenchArgs {
                tenant: &tenant,
                kb: &kb,
                corpus: &corpus,
                queries: &queries,
                blocks,
                clients,
                requests,
                modes: &mode,
                sql_baseline,
            })
            .await
        }
        Command::ParseFile { kind, probe, path } => {
            let code = if probe {
                crate::ingest::worker::probe_file_main(&path, &kind)
            } else {
                crate::ingest::worker::parse_file_main(&path, &kind)
            };
            std::process::exit(code);
        }
        Command::RenderPage { kind, page, width, height, src, out } => {
            std::process::exit(crate::viewer::render::render_page_main(&kind, page, width, height, &src, &out));
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

/// `mnote search`: numbered results (title, place, score, quote, open URL) or the API JSON.
async fn search_command(who: &TenantActor, query: &str, mode: &str, top_k: usize, kb: Option<&str>, json: bool) -> anyhow::Result<()> {
    use crate::search::query::{self as sq, Mode, SearchRequest};
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, &who.tenant, who.as_email.as_deref()).await?;
    let mode = Mode::parse(mode).with_context(|| format!("unknown mode {mode:?}"))?;
    // Only vector and hybrid need the embedder (loading it takes a moment).
    let embedder = if matches!(mode, Mode::Vector | Mode::Hybrid) { startup::load_embedder(&pool).await } else { None };
    let engine = sq::Engine::new(embedder, cfg.public_url.clone());
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    let mut req = SearchRequest::new(query, mode);
    req.top_k = Some(top_k);
    if let Some(name) = kb {
        let k = kbs::queries::get_by_name(&mut tx, actor.user_id, actor.role.is_admin(), name)
            .await?
            .with_context(|| format!("no knowledge base named {name:?} visible to {}", actor.email))?;
        req.kb_ids = Some(vec![k.id]);
    }
    let resp = sq::search(&mut tx, &engine, &req).await.map_err(|e| app_err(e.into()))?;
    tx.commit().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp)?);
        return Ok(());
    }
    if resp.degraded {
        eprintln!("note: vector search unavailable ({}); showing keyword results", resp.degraded_reason.as_deref().unwrap_or("degraded"));
    } else if resp.fusion.as_ref().is_some_and(|f| f.vector_weight == 0.0) {
        eprintln!("note: the embedder does not cover this query's language; keyword results only");
    }
    if resp.results.is_empty() {
        println!("no results for {query:?}");
        return Ok(());
    }
    let width = resp.results.len().to_string().len();
    for (i, h) in resp.results.iter().enumerate() {
        let place = cli_locator(&h.source);
        let mut flags = String::new();
        if let Some(q) = h.source.get("quality").and_then(|v| v.as_str()).filter(|q| *q != "exact") {
            flags.push_str(&format!(" [{q}]"));
        }
        if h.is_ocr {
            flags.push_str(" [ocr]");
        }
        if h.stale {
            flags.push_str(" [stale]");
        }
        let sep = if place.is_empty() { "" } else { " · " };
        println!("{:>width$}. {}{sep}{place}  (score {:.4}){flags}", i + 1, h.source_title, h.score);
        let pad = " ".repeat(width + 2);
        println!("{pad}{}", trim_quote(&h.quote, 240));
        println!("{pad}{}", h.open_action.absolute_url.as_deref().unwrap_or(&h.open_action.url));
    }
    println!("{} results in {:.0} ms ({})", resp.results.len(), resp.took_ms, resp.mode);
    Ok(())
}

/// "p.3 · A › B · L4–6" (or "¶7") from a locator.
fn cli_locator(loc: &serde_json::Value) -> String {
    use serde_json::Value;
    let mut parts = Vec::new();
    if let Some(p) = loc.get("page").and_then(Value::as_u64) {
        parts.push(format!("p.{p}"));
    }
    if let Some(path) = loc.get("sectionPath").and_then(Value::as_array) {
        let names: Vec<&str> = path.iter().filter_map(Value::as_str).filter(|s| !s.is_empty()).collect();
        if !names.is_empty() {
            parts.push(names.join(" › "));
        }
    }
    match loc.get("lineRange").and_then(Value::as_array).map(|r| (r.first().and_then(Value::as_u64), r.get(1).and_then(Value::as_u64))) {
        Some((Some(a), Some(b))) if a != b => parts.push(format!("L{a}–{b}")),
        Some((Some(a), _)) => parts.push(format!("L{a}")),
        _ => {
            if let Some(o) = loc.get("paragraphOrdinal").and_then(Value::as_u64) {
                parts.push(format!("¶{o}"));
            }
        }
    }
    parts.join(" · ")
}

/// One line of at most `max` characters, whitespace collapsed (a line break between two
/// CJK characters disappears, like in the rendered text).
fn trim_quote(q: &str, max: usize) -> String {
    let cjk = |c: char| matches!(c, '\u{2E80}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{FF00}'..='\u{FFEF}');
    let mut flat = String::new();
    let mut gap: Option<bool> = None; // pending whitespace: did it contain a line break?
    for c in q.chars() {
        if c.is_whitespace() {
            gap = Some(gap.unwrap_or(false) || c == '\n');
            continue;
        }
        if let Some(newline) = gap.take() {
            let joined = newline && flat.chars().last().is_some_and(cjk) && cjk(c);
            if !flat.is_empty() && !joined {
                flat.push(' ');
            }
        }
        flat.push(c);
    }
    if flat.chars().count() <= max {
        return flat;
    }
    let mut s: String = flat.chars().take(max).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_become_one_line() {
        assert_eq!(trim_quote("  a\n   b\tc ", 100), "a b c");
        assert_eq!(trim_quote("借用栈上的数据，\n因为作用域", 100), "借用栈上的数据，因为作用域");
        assert_eq!(trim_quote("数据 data\n中文", 100), "数据 data 中文");
        assert_eq!(trim_quote("abcdef", 3), "abc…");
    }
}
