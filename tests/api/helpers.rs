//! `spawn_app()` and a small HTTP client that speaks the app's session + CSRF protocol.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    str::FromStr,
    sync::Arc,
    time::Duration,
};

use mnote::{
    config::Config,
    db::{self, Scope, TenantTx},
    search::embed::Embedder,
    startup,
    state::AppState,
    tenants,
};
use reqwest::{Response, StatusCode, header};
use serde_json::{Value, json};
use sqlx::{
    Connection, Executor, PgPool,
    postgres::{PgConnectOptions, PgConnection, PgPoolOptions},
};
use uuid::Uuid;

pub const OWNER_ROLE: &str = "mnote_owner";
pub const APP_ROLE: &str = "mnote_app";
pub const PASSWORD: &str = "correct horse battery staple";

pub fn admin_url() -> String {
    std::env::var("MNOTE_TEST_ADMIN_URL")
        .expect("MNOTE_TEST_ADMIN_URL is not set: run the tests through `./dev test`, which starts Postgres")
}

/// A URL of `db` for `role`, on the admin URL's server, with the role's password when one of
/// the URLs `./dev` exports names that role (its cluster refuses TCP logins without one).
pub fn role_url(role: &str, db: &str) -> String {
    let opts = PgConnectOptions::from_str(&admin_url()).expect("admin url");
    let password = ["MNOTE_TEST_ADMIN_URL", "DATABASE_URL", "MNOTE_MIGRATION_DATABASE_URL"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .filter_map(|u| reqwest::Url::parse(&u).ok())
        .find(|u| u.username() == role)
        .and_then(|u| u.password().map(str::to_string));
    let mut url = reqwest::Url::parse(&format!("postgres://{}:{}/{db}", opts.get_host(), opts.get_port())).expect("role url");
    url.set_username(role).expect("role name");
    url.set_password(password.as_deref()).expect("password");
    url.to_string()
}

/// Drop databases left by earlier runs, once per test binary (every test waits for it: a
/// test's own database must not be created before the cleanup has listed the old ones).
async fn cleanup_old_databases() {
    static DONE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    DONE.get_or_init(|| async {
        let mut admin = PgConnection::connect(&admin_url()).await.expect("connect admin");
        let old: Vec<String> = sqlx::query_scalar("select datname from pg_database where datname like 'mnote_t_%'")
            .fetch_all(&mut admin)
            .await
            .unwrap();
        // Without FORCE: a database another test binary is using right now (it holds
        // connections) is left alone; leftovers of finished or crashed runs go.
        for d in old {
            let _ = admin.execute(format!("drop database if exists \"{d}\"").as_str()).await;
        }
        admin.close().await.ok();
    })
    .await;
}

pub struct TestApp {
    pub base: String,
    /// Connected as the confined app role (what the server uses).
    pub pool: PgPool,
    /// Connected as the owner role (migrations).
    pub owner_pool: PgPool,
    pub db_name: String,
    pub config: Config,
    /// The operator's grantable root (a temp dir).
    pub docs: PathBuf,
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The server's vector health (shared with its searches; the backlog helpers use it too).
    pub vector_health: Arc<mnote::search::vector_health::VectorHealth>,
    _tmp: tempfile::TempDir,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_full(tweak, None).await
}

/// The local all-MiniLM-L6-v2, loaded once per test binary. Missing weights fail loudly.
pub fn minilm() -> Arc<dyn Embedder> {
    static MODEL: std::sync::OnceLock<Arc<dyn Embedder>> = std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = std::env::var_os("MNOTE_EMBED_MODEL_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(mnote::search::embed::default_model_dir);
            Arc::new(mnote::search::embed::LocalMiniLm::load(&dir).unwrap_or_else(|e| panic!("{e}: run ./dev provision")))
        })
        .clone()
}

/// An app whose server and workers use `embedder` (its HNSW index is created like `mnote migrate` does).
pub async fn spawn_app_full(tweak: impl FnOnce(&mut Config), embedder: Option<Arc<dyn Embedder>>) -> TestApp {
    // As `mnote`'s main does: rustls' provider (ring) for the test's own reqwest clients too.
    mnote::platform::http::install_tls_provider();
    cleanup_old_databases().await;
    let db_name = format!("mnote_t_{}", Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&admin_url()).await.expect("connect admin");
    admin.execute(format!("create database \"{db_name}\" owner {OWNER_ROLE}").as_str()).await.expect("create test database");
    // Tests trade durability for speed in their own databases only; the cluster (shared with
    // `./dev up`) keeps Postgres's durable defaults.
    admin
        .execute(format!("alter database \"{db_name}\" set synchronous_commit = off").as_str())
        .await
        .expect("synchronous_commit off for the test database");
    admin.close().await.ok();
    let owner_pool = PgPoolOptions::new().max_connections(2).connect(&role_url(OWNER_ROLE, &db_name)).await.unwrap();
    db::migrate(&owner_pool, Some(APP_ROLE)).await.expect("migrate");
    let database_url = role_url(APP_ROLE, &db_name);
    let pool = PgPoolOptions::new().max_connections(8).connect(&database_url).await.unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let base_dir = tmp.path().canonicalize().unwrap();
    let docs = base_dir.join("docs");
    let data_dir = base_dir.join("data");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::create_dir_all(&data_dir).unwrap();
    // Config::for_tests: small limits and timeouts, `lexical_mirror: Inline` (every search
    // through the mirror, deterministically; the SQL ranking and the background mode are
    // compared with it in search.rs), MinerU on a closed port.
    let mut config = Config::for_tests(database_url, data_dir.clone(), vec![docs.clone()]);
    // The parser child is the `mnote` binary (env! of a bin target only works in tests).
    // The lean parser binary, as a server installed beside it uses (`config::parser_exe_beside`).
    config.parser_exe = PathBuf::from(env!("CARGO_BIN_EXE_mnote-parse"));
    // The address the server really listens on (what `mnote serve` records after binding).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    config.bind = addr;
    tweak(&mut config);
    if let Some(e) = &embedder {
        mnote::search::vectors::ensure_index(&owner_pool, &mnote::search::vectors::Space::of(e.as_ref()))
            .await
            .expect("vector index");
    }
    let state = AppState::new(pool.clone(), config.clone()).with_embedder(embedder.clone());
    let vector_health = state.vector_health.clone();
    let app = startup::build_router(state);
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
    });
    TestApp { base: format!("http://{addr}"), pool, owner_pool, db_name, config, docs, embedder, vector_health, _tmp: tmp }
}

pub struct Seeded {
    pub tenant_id: Uuid,
    pub user_id: Uuid,
}

impl TestApp {
    pub async fn bootstrap(&self, tenant: &str, email: &str) -> Seeded {
        let b = tenants::bootstrap(&self.pool, tenant, email, PASSWORD).await.expect("bootstrap");
        // The operator lets every test tenant grant under `docs` (as `mnote tenant roots add`).
        mnote::grants::roots::add(&self.pool, &self.config, b.tenant_id, &self.docs.to_string_lossy())
            .await
            .expect("tenant root");
        Seeded { tenant_id: b.tenant_id, user_id: b.user_id }
    }

    pub async fn add_user(&self, tenant_id: Uuid, email: &str, role: &str) -> Uuid {
        tenants::add_user(&self.pool, tenant_id, email, role.parse().unwrap(), Some(PASSWORD)).await.expect("add user").0
    }

    /// An API token for the member, created through the library like `mnote token create`.
    pub async fn token(&self, tenant_id: Uuid, user_id: Uuid) -> String {
        let mut tx = TenantTx::begin(&self.pool, tenant_id, Scope::User(user_id)).await.unwrap();
        let (_, plain) = mnote::auth::tokens::create(&mut tx, tenant_id, user_id, "test").await.unwrap();
        tx.commit().await.unwrap();
        plain
    }

    pub fn client(&self) -> Client {
        Client::new(&self.base)
    }

    /// A browser-like client signed in as `email`.
    pub async fn login(&self, email: &str) -> Client {
        let c = self.client();
        let r = c.login(email, PASSWORD).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "login as {email} failed");
        c
    }

    /// A bearer-token client.
    pub async fn api(&self, tenant_id: Uuid, user_id: Uuid) -> Client {
        let mut c = self.client();
        c.bearer = Some(self.token(tenant_id, user_id).await);
        c
    }

    /// Create `rel` under the grantable root with `content`.
    pub fn write_doc(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.docs.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    /// Run every ready ingest job (as the server's workers would) until the queue is empty.
    pub async fn run_jobs(&self) -> Vec<mnote::ingest::pipeline::Outcome> {
        let mut out = Vec::new();
        let mut cursor = 0;
        let lease = Duration::from_secs(300);
        mnote::ingest::pipeline::drain(&self.pool, &self.config, "test", lease, &mut cursor, |o| out.push(o)).await.unwrap();
        out
    }

    /// Embed every block still lacking a vector (what idle workers do). Returns the count.
    pub async fn run_embeddings(&self) -> usize {
        let e = self.embedder.as_ref().expect("this app has no embedder (use spawn_app_full)");
        let mut total = 0;
        loop {
            let n = mnote::search::vectors::embed_backlog_round(&self.pool, e).await.expect("embed backlog");
            if n == 0 {
                return total;
            }
            total += n;
        }
    }

    pub fn docs_path(&self, rel: &str) -> String {
        self.docs.join(rel).to_string_lossy().into_owned()
    }

    /// Grant the docs folder `folder` to all members, create a KB from `kb` (the create body),
    /// register the folder in it and index it; the KB's id.
    /// What a Postgres restart looks like to the app (every backend of its database ends, the
    /// LISTEN connections too), then source `id` marked failed (`pdf_malformed`) with the
    /// notify trigger off: no notification exists, only a re-read of the state can show it.
    pub async fn drop_connections_and_fail_silently(&self, tenant: Uuid, id: &str) {
        let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url()).await.unwrap();
        sqlx::query("select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()")
            .bind(&self.db_name)
            .execute(&mut admin)
            .await
            .unwrap();
        let mut tx = self.owner_pool.begin().await.unwrap();
        sqlx::query("select set_config('app.tenant_id', $1, true), set_config('app.scope', 'system', true)")
            .bind(tenant.to_string())
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query("alter table source disable trigger source_notify").execute(&mut *tx).await.unwrap();
        sqlx::query(
            "update source set status = 'failed', error_code = 'pdf_malformed', error_message = 'x', progress_phase = null
             where id = $1",
        )
        .bind(id.parse::<Uuid>().unwrap())
        .execute(&mut *tx)
        .await
        .unwrap();
        sqlx::query("alter table source enable trigger source_notify").execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
    }

    pub async fn indexed_folder_kb(&self, api: &Client, folder: &str, kb: Value) -> String {
        let (st, g) = api
            .post_json("/api/grants", json!({"path": self.docs_path(folder), "allMembers": true, "permission": "read_index"}))
            .await;
        assert_eq!(st, StatusCode::CREATED, "{g}");
        let (_, kb) = api.post_json("/api/kbs", kb).await;
        let kb = kb["id"].as_str().unwrap().to_string();
        let (st, r) = api.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": self.docs_path(folder)})).await;
        assert!(st.is_success(), "{r}");
        self.run_jobs().await;
        kb
    }
}

#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub bearer: Option<String>,
    pub csrf: Option<String>,
}

pub fn csrf_from_html(html: &str) -> Option<String> {
    let doc = scraper::Html::parse_document(html);
    let sel = scraper::Selector::parse(r#"meta[name="csrf-token"]"#).unwrap();
    doc.select(&sel).next().and_then(|m| m.value().attr("content")).map(String::from).filter(|s| !s.is_empty())
}

impl Client {
    pub fn new(base: &str) -> Self {
        mnote::platform::http::install_tls_provider();
        let http = reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Client { http, base: base.to_string(), bearer: None, csrf: None }
    }

    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method.clone(), format!("{}{path}", self.base));
        if let Some(t) = &self.bearer {
            r = r.bearer_auth(t);
        } else if let (Some(c), false) = (&self.csrf, method == reqwest::Method::GET) {
            r = r.header("x-csrf-token", c);
        }
        r
    }

    pub async fn get(&self, path: &str) -> Response {
        self.req(reqwest::Method::GET, path).send().await.unwrap()
    }

    pub async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        json_of(self.get(path).await).await
    }

    pub async fn send_json(&self, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        json_of(self.req(m, path).json(&body).send().await.unwrap()).await
    }

    pub async fn post_json(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send_json("POST", path, body).await
    }

    pub async fn delete(&self, path: &str) -> StatusCode {
        self.req(reqwest::Method::DELETE, path).send().await.unwrap().status()
    }

    /// Post an HTML form; the CSRF field is added from the last page seen unless given.
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> Response {
        let mut form: Vec<(String, String)> = fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if !fields.iter().any(|(k, _)| *k == "csrf_token")
            && let Some(c) = &self.csrf
        {
            form.push(("csrf_token".into(), c.clone()));
        }
        self.http.post(format!("{}{path}", self.base)).form(&form).send().await.unwrap()
    }

    /// Load a page and remember its CSRF token, like a browser rendering a form.
    pub async fn page(&mut self, path: &str) -> (StatusCode, String) {
        let r = self.get(path).await;
        let status = r.status();
        let html = r.text().await.unwrap();
        if let Some(c) = csrf_from_html(&html) {
            self.csrf = Some(c);
        }
        (status, html)
    }

    pub async fn login(&self, email: &str, password: &str) -> Response {
        let r = self.get("/login").await;
        let html = r.text().await.unwrap();
        let csrf = csrf_from_html(&html).expect("login page has a CSRF token");
        self.http
            .post(format!("{}/login", self.base))
            .form(&[("email", email), ("password", password), ("csrf_token", &csrf)])
            .send()
            .await
            .unwrap()
    }
}

impl Client {
    /// After `login`, fetch a page so JSON calls can carry the CSRF header.
    pub async fn with_csrf(mut self) -> Self {
        self.page("/").await;
        assert!(self.csrf.is_some(), "no CSRF token on the dashboard");
        self
    }
}

pub async fn json_of(r: Response) -> (StatusCode, Value) {
    let status = r.status();
    let is_json = r.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.to_str().unwrap_or("").contains("json"));
    let text = r.text().await.unwrap();
    let v = if is_json { serde_json::from_str(&text).unwrap() } else { json!({ "nonJson": text }) };
    (status, v)
}

pub fn error_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<no error code>")
}

pub fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

impl Client {
    pub async fn delete_json(&self, path: &str) -> (StatusCode, Value) {
        json_of(self.req(reqwest::Method::DELETE, path).send().await.unwrap()).await
    }
}

impl TestApp {
    /// Wait until the tenant's audit log holds `n` rows of `action` (a failed sign-in is
    /// recorded after its answer, so its answer's time does not depend on the account), up to
    /// ten seconds; panics with what it holds otherwise.
    pub async fn audit_rows(&self, tenant: Uuid, action: &str, n: i64) {
        let mut seen = -1;
        for _ in 0..400 {
            let mut tx = TenantTx::begin(&self.pool, tenant, Scope::System).await.unwrap();
            seen = sqlx::query_scalar("select count(*) from audit_event where tenant_id = $1 and action = $2")
                .bind(tenant)
                .bind(action)
                .fetch_one(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            if seen == n {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("{action}: {seen} audit rows, not {n}");
    }
}
