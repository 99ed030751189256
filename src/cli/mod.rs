//! The `mnote` command line: the clap definitions and the dispatch to one module per command
//! group. Every command that touches tenant data goes through the same service functions and
//! row-level security as the HTTP API, acting as a real member (`crate::context::act_as`).

mod admin;
mod agents;
mod audit;
mod bench;
mod index;
mod rag;
mod search;
mod serve;

use clap::{Args, Parser, Subcommand};

use crate::{auth::directory::Role, error::AppError};

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
    /// Tenant settings only the operator may change (per-tenant grantable roots).
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// Read a team's audit log (newest first).
    Audit(AuditArgs),
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
    /// Knowledge RAG (LightRAG) maintenance.
    Rag {
        #[command(subcommand)]
        command: RagCommand,
    },
    /// AI agents: `selftest` checks that the tool registry, the function-calling and ACP
    /// mappings and the agent descriptors agree (their JSON Schema checks need a build with
    /// `--features jsonschema`; without it they are reported as not run).
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
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
pub enum AgentsCommand {
    /// Fail when the tool registry, the function-calling mapping, the ACP mapping and the
    /// descriptors disagree on names or schemas, or the descriptors JSON does not validate
    /// against docs/schemas/; with --tenant also a real member's descriptors.
    Selftest {
        #[arg(long)]
        tenant: Option<String>,
        /// The member whose descriptors are checked (default: the first owner).
        #[arg(long = "as")]
        as_email: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum RagCommand {
    /// Repair drift between a KB and its LightRAG: lost documents sent again, orphan
    /// `mnote-*` documents deleted, changed sources re-sent; waits until LightRAG is done.
    Resync {
        #[arg(long)]
        tenant: String,
        /// The KB's name or id.
        #[arg(long)]
        kb: String,
    },
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// The run journal: append throughput (raw vs coalesced vs batched), SSE fan-out to
    /// `--clients` clients on one run vs one client, resume latency after a reconnect, the
    /// built-in agent's answer time vs a plain search (throwaway runs, deleted afterwards).
    Runs {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value_t = 500)]
        clients: usize,
        #[arg(long, default_value_t = 100)]
        events: usize,
        #[arg(long, default_value_t = 20_000)]
        deltas: usize,
        /// A question for the built-in agent (repeatable; default: questions about the demo documents).
        #[arg(long = "question")]
        questions: Vec<String>,
    },
    /// Knowledge RAG against a running LightRAG: sync throughput vs LightRAG's own ingest,
    /// reference → block mapping accuracy, proxy overhead p50/p95 (a throwaway KB of the
    /// tenant, deleted afterwards).
    Rag {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value = "http://127.0.0.1:9621")]
        lightrag_url: String,
        /// The LightRAG API key (default: `./dev lightrag`'s, data/lightrag/api.key).
        #[arg(long)]
        lightrag_key_file: Option<std::path::PathBuf>,
        /// The test documents (default: the ones `./dev test` provisions, `$MNOTE_TESTDATA_DIR`).
        #[arg(long, env = "MNOTE_TESTDATA_DIR")]
        docs: std::path::PathBuf,
        #[arg(long, default_value_t = 20)]
        queries: usize,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// `evidence_search` through `/mcp` vs `POST /api/evidence/search`: p50/p95 with
    /// `--clients` concurrent clients on the demo questions, and the ratio.
    Mcp {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value_t = 8)]
        clients: usize,
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// A question (repeatable; default: questions about the demo documents).
        #[arg(long = "question")]
        questions: Vec<String>,
    },
    /// The built-in agent's answers (no language model) on CMRC 2018: how often an answer holds
    /// a gold answer, how often its first citation is the question's own passage, its length.
    /// The passages are indexed into the KB as `mnote eval` does.
    Answers {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value = "cmrc-answers")]
        kb: String,
        /// The passages: `corpus.jsonl` of `scripts/eval/convert_cmrc.py` (default: the
        /// contexts of the gold file).
        #[arg(long)]
        corpus: Option<std::path::PathBuf>,
        /// The file with the gold answers: CMRC 2018 (`cmrc2018_dev.json`, either shape) or
        /// any SQuAD-style file (XQuAD `xquad.zh.json`).
        #[arg(long)]
        cmrc: std::path::PathBuf,
        /// Index the passages of half of the articles only (split by article) and ask every
        /// question: the held-out ones should be answered `not_found`.
        #[arg(long)]
        held_out: bool,
        /// Only the first N questions.
        #[arg(long)]
        limit: Option<usize>,
        /// Write one JSON line per question (answer, gold answers, scores) to this file.
        #[arg(long)]
        dump: Option<std::path::PathBuf>,
    },
    /// Parse throughput of the PDF, OCR and DOCX providers against baselines in the same run.
    Ingest {
        /// The test documents (default: the ones `./dev test` provisions, `$MNOTE_TESTDATA_DIR`).
        #[arg(long, env = "MNOTE_TESTDATA_DIR")]
        docs: std::path::PathBuf,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Only these parts (comma-separated; default: all).
        #[arg(long, value_enum, value_delimiter = ',')]
        only: Vec<crate::ingest::bench::Part>,
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
        /// Open-loop arrival rates (req/s, comma-separated) for vector and hybrid, with fresh
        /// query vectors; empty: closed loop only.
        #[arg(long, value_delimiter = ',', default_value = "20,50")]
        rates: Vec<f64>,
        /// Seconds each open-loop rate runs.
        #[arg(long, default_value_t = 15.0)]
        open_loop_secs: f64,
        /// BEIR qrels of the queries: nDCG@10 of lexical search on the benchmark's corpus.
        #[arg(long)]
        qrels: Option<std::path::PathBuf>,
        /// Also index the same blocks in an in-process tantivy index and compare (a build with
        /// the `bench-tantivy` feature).
        #[arg(long)]
        tantivy: bool,
        /// Instead: primary only vs primary + the standby of MNOTE_READ_DATABASE_URL, alternated
        /// in one run (the tenant's blocks as they are), then the standby's replay lag while
        /// documents of `--corpus` are ingested.
        #[arg(long)]
        read_replica: bool,
    },
}

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Create the tenant and its owner if missing (idempotent). An existing account is made
    /// the owner only when the given password is its own (else nothing changes).
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
    /// Add an account to a tenant (creating it when new). For an existing account: without
    /// --password-stdin it is added as it is (its password unchanged); with a password that
    /// is not its own, nothing is changed and the command fails.
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

/// `mnote audit`: the filters of the admin page, and the output format.
#[derive(Args)]
pub struct AuditArgs {
    /// The team (tenant) name.
    #[arg(long)]
    pub tenant: String,
    /// One action, e.g. sign_in, kb.create, source.download.
    #[arg(long)]
    pub action: Option<String>,
    /// The actor's e-mail or a part of it.
    #[arg(long)]
    pub person: Option<String>,
    /// First day (UTC, YYYY-MM-DD), inclusive.
    #[arg(long)]
    pub from: Option<String>,
    /// Last day (UTC, YYYY-MM-DD), inclusive.
    #[arg(long)]
    pub to: Option<String>,
    /// At most this many rows.
    #[arg(long, default_value_t = 100)]
    pub limit: i64,
    #[arg(long, value_parser = ["table", "csv", "json"], default_value = "table")]
    pub format: String,
}

#[derive(Subcommand)]
pub enum TenantCommand {
    /// The directories this tenant's admins may grant (inside MNOTE_GRANTABLE_ROOTS).
    Roots {
        #[command(subcommand)]
        command: TenantRootsCommand,
    },
}

#[derive(Subcommand)]
pub enum TenantRootsCommand {
    /// Let the tenant grant directories under PATH.
    Add {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        path: std::path::PathBuf,
    },
    /// Take PATH away (grants under it stop working at once).
    Remove {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        path: std::path::PathBuf,
    },
    /// The tenant's roots.
    List {
        #[arg(long)]
        tenant: String,
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

fn app_err(e: AppError) -> anyhow::Error {
    anyhow::anyhow!("{}: {}", e.code(), e.public_message())
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve => serve::serve().await,
        Command::Migrate => serve::migrate().await,
        Command::Admin { command: AdminCommand::Bootstrap { tenant, email, password_stdin } } => {
            admin::bootstrap(&tenant, &email, password_stdin).await
        }
        Command::User { command: UserCommand::Add { tenant, email, role, password_stdin } } => {
            admin::add_user(&tenant, &email, role, password_stdin).await
        }
        Command::Token { command: TokenCommand::Create { tenant, email, name } } => {
            admin::create_token(&tenant, &email, &name).await
        }
        Command::Tenant { command: TenantCommand::Roots { command } } => admin::tenant_roots(command).await,
        Command::Audit(a) => audit::audit(a).await,
        Command::Grant { command: GrantCommand::Add { who, path, email, all_members, permission } } => {
            admin::add_grant(&who, &path, email, all_members, &permission).await
        }
        Command::Kb { command: KbCommand::Create { tenant, name, visibility, owner } } => {
            admin::create_kb(&tenant, &name, &visibility, owner.as_deref()).await
        }
        Command::Index { who, kb, paths } => index::index(&who, &kb, &paths).await,
        Command::Reindex { tenant } => index::reindex(&tenant).await,
        Command::Search { who, query, mode, top_k, kb, json } => {
            search::search(&who, &query, &mode, top_k, kb.as_deref(), json).await
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
                load: crate::ingest::corpus::load_boxed,
            })
            .await
        }
        Command::Rag { command: RagCommand::Resync { tenant, kb } } => rag::resync(&tenant, &kb).await,
        Command::Agents { command: AgentsCommand::Selftest { tenant, as_email } } => {
            agents::selftest(tenant.as_deref(), as_email.as_deref()).await
        }
        Command::Bench { command } => bench::run(command).await,
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
    }
}
