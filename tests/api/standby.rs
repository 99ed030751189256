//! `TestStandby`: a real Postgres hot standby of the test cluster, made the way
//! `./dev pg replica start` makes one: `pg_basebackup -R` over the primary's private socket
//! with its own physical replication slot, its own port, the primary's login rules, run by the
//! unprivileged Postgres user. `./dev test` exports where the binaries, the socket and the
//! cluster's home are (`MNOTE_TEST_PG_*`). Stopped and removed (slot included) when dropped.

use std::{path::PathBuf, process::Command, str::FromStr};

use sqlx::{Connection, Executor, postgres::PgConnectOptions, postgres::PgConnection};
use uuid::Uuid;

use crate::helpers::*;

pub struct TestStandby {
    pub port: u16,
    dir: PathBuf,
    slot: String,
    bin: PathBuf,
    user: Option<String>,
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run the tests through `./dev test`"))
}

impl TestStandby {
    /// Copy the test cluster and start the copy as a hot standby streaming from it.
    pub async fn start() -> TestStandby {
        let bin = PathBuf::from(env("MNOTE_TEST_PG_BIN"));
        let socket = env("MNOTE_TEST_PG_SOCKET");
        let home = PathBuf::from(env("MNOTE_TEST_PG_HOME"));
        let user = std::env::var("MNOTE_TEST_PG_USER").ok().filter(|u| !u.is_empty());
        let primary_port = PgConnectOptions::from_str(&admin_url()).unwrap().get_port();
        let id = Uuid::new_v4().simple().to_string();
        let slot = format!("mnote_test_{}", &id[..12]);
        let dir = home.join(format!("test-standby-{}", &id[..12]));
        // A free port (bound, then released for the standby).
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let s = TestStandby { port, dir, slot, bin, user };
        // The slot first, holding WAL from now on: the copy and its WAL stream then start
        // inside what it keeps. (`pg_basebackup -C` made the slot only once its WAL stream
        // started, after the copy had begun: with both cores busy a checkpoint in between
        // recycled the segment the stream asked for, "requested WAL segment … has already been
        // removed".)
        let mut primary = PgConnection::connect(&admin_url()).await.expect("connect to the primary as the superuser");
        primary
            .execute(sqlx::query("select pg_create_physical_replication_slot($1, true)").bind(&s.slot))
            .await
            .expect("create the standby's replication slot");
        let out = s.pg(
            "pg_basebackup",
            &[
                "-h",
                &socket,
                "-p",
                &primary_port.to_string(),
                "-U",
                "postgres",
                "-D",
                s.dir.to_str().unwrap(),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "-S",
                &s.slot,
            ],
        );
        assert!(out.status.success(), "pg_basebackup: {}", String::from_utf8_lossy(&out.stderr));
        // Its own port, the copied login rules (TCP logins need the role's password).
        let q = |p: &std::path::Path| p.to_str().unwrap().replace('\'', "''");
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nhba_file = '{}'\nport = {port}\nunix_socket_directories = '{}'\n\
             max_connections = 200\nhot_standby = on\nshared_buffers = 32MB\n",
            q(&s.dir.join("mnote-dev-hba.conf")),
            q(&s.dir),
        );
        // Overwritten in place: the file keeps its owner (the Postgres user).
        std::fs::write(s.dir.join("mnote-dev.conf"), conf).unwrap();
        s.run();
        s
    }

    fn pg(&self, program: &str, args: &[&str]) -> std::process::Output {
        let exe = self.bin.join(program);
        let mut cmd = match &self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args(args).current_dir("/").output().unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// Start it (again): it catches up through its slot.
    pub fn run(&self) {
        let log = self.dir.join("standby.log");
        let out =
            self.pg("pg_ctl", &["start", "-D", self.dir.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "-t", "90", "-s"]);
        assert!(
            out.status.success(),
            "the standby did not start: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Kill it the hard way (`pg_ctl stop -m immediate`: no shutdown checkpoint, connections
    /// cut), as a crash would.
    pub fn kill(&self) {
        let out = self.pg("pg_ctl", &["stop", "-D", self.dir.to_str().unwrap(), "-m", "immediate", "-w", "-s"]);
        assert!(out.status.success(), "stopping the standby: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A superuser connection to the standby (to pause and resume its replay).
    pub async fn superuser(&self) -> PgConnection {
        let mut u = reqwest::Url::parse(&admin_url()).unwrap();
        u.set_port(Some(self.port)).unwrap();
        PgConnection::connect(u.as_str()).await.expect("connect to the standby as the superuser")
    }

    /// Wait until the standby has replayed everything the primary has written so far.
    pub async fn catch_up(&self) {
        let mut primary = PgConnection::connect(&admin_url()).await.unwrap();
        let target: String =
            sqlx::query_scalar("select pg_current_wal_insert_lsn()::text").fetch_one(&mut primary).await.unwrap();
        let mut s = self.superuser().await;
        for _ in 0..300 {
            let ok: bool = sqlx::query_scalar("select pg_last_wal_replay_lsn() >= $1::text::pg_lsn")
                .bind(&target)
                .fetch_one(&mut s)
                .await
                .unwrap();
            if ok {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the standby did not replay up to {target} within 15 s");
    }
}

impl Drop for TestStandby {
    fn drop(&mut self) {
        let _ = self.pg("pg_ctl", &["stop", "-D", self.dir.to_str().unwrap(), "-m", "immediate", "-w", "-s"]);
        let _ = std::fs::remove_dir_all(&self.dir);
        // The slot would keep WAL for a standby that no longer exists.
        let slot = self.slot.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                if let Ok(mut c) = PgConnection::connect(&admin_url()).await {
                    let _ = c
                        .execute(sqlx::query("select pg_drop_replication_slot($1) where exists (select 1 from pg_replication_slots where slot_name = $1)").bind(&slot))
                        .await;
                }
            });
        })
        .join();
    }
}
