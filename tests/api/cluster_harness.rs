//! `TestCluster`: real `mnote serve` processes (app replicas) on one test database, one data
//! directory and one grantable root, as `deploy/README.md` runs them behind a load balancer.
//! Each replica binds a random port (it logs the address it bound), is ready once `/readyz`
//! answers 200, and is killed (SIGKILL) when the cluster is dropped. The database, the tenants
//! and the documents come from a [`TestApp`] (its in-process server is not used by the
//! cluster tests; its pools are, to read what the replicas wrote).

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};

use futures_util::StreamExt;
use reqwest::StatusCode;
use uuid::Uuid;

use crate::helpers::*;

/// One `mnote serve` process.
pub struct Replica {
    pub base: String,
    pub pid: u32,
    child: Option<Child>,
    /// Its log lines (stderr), shown when a test fails.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    /// Whether `owner` (a run's `lease_owner`: `<pid>:<uuid>`) is this process.
    pub fn owns_lease(&self, owner: &str) -> bool {
        owner.split_once(':').is_some_and(|(pid, _)| pid == self.pid.to_string())
    }

    /// Whether `worker` (an ingest job's `worker`: `<host>/<node>/<pid>.<start>#<i>`) is one of
    /// this process's ingest workers.
    pub fn owns_worker(&self, worker: &str) -> bool {
        worker_pid(worker) == Some(self.pid)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL
            let _ = c.wait();
        }
    }
}

/// The PID in an ingest job's `worker` column.
pub fn worker_pid(worker: &str) -> Option<u32> {
    let proc_ = worker.rsplit_once('#')?.0.rsplit('/').next()?;
    proc_.split_once('.')?.0.parse().ok()
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

pub struct TestCluster {
    pub app: TestApp,
    pub replicas: Vec<Replica>,
    /// The environment every replica gets (each may add its own).
    env: Vec<(String, String)>,
}

/// The environment a replica runs with besides the database, data dir and roots: no embedder
/// (unless a test asks), one ingest worker, the lexical mirror inline (every search through
/// it), and one sealing key for all replicas (a secret sealed by one is opened by the others).
fn base_env() -> Vec<(String, String)> {
    let key = format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
    [
        ("MNOTE_EMBEDDER", "none"),
        ("MNOTE_INGEST_WORKERS", "1"),
        ("MNOTE_LEXICAL_MIRROR", "inline"),
        ("MNOTE_DB_MAX_CONNECTIONS", "6"),
        ("MNOTE_SECRET_KEY", key.as_str()),
        ("RUST_LOG", "warn,mnote=info"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl TestCluster {
    /// `n` replicas on a fresh test database; `env` is added to every replica's environment.
    pub async fn start(n: usize, env: &[(&str, &str)]) -> TestCluster {
        Self::on(spawn_app().await, n, env).await
    }

    /// `n` replicas on `app`'s database.
    pub async fn on(app: TestApp, n: usize, env: &[(&str, &str)]) -> TestCluster {
        let mut all = base_env();
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut c = TestCluster { app, replicas: Vec::new(), env: all };
        for _ in 0..n {
            c.add(&[]).await;
        }
        c
    }

    /// Start one more replica (its own `extra` environment on top of the cluster's); its index.
    pub async fn add(&mut self, extra: &[(&str, &str)]) -> usize {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnote"));
        cmd.arg("serve")
            .env("DATABASE_URL", &self.app.config.database_url)
            .env_remove("MNOTE_MIGRATION_DATABASE_URL")
            .env_remove("MNOTE_RAG_ALLOWED_URLS")
            .env_remove("MNOTE_PUBLIC_URL")
            .env("MNOTE_DATA_DIR", &self.app.config.data_dir)
            .env("MNOTE_GRANTABLE_ROOTS", &self.app.docs)
            .env("MNOTE_BIND", "127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(extra.iter().copied()) {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start mnote serve");
        let pid = child.id();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let (stderr, lines) = (child.stderr.take().unwrap(), log.clone());
        // Drains the log for the process's whole life (a full pipe would block it).
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = bound_address(&line) {
                    let _ = tx.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
        let mut replica = Replica { base: String::new(), pid, child: Some(child), log };
        let addr = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(120)))
            .await
            .unwrap()
            .unwrap_or_else(|_| panic!("replica {pid} did not start listening:\n{}", replica.log.lock().unwrap().join("\n")));
        replica.base = format!("http://{addr}");
        // Ready: the database answers and is migrated.
        mnote::platform::http::install_tls_provider();
        let probe = reqwest::Client::new();
        let mut ready = false;
        for _ in 0..600 {
            if probe.get(format!("{}/readyz", replica.base)).send().await.is_ok_and(|r| r.status() == StatusCode::OK) {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "replica {pid} never became ready:\n{}", replica.log.lock().unwrap().join("\n"));
        self.replicas.push(replica);
        self.replicas.len() - 1
    }

    pub fn replica(&self, i: usize) -> &Replica {
        &self.replicas[i]
    }

    /// A client of replica `i`.
    pub fn client(&self, i: usize) -> Client {
        Client::new(&self.replicas[i].base)
    }

    /// A bearer-token client of replica `i` (the same token works on every replica).
    pub fn with_token(&self, i: usize, token: &str) -> Client {
        let mut c = self.client(i);
        c.bearer = Some(token.to_string());
        c
    }

    /// The same client pointed at replica `i` (its cookies, its CSRF token, its bearer token).
    pub fn moved(&self, c: &Client, i: usize) -> Client {
        Client { base: self.replicas[i].base.clone(), ..c.clone() }
    }

    /// SIGKILL replica `i` (no shutdown: its leases are left to expire).
    pub fn kill(&mut self, i: usize) {
        self.replicas[i].kill();
    }

    /// SIGTERM replica `i` (a rolling update's stop) and wait until it exits; its exit status,
    /// `None` when it was still running after `guard` (then it is killed).
    pub async fn terminate(&mut self, i: usize, guard: Duration) -> Option<std::process::ExitStatus> {
        let r = &mut self.replicas[i];
        let child = r.child.as_mut()?;
        // SAFETY: kill(2) on our own child process, not yet reaped; no memory is touched.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = tokio::time::Instant::now() + guard;
        while tokio::time::Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                r.child = None;
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        r.kill();
        None
    }

    /// Every replica's log, for a failure message.
    pub fn logs(&self) -> String {
        self.replicas
            .iter()
            .enumerate()
            .map(|(i, r)| format!("--- replica {i} (pid {}) ---\n{}", r.pid, r.log.lock().unwrap().join("\n")))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `listening on http://127.0.0.1:PORT` (the log may colour its parts).
fn bound_address(line: &str) -> Option<String> {
    let rest = &line[line.find("listening on http://")? + "listening on http://".len()..];
    let addr: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':').collect();
    addr.contains(':').then_some(addr)
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub kind: String,
    pub data: String,
}

/// An open SSE response, parsed as it arrives.
pub struct SseStream {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl SseStream {
    /// `GET path` with `Accept: text/event-stream` (and `Last-Event-ID` when given): 200.
    pub async fn open(c: &Client, path: &str, last_event_id: Option<&str>) -> SseStream {
        let mut req = c.req(reqwest::Method::GET, path).header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        assert_eq!(status, StatusCode::OK, "{path}: {}", resp.text().await.unwrap_or_default());
        SseStream { body: Box::pin(resp.bytes_stream()), buf: String::new() }
    }

    /// The next event; `None` when the stream ended. Comments (keep-alives) are skipped.
    /// Waits at most `guard` (a hang guard: the test fails rather than hangs).
    pub async fn next_within(&mut self, guard: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + guard;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut kind, mut data) = (None, String::from("message"), Vec::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        kind = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    }
                }
                if data.is_empty() && id.is_none() {
                    continue; // a comment
                }
                return Some(SseEvent { id, kind, data: data.join("\n") });
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Ok(Some(Ok(b))) => self.buf.push_str(&String::from_utf8_lossy(&b)),
                Ok(_) => return None,
                Err(_) => panic!("no server-sent event within {guard:?} (hang guard)"),
            }
        }
    }

    pub async fn next(&mut self) -> Option<SseEvent> {
        self.next_within(Duration::from_secs(120)).await
    }
}
