//! ChromeDriver + headless Chromium, one pair per test, both killed when the test ends
//! (also when it panics): ChromeDriver runs in its own process group, and Chromium, which it
//! starts, stays in that group.

use std::{
    net::TcpListener,
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use serde_json::{Value, json};

/// Upper bound of every wait (page loads, elements, layout). Waits poll; nothing asserts a duration.
pub const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var).ok().filter(|s| !s.is_empty()).unwrap_or_else(|| default.to_string())
}

/// `target/browser-artifacts/` (screenshots, driver logs), created on first use.
pub fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p) })
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("browser-artifacts");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A ChromeDriver process (and, through its process group, the Chromium it starts).
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start(name: &str) -> Driver {
        let exe = env_or("MNOTE_CHROMEDRIVER", "/usr/bin/chromedriver");
        assert!(
            std::path::Path::new(&exe).exists(),
            "{exe} is missing: run the tests through `./dev test`, which installs chromium and chromium-driver"
        );
        let log = std::fs::File::create(artifacts_dir().join(format!("{name}.chromedriver.log"))).unwrap();
        // A port taken between this probe and ChromeDriver's bind makes it exit: try again.
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new(&exe)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log.try_clone().unwrap())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("start {exe}: {e}"));
            let mut d = Driver { child, url: format!("http://127.0.0.1:{port}") };
            if d.ready().await {
                return d;
            }
        }
        panic!("chromedriver did not start (see target/browser-artifacts/{name}.chromedriver.log)");
    }

    /// Poll `/status` until it answers ready; false if the process exited.
    async fn ready(&mut self) -> bool {
        mnote::platform::http::install_tls_provider();
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(r) = http.get(format!("{}/status", self.url)).send().await
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                return true;
            }
            tokio::time::sleep(POLL).await;
        }
        false
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: ChromeDriver and the browser processes it started.
        let pgid = self.child.id() as libc::pid_t;
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// A headless Chromium session.
pub struct Browser {
    pub c: Client,
    pub name: String,
    base: String,
    // Dropped after the session: the driver (and browser) first, then the profile dir.
    driver: Option<Driver>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// A fresh browser (new empty profile) with a 1280×900 window, for the app at `base`.
    pub async fn start(name: &str, base: &str) -> Browser {
        Browser::start_in(name, base, None).await
    }

    /// [`Browser::start`], the browser asking for pages in `accept_language` (e.g. `zh-CN`):
    /// what a visitor without a session (the sign-in page) is shown in.
    pub async fn start_in(name: &str, base: &str, accept_language: Option<&str>) -> Browser {
        let driver = Driver::start(name).await;
        let profile = tempfile::tempdir().unwrap();
        let args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(), // root
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            // Off the network (the machine has none; without these Chromium keeps trying).
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--no-default-browser-check".into(),
            "--disable-default-apps".into(),
            "--disable-extensions".into(),
            "--disable-domain-reliability".into(),
            "--disable-client-side-phishing-detection".into(),
            "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication".into(),
            "--metrics-recording-only".into(),
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1".into(),
            "--password-store=basic".into(),
            "--mute-audio".into(),
            "--force-device-scale-factor=1".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut args = args;
        if let Some(l) = accept_language {
            args.push(format!("--lang={l}"));
        }
        let prefs = match accept_language {
            Some(l) => json!({ "intl.accept_languages": l }),
            None => json!({}),
        };
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": env_or("MNOTE_CHROMIUM", "/usr/bin/chromium"), "args": args, "prefs": prefs },
        });
        let caps = caps.as_object().unwrap().clone();
        let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&driver.url)
            .await
            .unwrap_or_else(|e| panic!("new WebDriver session: {e} (see target/browser-artifacts/{name}.chromedriver.log)"));
        Browser { c, name: name.to_string(), base: base.to_string(), driver: Some(driver), _profile: profile }
    }

    /// End the session and stop the driver.
    pub async fn finish(mut self) {
        let _ = self.c.clone().close().await;
        self.driver.take();
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn goto(&self, path: &str) {
        self.c.goto(&self.url(path)).await.unwrap_or_else(|e| panic!("goto {path}: {e}"));
    }

    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.c.execute(script, args).await.unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    pub async fn wait_for(&self, css: &str) -> Element {
        match self.c.wait().at_most(WAIT).every(POLL).for_element(Locator::Css(css)).await {
            Ok(e) => e,
            Err(e) => {
                let url = self.c.current_url().await.map(|u| u.to_string()).unwrap_or_default();
                self.screenshot("TIMEOUT").await;
                panic!("{}: no `{css}` on {url}: {e}", self.name)
            }
        }
    }

    pub async fn find(&self, css: &str) -> Element {
        self.c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{}: no `{css}`: {e}", self.name))
    }

    /// Poll `check` (a script returning a JSON value; `null`/`false` means "not yet") until it
    /// gives something else; panics with the last `describe` output after `WAIT`.
    pub async fn poll(&self, what: &str, check: &str, args: Vec<Value>) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let v = self.c.execute(check, args.clone()).await.unwrap_or(Value::Null);
            if !(v.is_null() || v == false) {
                return v;
            }
            if tokio::time::Instant::now() >= deadline {
                let url = self.c.current_url().await.map(|u| u.to_string()).unwrap_or_default();
                let body = self.js("return document.body ? document.body.innerText.slice(0, 1500) : ''", vec![]).await;
                self.screenshot("TIMEOUT").await;
                panic!("{}: timed out waiting for {what} on {url}\npage text: {body}", self.name);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Wait for a flash message that contains `text` and return its whole text. A page
    /// reached before the action may still show an earlier flash, so waiting for `.flash`
    /// alone can read the wrong one.
    pub async fn flash(&self, text: &str) -> String {
        let check = "const f = Array.from(document.querySelectorAll('.flash')).map(e => e.innerText)\
                     .find(t => t.includes(arguments[0])); return f === undefined ? null : f";
        self.poll(&format!("a flash with “{text}”"), check, vec![Value::String(text.into())])
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Wait for the document and its images to finish loading.
    pub async fn loaded(&self) {
        self.poll(
            "the page to load",
            "return document.readyState === 'complete' && Array.from(document.images).every(i => i.complete)",
            vec![],
        )
        .await;
    }

    /// Resize the window and wait until the layout viewport has the new width.
    pub async fn resize(&self, width: u32, height: u32) {
        self.c.set_window_size(width, height).await.unwrap();
        // Headless Chromium: the viewport gets the window's size (outerWidth may differ).
        self.poll(
            "the window to resize",
            "return Math.abs(window.innerWidth - arguments[0]) <= 1 && document.readyState === 'complete'",
            vec![json!(width)],
        )
        .await;
    }

    /// Save a PNG of the viewport as `target/browser-artifacts/<test>-<label>.png`.
    pub async fn screenshot(&self, label: &str) -> PathBuf {
        let png = self.c.screenshot().await.unwrap_or_else(|e| panic!("screenshot: {e}"));
        let path = artifacts_dir().join(format!("{}-{label}.png", self.name));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Sign in through the login form.
    pub async fn login(&self, email: &str, password: &str) {
        self.goto("/login").await;
        self.wait_for("form[action='/login'] input[name=email]").await.send_keys(email).await.unwrap();
        self.find("form[action='/login'] input[name=password]").await.send_keys(password).await.unwrap();
        self.find("form[action='/login'] button[type=submit]").await.click().await.unwrap();
        self.poll(
            "the sign-in to finish",
            "return document.readyState === 'complete' && !location.pathname.startsWith('/login')",
            vec![],
        )
        .await;
    }
}
