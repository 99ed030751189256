//! Issue 41, "the first hour without dead ends", on the KB page: each source says how many
//! passages it gave ("no text found" for none), Retry is offered only where a new attempt can
//! end differently, and the KB's members show their level with a switch.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

/// The `<tr>` of the source whose path ends with `name`.
fn row<'a>(html: &'a str, name: &str) -> &'a str {
    let at = html.find(&format!("{name}</")).unwrap_or_else(|| panic!("no row for {name}"));
    let start = html[..at].rfind("<tr data-source-id").expect("row start");
    let end = at + html[at..].find("</tr>").expect("row end");
    &html[start..end]
}

#[tokio::test]
async fn the_kb_page_counts_passages_says_no_text_and_offers_retry_only_where_it_helps() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/notes.md", "# Notes\n\nThe wombat digs a burrow.\n\nIt sleeps by day.\n");
    app.write_doc("team/empty.md", "");
    app.write_doc("team/broken.pdf", "%PDF-1.7\nthis is not a PDF at all\n");
    let kb = app.indexed_folder_kb(&api, "team", json!({"name": "Team"})).await;
    let mut page = app.login("owner@acme.test").await;
    let (st, html) = page.page(&format!("/kbs/{kb}")).await;
    assert_eq!(st, StatusCode::OK);

    // The grant picker names the folder, not the server path (kept in the title for admins).
    let team = app.docs_path("team");
    assert!(html.contains(&format!("title=\"{team}\">team</option>")), "{html}");

    let notes = row(&html, "notes.md");
    let n: i64 = notes.split("data-passages=\"").nth(1).and_then(|r| r.split('"').next()).unwrap().parse().unwrap();
    assert!(n >= 2, "notes.md gave {n} passages: {notes}");
    assert!(notes.contains(&format!("{n} passages")), "{notes}");
    assert!(!notes.contains("no-text-line"), "{notes}");

    let empty = row(&html, "empty.md");
    assert!(empty.contains("status indexed"), "{empty}");
    assert!(empty.contains("data-passages=\"0\"") && empty.contains("No text found"), "{empty}");

    let broken = row(&html, "broken.pdf");
    assert!(broken.contains("pdf_malformed"), "{broken}");
    assert!(broken.contains("Retrying cannot help"), "{broken}");
    assert!(!broken.contains("/retry"), "no Retry for a damaged file: {broken}");
}

#[tokio::test]
async fn kb_members_show_their_level_and_switch_it() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", "owner@acme.test").await;
    let mia = app.add_user(s.tenant_id, "mia@acme.test", "member").await;
    let api = app.api(s.tenant_id, s.user_id).await;
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Plans", "visibility": "private"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, v) = api.send_json("PUT", &format!("/api/kbs/{kb}/members/{mia}"), json!({"canManage": false})).await;
    assert_eq!(st, StatusCode::OK, "{v}");

    let mut page = app.login("owner@acme.test").await;
    let (_, html) = page.page(&format!("/kbs/{kb}")).await;
    let li = html.split("<li class=\"kb-member\"").nth(1).expect("the member's line");
    assert!(li.starts_with(" data-level=\"read\""), "{li}");
    assert!(li.contains("can read") && li.contains("Let manage"), "{li}");

    let r = page.post_form(&format!("/kbs/{kb}/members"), &[("user_id", &mia.to_string()), ("can_manage", "on")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (_, html) = page.page(&format!("/kbs/{kb}")).await;
    let li = html.split("<li class=\"kb-member\"").nth(1).expect("the member's line");
    assert!(li.starts_with(" data-level=\"manage\"") && li.contains("Read only"), "{li}");
    let (_, members) = api.get_json(&format!("/api/kbs/{kb}/members")).await;
    assert_eq!(members["items"][0]["canManage"], json!(true), "{members}");

    // In Chinese the levels read in Chinese.
    let r = page.post_form("/language", &[("lang", "zh-CN"), ("next", "/")]).await;
    assert!(r.status().is_redirection(), "{}", r.status());
    let (_, html) = page.page(&format!("/kbs/{kb}")).await;
    assert!(html.contains("可管理") && html.contains("改为只读"), "zh levels");
}
