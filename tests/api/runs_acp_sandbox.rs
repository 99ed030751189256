//! The ACP agent's file access, confined by the kernel (issue 39 item 1): a hostile agent
//! started by one team tries another team's granted files, the data dir, the server's binary
//! directory and `/proc/<server pid>`, through the real server and its sandbox shim. The
//! machine these tests run on has Landlock (ABI 7 when they were written; the unit test
//! `confine::tests::this_kernel_offers_landlock` fails first where it has none).

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use reqwest::StatusCode;
use serde_json::Value;

use crate::{
    fixtures::{Kb, let_the_test_agent_work},
    helpers::*,
    runs_acp::{agent_script, foreign_evidence, report, seeded},
};

/// `path` and the directories above it, up to the shared temporary directory, readable by
/// anyone: what keeps the agent (perhaps `nobody`) out must be the confinement, not file
/// permissions.
fn open_to_everyone(path: &Path) {
    for a in path.ancestors().take_while(|a| *a != std::env::temp_dir() && *a != Path::new("/")) {
        let mode = if a.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(a, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Whether anyone may read `path` by its permissions (every directory above it searchable).
fn readable_by_anyone(path: &Path) -> bool {
    let others = |p: &Path, bits: u32| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & bits == bits);
    others(path, 0o004) && path.ancestors().skip(1).all(|a| others(a, 0o001))
}

/// What the hostile agent tries, by name.
struct Probes {
    /// Another team's granted file and its folder (globex's, the run is acme's).
    other_team_file: PathBuf,
    other_team_folder: PathBuf,
    /// The data dir and a canary file in it.
    data_dir: PathBuf,
    data_canary: PathBuf,
    /// The server's binary directory and its executable.
    bin_dir: PathBuf,
    bin: PathBuf,
    /// The server's process (the test process: the server runs in it).
    proc_status: PathBuf,
    proc_cmdline: PathBuf,
}

impl Probes {
    fn of(c: &mnote::config::Config) -> Self {
        let docs = &c.grantable_roots[0];
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_mnote"));
        let pid = std::process::id();
        Probes {
            other_team_file: docs.join("globex/secret/plan.md"),
            other_team_folder: docs.join("globex"),
            data_dir: c.data_dir.clone(),
            data_canary: c.data_dir.join("canary.txt"),
            bin_dir: bin.parent().unwrap().to_path_buf(),
            bin,
            proc_status: PathBuf::from(format!("/proc/{pid}/status")),
            proc_cmdline: PathBuf::from(format!("/proc/{pid}/cmdline")),
        }
    }

    fn all(&self) -> [&PathBuf; 8] {
        [
            &self.other_team_file,
            &self.other_team_folder,
            &self.data_dir,
            &self.data_canary,
            &self.bin_dir,
            &self.bin,
            &self.proc_status,
            &self.proc_cmdline,
        ]
    }
}

/// An app whose agent probes [`Probes`] on `[[confine]]`, with MNOTE_ACP_SANDBOX = `sandbox`;
/// globex (another tenant) has granted its folder and indexed a document in it; acme's KB.
async fn probing_app(dir: &Path, sandbox: mnote::config::AcpSandbox) -> (TestApp, Kb, Probes) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let pid_file = dir.join("agent.pid").to_string_lossy().into_owned();
    let mut probes = None;
    let app = spawn_app_with(|c| {
        let p = Probes::of(c);
        let mut command = vec!["python3".into(), agent_script(), "--pid-file".into(), pid_file];
        for path in p.all() {
            command.extend(["--probe".into(), path.to_string_lossy().into_owned()]);
        }
        c.agents.acp_command = Some(command);
        c.agents.acp_sandbox = sandbox;
        let_the_test_agent_work(c, dir);
        std::fs::write(&p.data_canary, "the data dir's canary").unwrap();
        probes = Some(p);
    })
    .await;
    let probes = probes.unwrap();
    let k = seeded(&app).await;
    // Tenant B (globex) grants its folder and indexes a document there.
    let _ = foreign_evidence(&app).await;
    for p in [&probes.other_team_file, &probes.data_canary] {
        open_to_everyone(p);
    }
    (app, k, probes)
}

/// What the admin's AI agents page says of the ACP agent's confinement (on the Reasonix tab).
async fn sandbox_on_the_admin_page(app: &TestApp) -> String {
    let mut web = app.login("owner@acme.test").await;
    let (st, html) = web.page("/settings/agents?tab=reasonix").await;
    assert_eq!(st, StatusCode::OK);
    let doc = scraper::Html::parse_document(&html);
    let sel = scraper::Selector::parse("[data-acp-sandbox]").unwrap();
    let found: Vec<_> = doc.select(&sel).collect();
    assert_eq!(found.len(), 1, "one line about the ACP sandbox: {html}");
    let text: String = found[0].text().collect();
    assert!(text.starts_with("Operator's agent program: "), "{text}");
    found[0].value().attr("data-acp-sandbox").unwrap().to_string()
}

/// The agent's `[[confine]]` report: each probe's outcome, and its own directory's.
async fn confine_report(k: &Kb) -> (serde_json::Map<String, Value>, Value) {
    let r = report(k, "[[confine]]").await;
    (r["probes"].as_object().unwrap_or_else(|| panic!("{r}")).clone(), r["home"].clone())
}

#[tokio::test]
async fn a_confined_agent_cannot_read_another_teams_files_the_data_dir_the_servers_binaries_or_its_proc() {
    let tmp = tempfile::tempdir().unwrap();
    let (app, k, probes) = probing_app(tmp.path(), mnote::config::AcpSandbox::On).await;
    // Landlock on this kernel: /readyz says so.
    let (st, ready) = app.client().get_json("/readyz").await;
    assert_eq!(st, StatusCode::OK, "{ready}");
    assert_eq!(ready["acpSandbox"]["confinement"], "landlock", "{ready}");
    assert!(ready["acpSandbox"]["landlockAbi"].as_i64().is_some_and(|a| a >= 1), "{ready}");

    assert_eq!(sandbox_on_the_admin_page(&app).await, "landlock");

    let (outcomes, home) = confine_report(&k).await;
    for path in probes.all() {
        let got = outcomes.get(path.to_str().unwrap()).and_then(Value::as_str);
        assert_eq!(got, Some("EACCES"), "the agent reached {}: {outcomes:?}", path.display());
    }
    // Its own run directory (HOME) it may write and read back.
    assert_eq!(home, "ok", "{outcomes:?}");
}

#[tokio::test]
async fn an_unconfined_agent_reads_them_when_the_operator_opts_out() {
    // The control of the test above: without the confinement (MNOTE_ACP_SANDBOX=off) the same
    // probes succeed wherever file permissions allow, so the denials above are the kernel's.
    let tmp = tempfile::tempdir().unwrap();
    let (app, k, probes) = probing_app(tmp.path(), mnote::config::AcpSandbox::Off).await;
    let (_, ready) = app.client().get_json("/readyz").await;
    assert_eq!(ready["acpSandbox"]["confinement"], "off", "{ready}");
    assert_eq!(sandbox_on_the_admin_page(&app).await, "off");
    let (outcomes, home) = confine_report(&k).await;
    let must_read = [&probes.other_team_file, &probes.other_team_folder, &probes.data_canary, &probes.proc_status];
    for path in probes.all() {
        let got = outcomes.get(path.to_str().unwrap()).and_then(Value::as_str);
        if must_read.contains(&path) || readable_by_anyone(path) {
            assert_eq!(got, Some("read"), "{}: {outcomes:?}", path.display());
        }
    }
    assert_eq!(home, "ok");
}

/// The fallback where the kernel has no Landlock, forced with the shim's `--mount-namespace`
/// (this kernel has Landlock): a root shim covers each hidden path in a private mount
/// namespace (a directory by an empty tmpfs, a file by `/dev/null`) and the server's own view
/// is unchanged. A shim that is not root has no mount namespace: the program does not start.
#[test]
fn the_mount_namespace_fallback_covers_the_hidden_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, key) = (tmp.path().join("data"), tmp.path().join("outside.key"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("canary.txt"), "data canary").unwrap();
    std::fs::write(&key, "a key").unwrap();
    for p in [&data.join("canary.txt"), &key] {
        open_to_everyone(p);
    }
    let script = format!("ls -A '{0}'; cat '{0}/canary.txt'; cat '{1}'; echo end", data.display(), key.display());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnote"))
        .args(["sandbox-shim", "--mount-namespace", "--read", "/usr", "--hide"])
        .arg(&data)
        .arg("--hide")
        .arg(&key)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(stderr.lines().next(), Some("mnote-sandbox: mount_namespace"), "{stderr}");
        // Nothing listed, the canary gone, the key file empty: only the `echo` is left.
        assert_eq!(stdout, "end\n", "{stderr}");
        assert!(stderr.contains("No such file"), "{stderr}");
        assert_eq!(out.status.code(), Some(0), "{stderr}");
    } else {
        assert!(stderr.starts_with("mnote-sandbox: unavailable "), "{stderr}");
        assert_eq!((out.status.code(), stdout.as_ref()), (Some(125), ""), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(data.join("canary.txt")).unwrap(), "data canary", "the caller's view is unchanged");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), "a key");
}
