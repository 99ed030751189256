//! Configuration from environment variables (documented in README.md).

mod children;
pub use children::{PDFIUM_BUILD_ENV, PDFIUM_LIB_ENV, parser_exe_beside, pdfium_build_hint, pdfium_lib, soffice_from};

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::{Context, bail};

#[derive(Clone)]
pub struct Config {
    pub database_url: String,
    pub migration_database_url: Option<String>,
    pub bind: SocketAddr,
    pub data_dir: PathBuf,
    /// Canonical directories admins may grant (MNOTE_GRANTABLE_ROOTS).
    pub grantable_roots: Vec<PathBuf>,
    /// What a tenant without `tenant_root` rows may grant (MNOTE_TENANT_ROOTS): `strict`
    /// (nothing) unless the operator opts back into the shared allow-list with `open`.
    pub tenant_roots: TenantRootsMode,
    /// Serve/parse files with several hard links outside the data dir (MNOTE_ALLOW_HARD_LINKS).
    /// Off by default: a hard link inside a granted root can name a secret elsewhere.
    pub allow_hard_links: bool,
    pub public_url: Option<String>,
    pub cookie_secure: bool,
    pub session_idle: Duration,
    pub session_absolute: Duration,
    pub upload_max_bytes: u64,
    /// `/mcp`: tool calls and resource reads per API token and minute (0 = no limit).
    pub mcp_rate_limit_per_minute: u32,
    /// `/mcp`: the largest request body.
    pub mcp_max_body_bytes: usize,
    /// How often an open run event stream re-checks that its caller may still read the run
    /// (token not revoked, still a member, run still visible), however busy it is
    /// (MNOTE_SSE_RECHECK_SECS).
    pub sse_recheck: Duration,
    /// Run event streams one member may hold open at once in this process (MNOTE_SSE_MAX_PER_USER);
    /// the next is `429 too_many_streams`.
    pub sse_max_per_user: usize,
    /// Failed password checks allowed per account from one client address within
    /// `login_window` (per address: 4×, per account: 10×; `auth::rate_limit`).
    pub login_max_failures: i64,
    pub login_window: Duration,
    pub db_max_connections: u32,
    /// A hot standby for read-only work (MNOTE_READ_DATABASE_URL, same app role): searches,
    /// read/open, the viewer, descriptor reads (`db::read`). `None`: every read on the primary.
    pub read_database_url: Option<String>,
    /// Past this replay lag the standby serves no reads (MNOTE_READ_MAX_LAG_MS, default 5000).
    pub read_max_lag: Duration,
    /// Honour X-Forwarded-For for the client address (only behind a trusted proxy).
    pub trust_proxy: bool,
    /// Parallel ingest workers in this process (0 = none, e.g. a web-only replica).
    pub ingest_workers: usize,
    pub parse_timeout: Duration,
    /// How long a deleted KB or removed source can be restored before the purge deletes it
    /// for good (MNOTE_DELETE_GRACE_SECS, default 7 days).
    pub delete_grace: Duration,
    /// `MNOTE_AUDIT_RETENTION_DAYS`: audit rows older are purged (under 30 counts as 30).
    pub audit_retention_days: u32,
    pub parse_memory_bytes: u64,
    /// Files larger than this are not parsed (`file_too_large`).
    pub parse_max_bytes: u64,
    /// Documents with more pages are not parsed (`too_many_pages`).
    pub parse_max_pages: u64,
    /// Spreadsheet and CSV rows indexed per file; the rest is left out and the source says
    /// `truncatedRows` (MNOTE_PARSE_MAX_ROWS, default 200,000).
    pub parse_max_rows: u64,
    /// The `mnote` binary run as the supervised parser child (default: this executable).
    pub parser_exe: PathBuf,
    /// LibreOffice's `soffice`, which draws slides for the viewer (MNOTE_SOFFICE: a path, or
    /// `off`; unset: `soffice` on PATH if there is one). `None`: slides are shown as their
    /// text layout.
    pub soffice: Option<PathBuf>,
    /// Fallback rescan of registered files (the watcher catches most changes sooner).
    pub rescan_interval: Duration,
    /// MinerU Precision Extract API token (MNOTE_MINERU_TOKEN). Server-side only: never
    /// logged, never in an API response, an error message or a page.
    pub mineru_token: Option<SecretString>,
    /// MinerU API base URL (MNOTE_MINERU_URL), without `/api/v4`.
    pub mineru_url: String,
    /// How often a MinerU batch is polled for its result.
    pub mineru_poll_interval: Duration,
    /// How long one MinerU parse (upload, queue, parse, download) may take.
    pub mineru_timeout: Duration,
    /// How lexical search uses the in-memory BM25 mirrors (MNOTE_LEXICAL_MIRROR).
    pub lexical_mirror: LexicalMirror,
    /// Backoff of vector work after its database backend died: first retry after
    /// `vector_retry_min`, doubling up to `vector_retry_max` (then once per that interval).
    pub vector_retry_min: Duration,
    pub vector_retry_max: Duration,
    /// Knowledge RAG (LightRAG endpoints).
    pub rag: RagConfig,
    /// `/metrics` wants `Authorization: Bearer <this>` (MNOTE_METRICS_TOKEN); without it only
    /// direct loopback requests (not relayed by a proxy) are answered.
    pub metrics_token: Option<SecretString>,
    /// AI runs: agent endpoints and commands (operator-controlled), limits.
    pub agents: AgentsConfig,
    /// After SIGTERM, how long open connections (event streams, uploads) may go on before the
    /// server closes them and stops (MNOTE_SHUTDOWN_GRACE_SECS): a replica being replaced
    /// must exit even while browsers stream from it (they reconnect to another replica).
    pub shutdown_grace: Duration,
}

/// AI runs. Team admins configure `hermes`/`chat_only` endpoints, but only inside
/// `allowed_urls`; the ACP command of `reasonix` comes from here only, never from a team admin.
#[derive(Clone, Debug)]
pub struct AgentsConfig {
    /// URL prefixes an agent endpoint may use (MNOTE_AGENT_ALLOWED_URLS, comma-separated;
    /// unset: [`DEFAULT_AGENT_ALLOWED_URLS`], the public HTTPS endpoints of the major
    /// OpenAI-compatible providers; `none`: nothing). Setting it replaces the default list.
    pub allowed_urls: Vec<String>,
    /// The ACP agent program of `reasonix` and its arguments (MNOTE_ACP_REASONIX_COMMAND,
    /// split on whitespace); `None`: reasonix runs on builtin.
    pub acp_command: Option<Vec<String>>,
    /// No chunk from the model / agent for this long fails the run (`agent_timeout`).
    pub idle_timeout: Duration,
    /// A whole run may take at most this long.
    pub run_timeout: Duration,
    /// Tool-call rounds the openai runtime allows before it must answer.
    pub max_tool_rounds: usize,
    /// Address-space limit of an ACP agent process.
    pub acp_memory_bytes: u64,
    /// Variables of the server's environment an ACP agent also gets, by name (MNOTE_ACP_ENV,
    /// comma-separated; e.g. its model API key). It gets nothing else but PATH, LANG,
    /// LANGUAGE, LC_*, TZ, TERM and its own HOME/TMPDIR. Names of the server's own settings
    /// (`MNOTE_*`, `DATABASE_*`, `PG*`) are refused.
    pub acp_env: Vec<String>,
    /// The user ACP agents run as when the server runs as root (MNOTE_ACP_USER, default
    /// `nobody`); a server that is not root runs them as its own user (and refuses another).
    pub acp_user: Option<String>,
    /// The longest line an ACP agent may write (MNOTE_ACP_MAX_LINE_BYTES, default 8 MiB);
    /// longer fails the run as `acp_line_too_long`.
    pub acp_max_line_bytes: usize,
    /// Whether ACP agents' file access is confined by the kernel (MNOTE_ACP_SANDBOX, `on` by
    /// default; `off` only when the operator says so).
    pub acp_sandbox: AcpSandbox,
    /// More paths a confined agent may read and execute beneath (MNOTE_ACP_READ_PATHS,
    /// `:`-separated, absolute): its installation, beyond the system directories.
    pub acp_read_paths: Vec<PathBuf>,
    /// Paths a confined agent may also write beneath (MNOTE_ACP_WRITE_PATHS, `:`-separated,
    /// absolute), beyond its run's own directory. Shared by every team's runs.
    pub acp_write_paths: Vec<PathBuf>,
    /// Runs one process executes at once (more wait as `pending`).
    pub max_concurrent_runs: usize,
    /// Runs one member may have pending or running at once (MNOTE_MAX_RUNS_PER_USER); the next
    /// is `429 too_many_runs`.
    pub max_runs_per_user: i64,
    /// The longest answer a run may produce, in bytes (MNOTE_RUN_MAX_ANSWER_BYTES):
    /// past it the run fails with `answer_too_large`.
    pub max_answer_bytes: usize,
    /// The largest single journal event, in bytes of JSON (MNOTE_RUN_MAX_EVENT_BYTES): past it
    /// the run fails with `event_too_large`.
    pub max_event_bytes: usize,
    /// Events one run may journal (MNOTE_RUN_MAX_EVENTS): past it the run fails with
    /// `too_many_events`.
    pub max_events: i64,
    /// The longest line a model may stream (SSE line of the chat completion), in bytes
    /// (MNOTE_AGENT_MAX_LINE_BYTES): past it the run fails with `llm_bad_response`.
    pub max_line_bytes: usize,
    /// Extra agent settings the operator declares (MNOTE_AGENT_EXTRA_FIELDS: a JSON array of
    /// fields, see `agents::descriptors::ExtraField`); they show up in the descriptors and the
    /// settings pages like the built-in ones.
    pub extra_fields: Option<String>,
}

impl AgentsConfig {
    fn from_env() -> anyhow::Result<Self> {
        Ok(AgentsConfig {
            allowed_urls: agent_allowed_urls(std::env::var("MNOTE_AGENT_ALLOWED_URLS").ok().as_deref()),
            acp_command: var("MNOTE_ACP_REASONIX_COMMAND")
                .map(|c| c.split_whitespace().map(String::from).collect::<Vec<_>>())
                .filter(|c| !c.is_empty()),
            idle_timeout: Duration::from_secs(parse("MNOTE_AGENT_IDLE_TIMEOUT_SECS", 60u64)?.max(1)),
            run_timeout: Duration::from_secs(parse("MNOTE_AGENT_RUN_TIMEOUT_SECS", 600u64)?.max(1)),
            max_tool_rounds: parse("MNOTE_AGENT_MAX_TOOL_ROUNDS", 4usize)?.max(1),
            acp_memory_bytes: 1024 * 1024 * parse("MNOTE_ACP_MEMORY_MB", 2048u64)?,
            acp_env: acp_env_names(var("MNOTE_ACP_ENV").as_deref().unwrap_or(""))?,
            acp_user: var("MNOTE_ACP_USER").map(|u| u.trim().to_string()).filter(|u| !u.is_empty()),
            acp_max_line_bytes: parse("MNOTE_ACP_MAX_LINE_BYTES", DEFAULT_ACP_MAX_LINE_BYTES)?.max(1024),
            acp_sandbox: parse("MNOTE_ACP_SANDBOX", AcpSandbox::On)?,
            acp_read_paths: absolute_paths("MNOTE_ACP_READ_PATHS", var("MNOTE_ACP_READ_PATHS").as_deref())?,
            acp_write_paths: absolute_paths("MNOTE_ACP_WRITE_PATHS", var("MNOTE_ACP_WRITE_PATHS").as_deref())?,
            max_concurrent_runs: parse("MNOTE_MAX_CONCURRENT_RUNS", 8usize)?.max(1),
            max_runs_per_user: parse("MNOTE_MAX_RUNS_PER_USER", 4i64)?.max(1),
            max_answer_bytes: parse("MNOTE_RUN_MAX_ANSWER_BYTES", 1024 * 1024usize)?.max(1024),
            max_event_bytes: parse("MNOTE_RUN_MAX_EVENT_BYTES", 256 * 1024usize)?.max(1024),
            max_events: parse("MNOTE_RUN_MAX_EVENTS", 5000i64)?.max(10),
            max_line_bytes: parse("MNOTE_AGENT_MAX_LINE_BYTES", 1024 * 1024usize)?.max(1024),
            extra_fields: var("MNOTE_AGENT_EXTRA_FIELDS"),
        })
    }

    /// How ACP agents' file access is confined on this machine, for `/readyz` and the admin
    /// page: `landlock` (with the kernel's ABI), `mount_namespace`, `unavailable` (their runs
    /// fail: `agent_sandbox_unavailable`) or `off` (MNOTE_ACP_SANDBOX=off).
    pub fn acp_confinement(&self) -> (&'static str, Option<i32>) {
        use crate::platform::supervise::confine::{Available, available};
        match (self.acp_sandbox, available()) {
            (AcpSandbox::Off, _) => ("off", None),
            (AcpSandbox::On, Available::Landlock { abi }) => ("landlock", Some(abi)),
            (AcpSandbox::On, Available::MountNamespace) => ("mount_namespace", None),
            (AcpSandbox::On, Available::Nothing) => ("unavailable", None),
        }
    }

    /// Nothing allowed, no ACP command, short timeouts.
    pub fn for_tests() -> Self {
        AgentsConfig {
            allowed_urls: Vec::new(),
            acp_command: None,
            idle_timeout: Duration::from_secs(5),
            run_timeout: Duration::from_secs(60),
            max_tool_rounds: 4,
            acp_memory_bytes: 2 << 30,
            acp_env: Vec::new(),
            acp_user: None,
            acp_max_line_bytes: DEFAULT_ACP_MAX_LINE_BYTES,
            acp_sandbox: AcpSandbox::On,
            acp_read_paths: Vec::new(),
            acp_write_paths: Vec::new(),
            max_concurrent_runs: 8,
            // Tests create runs back to back; the limit's own test lowers it.
            max_runs_per_user: 50,
            max_answer_bytes: 1024 * 1024,
            max_event_bytes: 256 * 1024,
            max_events: 5000,
            max_line_bytes: 1024 * 1024,
            extra_fields: None,
        }
    }
}

/// The agent endpoints a team admin may use when the operator sets no
/// MNOTE_AGENT_ALLOWED_URLS: the public HTTPS API roots of the major OpenAI-compatible
/// providers (documented in the README). Private and local endpoints (vLLM, Ollama, a proxy)
/// are never in it: the operator lists them in MNOTE_AGENT_ALLOWED_URLS, which replaces this.
pub const DEFAULT_AGENT_ALLOWED_URLS: &[&str] = &[
    "https://api.openai.com/v1",
    "https://api.deepseek.com",
    "https://api.mistral.ai/v1",
    "https://api.groq.com/openai/v1",
    "https://openrouter.ai/api/v1",
    "https://api.together.xyz/v1",
    "https://api.fireworks.ai/inference/v1",
    "https://api.x.ai/v1",
    "https://generativelanguage.googleapis.com/v1beta/openai",
    "https://dashscope.aliyuncs.com/compatible-mode/v1",
    "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
    "https://api.moonshot.cn/v1",
    "https://api.moonshot.ai/v1",
    "https://open.bigmodel.cn/api/paas/v4",
    "https://api.siliconflow.cn/v1",
];

/// The agent allow-list from MNOTE_AGENT_ALLOWED_URLS: unset or blank → the default list;
/// `none` → nothing; else its comma-separated prefixes (the default list is not added).
pub fn agent_allowed_urls(value: Option<&str>) -> Vec<String> {
    match value.map(str::trim) {
        None | Some("") => DEFAULT_AGENT_ALLOWED_URLS.iter().map(|u| u.to_string()).collect(),
        Some(v) if v.eq_ignore_ascii_case("none") => Vec::new(),
        Some(v) => v.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect(),
    }
}

/// The default of MNOTE_ACP_MAX_LINE_BYTES: the longest line an ACP agent may write (a
/// message with a long answer chunk or tool input).
pub const DEFAULT_ACP_MAX_LINE_BYTES: usize = 8 << 20;

/// MNOTE_ACP_SANDBOX: whether ACP agents' file access is confined (`on`) or, by the
/// operator's explicit choice, not (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcpSandbox {
    /// Landlock, else a mount namespace, else the agent does not start
    /// (`agent_sandbox_unavailable`).
    On,
    /// No file-system confinement (the rest of the sandbox stays).
    Off,
}

impl std::str::FromStr for AcpSandbox {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "on" => Ok(AcpSandbox::On),
            "off" => Ok(AcpSandbox::Off),
            _ => Err("expected on or off".into()),
        }
    }
}

/// A `:`-separated list of absolute paths (`name` for the error); unset or blank: none.
pub fn absolute_paths(name: &str, list: Option<&str>) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for part in list.unwrap_or_default().split(':').map(str::trim).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(part);
        if !p.is_absolute() {
            bail!("{name}: {part:?} is not an absolute path");
        }
        paths.push(p);
    }
    Ok(paths)
}

/// The names of MNOTE_ACP_ENV: comma-separated variable names, none of the server's own.
pub fn acp_env_names(list: &str) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.starts_with(|c: char| c.is_ascii_digit()) {
            anyhow::bail!("MNOTE_ACP_ENV: {name:?} is not a variable name");
        }
        if ["MNOTE_", "DATABASE_", "PG"].iter().any(|p| name.to_ascii_uppercase().starts_with(p)) {
            anyhow::bail!("MNOTE_ACP_ENV: {name} is one of the server's own settings; an agent never gets those");
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// Knowledge RAG: which LightRAG URLs team admins may bind, how long a call may take, and the
/// key API keys are sealed with.
#[derive(Clone, Debug)]
pub struct RagConfig {
    /// URL prefixes a KB may be bound to (MNOTE_RAG_ALLOWED_URLS, comma-separated); empty:
    /// none (no server-side request forgery through a team admin).
    pub allowed_urls: Vec<String>,
    /// Limit of one LightRAG call (MNOTE_RAG_TIMEOUT_SECS).
    pub timeout: Duration,
    /// The largest LightRAG response body read, in bytes (MNOTE_RAG_MAX_BODY_BYTES): past it
    /// the call fails with `knowledge_rag_bad_response`.
    pub max_body_bytes: usize,
    /// The key secrets are sealed with at rest: MNOTE_SECRET_KEY (64 hex digits or base64),
    /// else the file MNOTE_SECRET_KEY_FILE, else `<data dir>/secret.key` (`./dev` creates it).
    pub secret_key: Option<crate::platform::crypto::MasterKey>,
    /// MNOTE_SECRET_KEY_FILE when set (the key file an ACP agent must never read; the
    /// default one is in the data dir).
    pub secret_key_file: Option<PathBuf>,
    /// How often the background sync looks at every binding (it also runs on source changes).
    pub sync_interval: Duration,
    /// Kinds sent to LightRAG as the file, for LightRAG to parse (MNOTE_RAG_UPLOAD_KINDS,
    /// default `markdown,text`); every other kind is sent as our extracted text (OCR text
    /// included), which LightRAG's chunks then align to exactly (docs/BENCHMARKS.md).
    pub upload_kinds: Vec<crate::evidence::SourceKind>,
    /// How long a listing of what a LightRAG holds is reused (MNOTE_RAG_DRIFT_TTL_SECS, 30):
    /// the status and the sync compare it with what we sent, to notice a server that lost
    /// its storage.
    pub drift_ttl: Duration,
}

impl RagConfig {
    fn from_env(data_dir: &std::path::Path) -> anyhow::Result<Self> {
        use crate::platform::crypto::MasterKey;
        let secret_key = match var("MNOTE_SECRET_KEY") {
            Some(k) => Some(MasterKey::parse(&k).context("MNOTE_SECRET_KEY")?),
            None => {
                let file = var("MNOTE_SECRET_KEY_FILE").map(PathBuf::from).unwrap_or_else(|| data_dir.join("secret.key"));
                match std::fs::read_to_string(&file) {
                    Ok(k) => Some(MasterKey::parse(&k).with_context(|| format!("secret key file {}", file.display()))?),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
                }
            }
        };
        Ok(RagConfig {
            allowed_urls: var("MNOTE_RAG_ALLOWED_URLS")
                .map(|v| v.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect())
                .unwrap_or_default(),
            timeout: Duration::from_secs(parse("MNOTE_RAG_TIMEOUT_SECS", 30u64)?.max(1)),
            max_body_bytes: parse("MNOTE_RAG_MAX_BODY_BYTES", 16 * 1024 * 1024usize)?.max(1024),
            secret_key,
            secret_key_file: var("MNOTE_SECRET_KEY_FILE").map(PathBuf::from),
            sync_interval: Duration::from_secs(parse("MNOTE_RAG_SYNC_INTERVAL_SECS", 30u64)?.max(1)),
            drift_ttl: Duration::from_secs(parse("MNOTE_RAG_DRIFT_TTL_SECS", 30u64)?.max(1)),
            upload_kinds: match var("MNOTE_RAG_UPLOAD_KINDS") {
                None => vec![crate::evidence::SourceKind::Markdown, crate::evidence::SourceKind::Text],
                Some(v) => v
                    .split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(|k| k.parse().map_err(|e: String| anyhow::anyhow!("MNOTE_RAG_UPLOAD_KINDS: {e}")))
                    .collect::<anyhow::Result<_>>()?,
            },
        })
    }

    /// Nothing allowed, a fresh random key, short timeouts.
    pub fn for_tests() -> Self {
        RagConfig {
            allowed_urls: Vec::new(),
            timeout: Duration::from_secs(5),
            max_body_bytes: 16 * 1024 * 1024,
            secret_key: Some(crate::platform::crypto::MasterKey::generate()),
            secret_key_file: None,
            sync_interval: Duration::from_secs(1),
            drift_ttl: Duration::from_secs(1),
            upload_kinds: vec![crate::evidence::SourceKind::Markdown, crate::evidence::SourceKind::Text],
        }
    }
}

/// `background` (default): a KB without a current mirror is ranked in SQL while the mirror is
/// built; `inline`: the query waits for the build (deterministic, for tests and evaluation);
/// `off`: always SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LexicalMirror {
    Off,
    #[default]
    Background,
    Inline,
}

impl std::str::FromStr for LexicalMirror {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(LexicalMirror::Off),
            "background" => Ok(LexicalMirror::Background),
            "inline" => Ok(LexicalMirror::Inline),
            _ => Err("expected off, background or inline".into()),
        }
    }
}

/// MNOTE_TENANT_ROOTS: how grants are limited for a tenant the operator gave no roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantRootsMode {
    /// A tenant without `tenant_root` rows may grant nothing (the default).
    Strict,
    /// A tenant without rows may grant anything under MNOTE_GRANTABLE_ROOTS (the old,
    /// shared allow-list; only for single-team installations).
    Open,
}

impl std::str::FromStr for TenantRootsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "strict" => Ok(TenantRootsMode::Strict),
            "open" => Ok(TenantRootsMode::Open),
            _ => Err("expected strict or open".into()),
        }
    }
}

/// Secrets from the environment (tokens, keys); `Debug` and `Display` print `[redacted]`.
pub use crate::platform::SecretString;

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact(&self.database_url))
            .field("bind", &self.bind)
            .field("data_dir", &self.data_dir)
            .field("grantable_roots", &self.grantable_roots)
            .field("public_url", &self.public_url)
            .field("cookie_secure", &self.cookie_secure)
            .field("mineru_token", &self.mineru_token)
            .field("mineru_url", &self.mineru_url)
            .finish_non_exhaustive()
    }
}

/// Hide the password part of a database URL.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// MNOTE_READ_DATABASE_URL, checked to be a Postgres URL (the standby itself may be down at
/// startup: reads then go to the primary until it answers).
fn read_database_url() -> anyhow::Result<Option<String>> {
    let Some(url) = var("MNOTE_READ_DATABASE_URL") else { return Ok(None) };
    url.trim()
        .parse::<sqlx::postgres::PgConnectOptions>()
        .map_err(|e| anyhow::anyhow!("MNOTE_READ_DATABASE_URL={:?}: {e}", redact(url.trim())))?;
    Ok(Some(url.trim().to_string()))
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match var(name) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|e| anyhow::anyhow!("{name}={v:?}: {e}")),
    }
}

impl Config {
    /// `http://<the address this server listens on>` (loopback for an unspecified address):
    /// how a process on this machine reaches it, whatever `MNOTE_PUBLIC_URL` says (an ACP
    /// agent's `/mcp` URL).
    pub fn local_base_url(&self) -> String {
        let mut bound = self.bind;
        if bound.ip().is_unspecified() {
            bound.set_ip(if bound.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        format!("http://{bound}")
    }

    pub fn from_env() -> anyhow::Result<Self> {
        let database_url = var("DATABASE_URL").context("DATABASE_URL is not set")?;
        let data_dir = PathBuf::from(var("MNOTE_DATA_DIR").unwrap_or_else(|| "./data".into()));
        std::fs::create_dir_all(&data_dir).with_context(|| format!("creating MNOTE_DATA_DIR {}", data_dir.display()))?;
        let data_dir = data_dir.canonicalize()?;
        let grantable_roots = parse_roots(var("MNOTE_GRANTABLE_ROOTS").as_deref(), &data_dir)?;
        let public_url = var("MNOTE_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_string());
        let https = public_url.as_deref().is_some_and(|u| u.starts_with("https://"));
        let rag = RagConfig::from_env(&data_dir)?;
        run_lease_from_env()?;
        Ok(Config {
            database_url,
            migration_database_url: var("MNOTE_MIGRATION_DATABASE_URL"),
            bind: parse("MNOTE_BIND", "127.0.0.1:8080".parse()?)?,
            data_dir,
            grantable_roots,
            tenant_roots: parse("MNOTE_TENANT_ROOTS", TenantRootsMode::Strict)?,
            allow_hard_links: parse("MNOTE_ALLOW_HARD_LINKS", false)?,
            public_url,
            cookie_secure: parse("MNOTE_COOKIE_SECURE", https)?,
            session_idle: Duration::from_secs(60 * parse("MNOTE_SESSION_IDLE_MINUTES", 120u64)?),
            session_absolute: Duration::from_secs(3600 * parse("MNOTE_SESSION_ABSOLUTE_HOURS", 24 * 7u64)?),
            upload_max_bytes: parse("MNOTE_UPLOAD_MAX_BYTES", 100 * 1024 * 1024u64)?,
            mcp_rate_limit_per_minute: parse("MNOTE_MCP_RATE_LIMIT", 120u32)?,
            mcp_max_body_bytes: parse("MNOTE_MCP_MAX_BODY_BYTES", 1024 * 1024usize)?,
            sse_recheck: Duration::from_millis((1000.0 * parse("MNOTE_SSE_RECHECK_SECS", 5.0f64)?.max(0.1)) as u64),
            sse_max_per_user: parse("MNOTE_SSE_MAX_PER_USER", 8usize)?.max(1),
            login_max_failures: parse("MNOTE_LOGIN_MAX_FAILURES", 5i64)?,
            login_window: Duration::from_secs(60 * parse("MNOTE_LOGIN_WINDOW_MINUTES", 15u64)?),
            db_max_connections: parse("MNOTE_DB_MAX_CONNECTIONS", 10u32)?,
            read_database_url: read_database_url()?,
            read_max_lag: Duration::from_millis(parse("MNOTE_READ_MAX_LAG_MS", 5000u64)?),
            trust_proxy: parse("MNOTE_TRUST_PROXY", false)?,
            ingest_workers: parse("MNOTE_INGEST_WORKERS", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))?,
            parse_timeout: Duration::from_secs(parse("MNOTE_PARSE_TIMEOUT_SECS", 600u64)?),
            delete_grace: Duration::from_secs(parse("MNOTE_DELETE_GRACE_SECS", 7 * 24 * 3600u64)?),
            audit_retention_days: parse("MNOTE_AUDIT_RETENTION_DAYS", 365u32)?.max(30),
            parse_memory_bytes: 1024 * 1024 * parse("MNOTE_PARSE_MEMORY_MB", 4096u64)?,
            parse_max_bytes: parse("MNOTE_PARSE_MAX_BYTES", 512 * 1024 * 1024u64)?,
            parse_max_pages: parse("MNOTE_PARSE_MAX_PAGES", 5000u64)?,
            parse_max_rows: parse("MNOTE_PARSE_MAX_ROWS", 200_000u64)?.max(1),
            parser_exe: parser_exe_beside(&std::env::current_exe().context("locating the mnote executable")?),
            soffice: soffice_from(var("MNOTE_SOFFICE")),
            rescan_interval: Duration::from_secs(parse("MNOTE_RESCAN_SECS", 300u64)?.max(5)),
            mineru_token: var("MNOTE_MINERU_TOKEN").map(|t| SecretString::new(t.trim())),
            mineru_url: var("MNOTE_MINERU_URL")
                .map(|u| u.trim().trim_end_matches('/').to_string())
                .unwrap_or_else(|| "https://mineru.net".into()),
            mineru_poll_interval: Duration::from_secs(parse("MNOTE_MINERU_POLL_SECS", 5u64)?.max(1)),
            mineru_timeout: Duration::from_secs(parse("MNOTE_MINERU_TIMEOUT_SECS", 900u64)?.max(10)),
            lexical_mirror: parse("MNOTE_LEXICAL_MIRROR", LexicalMirror::Background)?,
            vector_retry_min: Duration::from_millis(parse("MNOTE_VECTOR_RETRY_MIN_MS", 2000u64)?.max(10)),
            vector_retry_max: Duration::from_secs(parse("MNOTE_VECTOR_RETRY_MAX_SECS", 300u64)?.max(1)),
            rag,
            metrics_token: var("MNOTE_METRICS_TOKEN").map(|t| SecretString::new(t.trim())),
            agents: AgentsConfig::from_env()?,
            shutdown_grace: Duration::from_secs(parse("MNOTE_SHUTDOWN_GRACE_SECS", 10u64)?),
        })
    }

    /// A configuration for tests: no environment read, small limits and timeouts, every search
    /// through the lexical mirror (`Inline`, deterministic), MinerU pointed at a closed port.
    /// `parser_exe` is this executable; tests that parse set it to the `mnote` binary.
    pub fn for_tests(database_url: String, data_dir: PathBuf, grantable_roots: Vec<PathBuf>) -> Self {
        Config {
            database_url,
            migration_database_url: None,
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            grantable_roots,
            tenant_roots: TenantRootsMode::Strict,
            allow_hard_links: false,
            public_url: None,
            cookie_secure: false,
            session_idle: Duration::from_secs(3600),
            session_absolute: Duration::from_secs(86400),
            upload_max_bytes: 1024 * 1024,
            mcp_rate_limit_per_minute: 120,
            mcp_max_body_bytes: 256 * 1024,
            sse_recheck: Duration::from_secs(5),
            sse_max_per_user: 8,
            login_max_failures: 5,
            login_window: Duration::from_secs(900),
            db_max_connections: 8,
            read_database_url: None,
            read_max_lag: Duration::from_secs(5),
            trust_proxy: false,
            ingest_workers: 2,
            parse_timeout: Duration::from_secs(120),
            delete_grace: Duration::from_secs(7 * 24 * 3600),
            audit_retention_days: 365,
            parse_memory_bytes: 4 << 30,
            parse_max_bytes: 64 << 20,
            parse_max_pages: 500,
            parse_max_rows: 200_000,
            parser_exe: parser_exe_beside(&std::env::current_exe().unwrap_or_default()),
            soffice: soffice_from(std::env::var("MNOTE_SOFFICE").ok()),
            rescan_interval: Duration::from_secs(300),
            mineru_token: None,
            mineru_url: "http://127.0.0.1:9".into(),
            mineru_poll_interval: Duration::from_millis(50),
            mineru_timeout: Duration::from_secs(60),
            lexical_mirror: LexicalMirror::Inline,
            vector_retry_min: Duration::from_secs(2),
            vector_retry_max: Duration::from_secs(300),
            rag: RagConfig::for_tests(),
            metrics_token: None,
            agents: AgentsConfig::for_tests(),
            shutdown_grace: Duration::from_secs(10),
        }
    }

    pub fn uploads_dir(&self) -> PathBuf {
        self.data_dir.join("uploads")
    }
}

/// What `mnote migrate` needs; it runs without the rest of the server's configuration.
pub struct MigrationTarget {
    /// The owner role's URL: MNOTE_MIGRATION_DATABASE_URL, else DATABASE_URL.
    pub owner_url: String,
    /// DATABASE_URL (the app role), when set.
    pub app_url: Option<String>,
}

impl MigrationTarget {
    pub fn from_env() -> anyhow::Result<Self> {
        let owner_url = std::env::var("MNOTE_MIGRATION_DATABASE_URL")
            .or_else(|_| std::env::var("DATABASE_URL"))
            .context("set MNOTE_MIGRATION_DATABASE_URL (the owner role) to migrate")?;
        Ok(MigrationTarget { owner_url, app_url: std::env::var("DATABASE_URL").ok() })
    }
}

/// The default of MNOTE_RUN_LEASE_SECS.
pub const DEFAULT_RUN_LEASE: Duration = Duration::from_secs(30);

/// How long a run's lease lasts without a heartbeat (MNOTE_RUN_LEASE_SECS, default 30, at
/// least 3): a replica that dies holding runs has them marked `interrupted` (`worker_lost`)
/// by another one within about this long plus a third of it. The heartbeat renews the lease
/// every third of it. Read on its own, once per process: the journal's SQL and the executor
/// take no configuration ([`Config::from_env`] refuses a bad value).
pub fn run_lease() -> Duration {
    static LEASE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *LEASE.get_or_init(|| run_lease_from_env().unwrap_or(DEFAULT_RUN_LEASE))
}

fn run_lease_from_env() -> anyhow::Result<Duration> {
    Ok(Duration::from_secs(parse("MNOTE_RUN_LEASE_SECS", DEFAULT_RUN_LEASE.as_secs())?.max(3)))
}

/// MNOTE_LOG_FORMAT=json: JSON log lines. Read on its own because logging starts before (and
/// without) the server configuration: every subcommand and the parser children log.
pub fn log_format_json() -> bool {
    std::env::var("MNOTE_LOG_FORMAT").is_ok_and(|v| v == "json")
}

/// Parse and canonicalise the allow-list. Roots that do not exist are skipped with a warning;
/// a root inside (or containing) the data directory is refused.
pub fn parse_roots(raw: Option<&str>, data_dir: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut roots = Vec::new();
    for part in raw.unwrap_or_default().split(':').filter(|p| !p.trim().is_empty()) {
        let p = PathBuf::from(part.trim());
        if !p.is_absolute() {
            bail!("MNOTE_GRANTABLE_ROOTS entries must be absolute paths: {part:?}");
        }
        match p.canonicalize() {
            Ok(c) => {
                if c.starts_with(data_dir) || data_dir.starts_with(&c) {
                    bail!("MNOTE_GRANTABLE_ROOTS entry {} overlaps the data directory {}", c.display(), data_dir.display());
                }
                roots.push(c)
            }
            Err(e) => tracing::warn!("grantable root {part:?} skipped: {e}"),
        }
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_debug() {
        let s = SecretString::new("tok-123");
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        assert_eq!(s.expose(), "tok-123");
    }

    #[test]
    fn the_acp_sandbox_setting_is_on_or_off_and_its_paths_absolute() {
        assert_eq!("on".parse::<AcpSandbox>(), Ok(AcpSandbox::On));
        assert_eq!("off".parse::<AcpSandbox>(), Ok(AcpSandbox::Off));
        for bad in ["", "no", "OFF", "false", "0"] {
            assert!(bad.parse::<AcpSandbox>().is_err(), "{bad}: a value that does not parse is no default");
        }
        let paths = absolute_paths("X", Some("/opt/agent: /srv/agent-home :")).unwrap();
        assert_eq!(paths, [PathBuf::from("/opt/agent"), PathBuf::from("/srv/agent-home")]);
        assert!(absolute_paths("X", None).unwrap().is_empty());
        assert!(absolute_paths("X", Some("/opt/a:relative/b")).is_err());
    }

    #[test]
    fn acp_env_passes_names_but_never_the_servers_settings() {
        assert_eq!(acp_env_names(" OPENAI_API_KEY, HTTPS_PROXY ,").unwrap(), ["OPENAI_API_KEY", "HTTPS_PROXY"]);
        assert!(acp_env_names("").unwrap().is_empty());
        for bad in ["MNOTE_EMBED_API_KEY", "DATABASE_URL", "PGPASSWORD", "pgpassword", "A=B", "1X"] {
            assert!(acp_env_names(bad).is_err(), "{bad}");
        }
    }

    /// Issue 26 item 3: unset → the public providers (https only, no private address); set →
    /// exactly what the operator listed; `none` → nothing.
    #[test]
    fn the_agent_allow_list_defaults_to_public_https_providers() {
        let d = agent_allowed_urls(None);
        assert_eq!(d, agent_allowed_urls(Some("  ")));
        assert!(d.iter().any(|u| u == "https://api.openai.com/v1"), "{d:?}");
        for u in &d {
            let url = reqwest::Url::parse(u).unwrap();
            assert_eq!(url.scheme(), "https", "{u}");
            let host = url.host_str().unwrap();
            assert!(host.parse::<std::net::IpAddr>().is_err() && host.contains('.') && !host.ends_with(".local"), "{u}");
        }
        assert_eq!(
            agent_allowed_urls(Some("http://10.0.0.5:8000/v1, http://127.0.0.1:11434/v1,")),
            ["http://10.0.0.5:8000/v1", "http://127.0.0.1:11434/v1"]
        );
        assert!(agent_allowed_urls(Some("none")).is_empty());
        assert!(agent_allowed_urls(Some("NONE")).is_empty());
    }

    #[test]
    fn redacts_password() {
        assert_eq!(redact("postgres://u:secret@h:5/db"), "postgres://u:***@h:5/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn roots_must_not_overlap_data_dir() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let data = data.canonicalize().unwrap();
        assert!(parse_roots(Some(data.to_str().unwrap()), &data).is_err());
        assert!(parse_roots(Some(d.path().to_str().unwrap()), &data).is_err());
        assert!(parse_roots(Some("relative/path"), &data).is_err());
        let docs = d.path().join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        let roots = parse_roots(Some(&format!("{}:/nonexistent-xyz", docs.display())), &data).unwrap();
        assert_eq!(roots, vec![docs.canonicalize().unwrap()]);
    }
}
