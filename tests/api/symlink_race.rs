//! The check-then-open race (#14 item 1): a directory inside the grant is swapped, in a tight
//! loop, with a symlink to an outside directory holding a secret file of the same name
//! (`renameat2(RENAME_EXCHANGE)`), while the test downloads, renders pages and ingests. Files
//! are opened with `openat2(RESOLVE_BENEATH)` relative to the grant root and then used only by
//! descriptor, so an outside byte is never served, rendered or indexed. Also: hard links
//! inside a grant are refused unless the operator allows them.

use std::{
    ffi::CString,
    os::unix::ffi::OsStrExt,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use mnote::{
    db::{Scope, TenantTx},
    viewer::render,
};
use reqwest::StatusCode;
use serde_json::Value;
use uuid::Uuid;

use crate::{fixtures::*, helpers::*};

const INSIDE: &str = "# Inside\n\nThe granted notes, nothing else.\n";
const OUTSIDE: &str = "# OUTSIDE SECRET\n\nzebra-credential-4711 must never leave the server.\n";

/// Exchange `a` and `b` (a directory and a symlink) until `stop`; returns the thread.
fn swapper(a: &Path, b: &Path, stop: Arc<AtomicBool>, swaps: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    let (a, b) = (CString::new(a.as_os_str().as_bytes()).unwrap(), CString::new(b.as_os_str().as_bytes()).unwrap());
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: renameat2 on two NUL-terminated paths.
            let r = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
            assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
            swaps.fetch_add(1, Ordering::Relaxed);
        }
        // Leave the real directory at `a`.
        if std::fs::symlink_metadata(std::path::Path::new(std::ffi::OsStr::from_bytes(a.as_bytes())))
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
        }
    })
}

async fn sha_of(app: &TestApp, tenant: Uuid, id: &str) -> (String, Option<String>) {
    let mut tx = TenantTx::begin(&app.pool, tenant, Scope::System).await.unwrap();
    let r =
        sqlx::query_as("select sha256, indexed_hash from source where id = $1::uuid").bind(id).fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    r
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_out_of_the_grant_never_serves_renders_or_indexes_outside_bytes() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let (fx, _) = fixtures();
    let team = app.docs.join("team");
    let outside = app.docs.parent().unwrap().join("outside");
    std::fs::create_dir_all(team.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(team.join("d/secret.md"), INSIDE).unwrap();
    std::fs::write(outside.join("secret.md"), OUTSIDE).unwrap();
    std::fs::copy(fx.join("known_words.pdf"), team.join("d/doc.pdf")).unwrap();
    std::fs::copy(fx.join("two_column.pdf"), outside.join("doc.pdf")).unwrap();
    std::os::unix::fs::symlink(&outside, team.join("swap")).unwrap();
    let outside_shas = [sha256(OUTSIDE.as_bytes()), sha256(&std::fs::read(outside.join("doc.pdf")).unwrap())];

    register(&k, &app, "team/d/secret.md").await;
    register(&k, &app, "team/d/doc.pdf").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    let md = sources["d/secret.md"]["id"].as_str().unwrap().to_string();
    let pdf = sources["d/doc.pdf"]["id"].as_str().unwrap().to_string();
    let (pdf_sha, indexed) = sha_of(&app, k.tenant, &pdf).await;
    assert_eq!(indexed.as_deref(), Some(pdf_sha.as_str()), "the PDF is indexed");
    let page_url = format!("/sources/{pdf}/pages/1.png?scale=1");
    let cached = render::cache_path(&app.config.data_dir, &pdf_sha, 1, render::normalise_scale(Some(1.0)));
    let r = k.client.get(&page_url).await;
    assert_eq!(r.status(), StatusCode::OK);
    let inside_png = r.bytes().await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let t = swapper(&team.join("d"), &team.join("swap"), stop.clone(), swaps.clone());

    // Downloads: the inside bytes or a clean refusal, never the secret.
    let (mut served, mut refused) = (0, 0);
    for i in 0..400 {
        let r = k.client.get(&format!("/sources/{md}/download")).await;
        let st = r.status();
        let body = r.text().await.unwrap();
        assert!(!body.contains("zebra"), "download {i} served the outside file ({st})");
        match st {
            StatusCode::OK => {
                assert_eq!(body, INSIDE, "download {i}");
                served += 1;
            }
            StatusCode::FORBIDDEN | StatusCode::GONE | StatusCode::NOT_FOUND => {
                let v: Value = serde_json::from_str(&body).unwrap_or_default();
                assert!(["path_outside_grant", "file_missing", "not_found"].contains(&error_code(&v)), "download {i}: {body}");
                refused += 1;
            }
            other => panic!("download {i}: {other} {body}"),
        }
    }
    // Page renders (cache removed each time, so the child renders from the file again).
    for i in 0..16 {
        let _ = std::fs::remove_file(&cached);
        let r = k.client.get(&page_url).await;
        match r.status() {
            StatusCode::OK => assert!(r.bytes().await.unwrap() == inside_png, "render {i} shows another PDF"),
            StatusCode::FORBIDDEN | StatusCode::GONE | StatusCode::NOT_FOUND => {}
            other => panic!("render {i}: {other} {}", r.text().await.unwrap()),
        }
    }
    // Ingest: re-run both sources' jobs several times.
    for _ in 0..6 {
        let mut tx = TenantTx::begin(&app.pool, k.tenant, Scope::System).await.unwrap();
        for id in [&md, &pdf] {
            mnote::sources::queue::enqueue(&mut tx, k.tenant, id.parse().unwrap()).await.unwrap();
        }
        tx.commit().await.unwrap();
        app.run_jobs().await;
        for id in [&md, &pdf] {
            let (sha, indexed) = sha_of(&app, k.tenant, id).await;
            assert!(
                !outside_shas.contains(&sha) && !indexed.is_some_and(|h| outside_shas.contains(&h)),
                "{id} took the outside hash"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    assert!(swaps.load(Ordering::Relaxed) > 400, "the swapper ran ({} swaps)", swaps.load(Ordering::Relaxed));
    assert!(served > 0 && served + refused == 400, "{served} served, {refused} refused");

    let mut tx = TenantTx::begin(&app.pool, k.tenant, Scope::System).await.unwrap();
    let leaked: i64 =
        sqlx::query_scalar("select count(*) from evidence_block where text like '%zebra%' or text like '%OUTSIDE%'")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(leaked, 0, "ingest indexed the outside file");
}

#[tokio::test]
async fn hard_links_inside_a_grant_are_refused_unless_the_operator_allows_them() {
    for allow in [false, true] {
        let app = spawn_app_with(|c| c.allow_hard_links = allow).await;
        let k = kb_with_grant(&app).await;
        let outside = app.docs.parent().unwrap().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.md"), OUTSIDE).unwrap();
        std::fs::hard_link(outside.join("secret.md"), app.docs.join("team/linked.md")).unwrap();
        register(&k, &app, "team/linked.md").await;
        app.run_jobs().await;
        let s = &sources_by_path(&k).await["linked.md"];
        let id = s["id"].as_str().unwrap();
        let r = k.client.get(&format!("/sources/{id}/download")).await;
        if allow {
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(s["status"], "indexed", "{s}");
        } else {
            assert_eq!(r.status(), StatusCode::FORBIDDEN);
            let v: Value = r.json().await.unwrap();
            assert_eq!(error_code(&v), "hard_link_refused", "{v}");
            assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("stale"), Some("hard_link_refused")), "{s}");
        }
    }
}

#[tokio::test]
async fn downloads_stream_from_the_descriptor_with_length_and_single_ranges() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    app.write_doc("team/r.md", "0123456789");
    register(&k, &app, "team/r.md").await;
    let id = sources_by_path(&k).await["r.md"]["id"].as_str().unwrap().to_string();
    let url = format!("/sources/{id}/download");
    let r = k.client.get(&url).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        (r.headers()["content-length"].to_str().unwrap(), r.headers()["accept-ranges"].to_str().unwrap()),
        ("10", "bytes")
    );
    assert_eq!(r.headers()["content-type"], "text/markdown");
    assert_eq!(r.text().await.unwrap(), "0123456789");
    for (range, body, content_range) in [
        ("bytes=2-5", "2345", "bytes 2-5/10"),
        ("bytes=7-", "789", "bytes 7-9/10"),
        ("bytes=-3", "789", "bytes 7-9/10"),
        ("bytes=8-99", "89", "bytes 8-9/10"),
    ] {
        let r = k.client.req(reqwest::Method::GET, &url).header("range", range).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT, "{range}");
        assert_eq!(r.headers()["content-range"], content_range, "{range}");
        assert_eq!(r.headers()["content-length"].to_str().unwrap(), body.len().to_string(), "{range}");
        assert_eq!(r.text().await.unwrap(), body, "{range}");
    }
    for range in ["bytes=10-", "bytes=5-2", "bytes=0-1,4-5", "bytes=-0"] {
        let r = k.client.req(reqwest::Method::GET, &url).header("range", range).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::RANGE_NOT_SATISFIABLE, "{range}");
        assert_eq!(r.headers()["content-range"], "bytes */10", "{range}");
    }
}
