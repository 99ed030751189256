//! The `mnote` binary against the test database, as an operator would use it.

use std::{io::Write, process::Command, str::FromStr};

use reqwest::StatusCode;

use crate::helpers::*;

fn mnote(app: &TestApp, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnote"));
    cmd.args(args)
        .env("DATABASE_URL", &app.config.database_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .env("MNOTE_GRANTABLE_ROOTS", &app.docs)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("run mnote");
    if let Some(s) = stdin {
        child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test]
async fn bootstrap_user_token_grant_and_kb_commands() {
    let app = spawn_app().await;
    let pw = format!("{PASSWORD}\n");
    let (ok, out, err) =
        mnote(&app, &["admin", "bootstrap", "--tenant", "ops", "--email", "root@ops.test", "--password-stdin"], Some(&pw));
    assert!(ok, "{out}{err}");
    assert!(out.contains("created"), "{out}");
    // Idempotent: exits 0 when both exist, and works for a second tenant.
    let (ok, out, _) =
        mnote(&app, &["admin", "bootstrap", "--tenant", "ops", "--email", "root@ops.test", "--password-stdin"], Some(&pw));
    assert!(ok && out.contains("exists"), "{out}");
    let (ok, _, err) =
        mnote(&app, &["admin", "bootstrap", "--tenant", "labs", "--email", "root@labs.test", "--password-stdin"], Some(&pw));
    assert!(ok, "{err}");
    // Bad input: clear errors, non-zero exit.
    let (ok, _, err) = mnote(&app, &["admin", "bootstrap", "--tenant", "x", "--email", "bad", "--password-stdin"], Some(&pw));
    assert!(!ok && err.contains("invalid_input"), "{err}");
    let (ok, _, err) =
        mnote(&app, &["admin", "bootstrap", "--tenant", "x", "--email", "a@b.co", "--password-stdin"], Some("short\n"));
    assert!(!ok && err.contains("at least 10"), "{err}");

    let (ok, _, err) = mnote(
        &app,
        &["user", "add", "--tenant", "ops", "--email", "dev@ops.test", "--role", "member", "--password-stdin"],
        Some(&pw),
    );
    assert!(ok, "{err}");
    let c = app.client();
    assert_eq!(c.login("dev@ops.test", PASSWORD).await.status(), StatusCode::SEE_OTHER);

    let (ok, out, err) = mnote(&app, &["token", "create", "--tenant", "ops", "--email", "dev@ops.test", "--name", "ci"], None);
    assert!(ok, "{err}");
    let token = out.lines().last().unwrap().trim().to_string();
    let mut t = app.client();
    t.bearer = Some(token);
    let (st, me) = t.get_json("/api/session").await;
    assert_eq!((st, me["user"]["email"].as_str()), (StatusCode::OK, Some("dev@ops.test")));

    std::fs::create_dir_all(app.docs.join("shared")).unwrap();
    let shared = app.docs_path("shared");
    // A tenant the operator gave no roots may grant nothing (MNOTE_TENANT_ROOTS=strict).
    let (ok, _, err) =
        mnote(&app, &["grant", "add", "--tenant", "ops", "--path", &shared, "--all-members", "--permission", "read_index"], None);
    assert!(!ok && err.contains("path_outside_grant") && err.contains("mnote tenant roots add"), "{err}");
    let docs = app.docs.to_string_lossy().into_owned();
    let (ok, out, err) = mnote(&app, &["tenant", "roots", "add", "--tenant", "ops", "--path", &docs], None);
    assert!(ok && out.contains("added"), "{out}{err}");
    let (ok, out, err) =
        mnote(&app, &["grant", "add", "--tenant", "ops", "--path", &shared, "--all-members", "--permission", "read_index"], None);
    assert!(ok && out.contains("created"), "{out}{err}");
    let (ok, _, err) =
        mnote(&app, &["grant", "add", "--tenant", "ops", "--path", "/etc", "--all-members", "--permission", "read"], None);
    assert!(!ok && err.contains("path_outside_grant"), "{err}");
    let (ok, _, err) = mnote(
        &app,
        &[
            "grant",
            "add",
            "--tenant",
            "ops",
            "--path",
            &shared,
            "--email",
            "dev@ops.test",
            "--all-members",
            "--permission",
            "read",
        ],
        None,
    );
    assert!(!ok && err.contains("cannot be used with"), "{err}");

    let (ok, out, err) = mnote(
        &app,
        &["kb", "create", "--tenant", "ops", "--name", "Runbooks", "--visibility", "team", "--owner", "dev@ops.test"],
        None,
    );
    assert!(ok, "{out}{err}");
    let (_, kbs) = t.get_json("/api/kbs").await;
    assert_eq!(kbs["items"][0]["name"], "Runbooks");
    assert_eq!(kbs["items"][0]["ownerEmail"], "dev@ops.test");
    let (_, grants) = t.get_json("/api/grants").await;
    assert_eq!(grants["items"][0]["rootPath"], shared.as_str());
}

#[tokio::test]
async fn serve_refuses_a_role_that_can_bypass_rls() {
    let app = spawn_app().await;
    let owner_url = role_url(OWNER_ROLE, &app.db_name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mnote"));
    let out = cmd
        .arg("serve")
        .env("DATABASE_URL", &owner_url)
        .env("MNOTE_DATA_DIR", &app.config.data_dir)
        .env("MNOTE_BIND", "127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to serve"), "{err}");
}

/// Citus re-creates restrictive row-level-security policies as permissive ones on its
/// workers: `mnote migrate` and `mnote serve` refuse a database that has it.
#[tokio::test]
async fn migrate_and_serve_refuse_a_database_with_citus() {
    let app = spawn_app().await;
    // Citus cannot be installed here; the guard reads its row in the extension catalogue,
    // so that row stands in for it (a superuser may write the catalogue).
    let admin_user = sqlx::postgres::PgConnectOptions::from_str(&admin_url()).unwrap().get_username().to_string();
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&role_url(&admin_user, &app.db_name)).await.unwrap();
    sqlx::query(
        "insert into pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion)
         select 4242424, 'citus', (select oid from pg_roles where rolname = current_user),
                (select oid from pg_namespace where nspname = 'pg_catalog'), false, '14.0-1'",
    )
    .execute(&mut admin)
    .await
    .unwrap();

    let err = mnote::db::refuse_citus(&app.pool).await.expect_err("a citus database was accepted");
    assert!(err.to_string().starts_with("citus_unsupported:"), "{err}");
    let owner_url = role_url(OWNER_ROLE, &app.db_name);
    for args in [&["migrate"][..], &["serve"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_mnote"))
            .args(args)
            .env("DATABASE_URL", &app.config.database_url)
            .env("MNOTE_MIGRATION_DATABASE_URL", &owner_url)
            .env("MNOTE_DATA_DIR", &app.config.data_dir)
            .env("MNOTE_GRANTABLE_ROOTS", &app.docs)
            .env("MNOTE_BIND", "127.0.0.1:0")
            .env("MNOTE_EMBEDDER", "none")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "mnote {args:?} ran on a citus database: {err}");
        assert!(err.contains("citus_unsupported") && err.contains("permissive"), "mnote {args:?}: {err}");
    }

    // Without the extension both run again (migrate is idempotent).
    sqlx::query("delete from pg_extension where extname = 'citus'").execute(&mut admin).await.unwrap();
    mnote::db::refuse_citus(&app.pool).await.expect("a plain database is accepted");
}

/// Issue 31 item 1: `mnote user add` (and `admin bootstrap`) given a password for an email
/// that already has an account never silently keeps that account's unknown password: the
/// account may be someone else's (e.g. made through another team's invitation link).
#[tokio::test]
async fn user_add_refuses_an_existing_account_with_a_password_that_is_not_its_own() {
    let app = spawn_app().await;
    let ops = app.bootstrap("ops", "root@ops.test").await;
    app.bootstrap("alpha", "victim@corp.test").await;
    app.bootstrap("labs", "root@labs.test").await;
    let theirs = "the operator's new password";
    let stdin = format!("{theirs}\n");
    let add = ["user", "add", "--tenant", "ops", "--email", "Victim@corp.test", "--role", "admin", "--password-stdin"];
    let (ok, out, err) = mnote(&app, &add, Some(&stdin));
    assert!(!ok, "added an existing account as if it were new: {out}{err}");
    assert!(err.contains("already has an account") && err.contains("unchanged"), "{err}");
    let (ok, out, err) = mnote(
        &app,
        &["admin", "bootstrap", "--tenant", "newteam", "--email", "victim@corp.test", "--password-stdin"],
        Some(&stdin),
    );
    assert!(!ok && err.contains("already has an account"), "{out}{err}");
    // Nothing changed: the given password does not sign in, the account is in no new team.
    assert_eq!(app.client().login("victim@corp.test", theirs).await.status(), StatusCode::UNAUTHORIZED);
    let mut victim = app.login("victim@corp.test").await;
    victim.page("/tenants").await;
    let r = victim.post_form("/tenants/switch", &[("tenant_id", &ops.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "a member of ops");
    assert!(mnote::auth::directory::tenant_by_name(&app.pool, "newteam").await.unwrap().is_none());

    // With the account's own password, the operator evidently knows it: added.
    let (ok, out, err) = mnote(&app, &add, Some(&format!("{PASSWORD}\n")));
    assert!(ok && out.contains("existing account"), "{out}{err}");
    let r = victim.post_form("/tenants/switch", &[("tenant_id", &ops.tenant_id.to_string())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    // Without a password: added, and the output says the password was left as it is.
    let (ok, out, err) =
        mnote(&app, &["user", "add", "--tenant", "labs", "--email", "victim@corp.test", "--role", "member"], None);
    assert!(ok && out.contains("existing account") && out.contains("password unchanged"), "{out}{err}");
}

/// `mnote audit --tenant`: the operator reads one team's audit log with the page's filters,
/// as a table, CSV or JSON; a filter that does not parse is refused with its field named.
#[tokio::test]
async fn audit_reads_one_teams_log_with_filters_and_formats() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let other = app.bootstrap("globex", "owner@globex.test").await;
    let c = app.api(s.tenant_id, s.user_id).await;
    for name in ["One", "Two"] {
        let (st, _) = c.post_json("/api/kbs", serde_json::json!({"name": name})).await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let (st, _) =
        app.api(other.tenant_id, other.user_id).await.post_json("/api/kbs", serde_json::json!({"name": "Theirs"})).await;
    assert_eq!(st, StatusCode::CREATED);
    app.client().login("owner@acme.test", "wrong").await;
    app.audit_rows(s.tenant_id, "sign_in", 1).await;

    let (ok, out, err) = mnote(&app, &["audit", "--tenant", "acme"], None);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].contains("sign_in") && lines[0].contains("failure") && lines[0].contains("127.0.0.1"), "{out}");
    assert!(lines[1].contains("kb.create") && lines[1].ends_with("Two · team"), "{out}");
    assert!(!out.contains("Theirs"), "{out}");

    let (ok, out, err) = mnote(&app, &["audit", "--tenant", "acme", "--action", "kb.create", "--format", "csv"], None);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.starts_with("id,at,actor_id,actor_email,client_ip,action,target,outcome,detail\r\n"), "{out}");

    let (ok, out, err) =
        mnote(&app, &["audit", "--tenant", "acme", "--person", "OWNER@ACME", "--limit", "1", "--format", "json"], None);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["items"][0]["action"], "sign_in");

    // The operator's own commands are in it too, from `cli`.
    let (ok, _, err) = mnote(&app, &["kb", "create", "--tenant", "acme", "--name", "Ops", "--visibility", "team"], None);
    assert!(ok, "{err}");
    let (ok, out, err) = mnote(&app, &["audit", "--tenant", "acme", "--action", "kb.create", "--limit", "1"], None);
    assert!(ok, "{err}");
    assert!(out.contains(" cli ") && out.contains("Ops · team (mnote kb create)"), "{out}");

    let (ok, _, err) = mnote(&app, &["audit", "--tenant", "acme", "--from", "yesterday"], None);
    assert!(!ok && err.contains("invalid_input"), "{err}");
    let (ok, _, err) = mnote(&app, &["audit", "--tenant", "nope"], None);
    assert!(!ok && err.contains("no tenant named"), "{err}");
}
