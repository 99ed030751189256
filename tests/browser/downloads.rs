//! Downloads through Chromium (issue 31 item 3): the browser sends `Accept-Encoding: gzip,
//! deflate, br, zstd` like every browser; each kind's download must decode to the original
//! bytes (compared by SHA-256, computed in the page).

use serde_json::{Value, json};
use sha2::Digest;

use crate::{
    browser::Browser,
    helpers::{PASSWORD, spawn_app},
};

const EMAIL: &str = "owner@acme.test";

#[tokio::test]
async fn chromium_downloads_every_kind_byte_for_byte() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let fixtures = std::env::var_os("MNOTE_FIXTURES_DIR")
        .map(std::path::PathBuf::from)
        .expect("MNOTE_FIXTURES_DIR is not set: run the tests through `./dev test`, which generates the fixtures");
    let team = app.docs.join("team");
    std::fs::create_dir_all(&team).unwrap();
    for name in ["plain.docx", "known_words.pdf", "scope_zh.png", "needles.xlsx", "zh_gbk.csv"] {
        std::fs::copy(fixtures.join(name), team.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let md: String = (0..6000).map(|i| format!("Line {i} of the notes, with words to compress.\n")).collect();
    app.write_doc("team/notes.md", &md);
    let (st, g) = api
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert!(st.is_success(), "{g}");
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Downloads"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = api.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("team")})).await;
    assert!(st.is_success(), "{r}");
    let (_, list) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;

    let b = Browser::start("downloads", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for name in ["notes.md", "plain.docx", "known_words.pdf", "scope_zh.png", "needles.xlsx", "zh_gbk.csv"] {
        let original = std::fs::read(team.join(name)).unwrap();
        let want = hex::encode(sha2::Sha256::digest(&original));
        let id = list["items"].as_array().unwrap().iter().find(|s| s["resourcePath"] == name).unwrap_or_else(|| panic!("{list}"))
            ["id"]
            .as_str()
            .unwrap()
            .to_string();
        let got: Value =
            b.c.execute_async(
                "const done = arguments[arguments.length - 1];
                 fetch(arguments[0], {credentials: 'same-origin'})
                   .then(async r => {
                     const buf = await r.arrayBuffer();
                     const h = await crypto.subtle.digest('SHA-256', buf);
                     done({status: r.status, encoding: r.headers.get('content-encoding'), length: buf.byteLength,
                           sha256: Array.from(new Uint8Array(h)).map(x => x.toString(16).padStart(2, '0')).join('')});
                   })
                   .catch(e => done({error: String(e)}));",
                vec![json!(format!("/sources/{id}/download"))],
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got["status"], 200, "{name}: {got}");
        assert_eq!(got["length"], original.len(), "{name}: {got}");
        assert_eq!(got["sha256"], want, "{name}: {got}");
    }
    b.finish().await;
}
