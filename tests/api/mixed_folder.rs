//! Issue 40's last "Done when": one directory grant over a mixed folder — every kind the
//! service reads, written by its own ecosystem's writer where the tests have one (the
//! generated fixtures) — indexes every file, and the KB page shows each kind with its status.

use std::collections::BTreeMap;

use reqwest::StatusCode;

use crate::fixtures::{copy_fixtures, fixtures, kb_with_grant, register, sources_by_path};
use crate::helpers::*;

const EML: &str = "From: Ana <ana@acme.test>\r\nTo: team@acme.test\r\nSubject: Budget decision\r\n\
Date: Mon, 7 Dec 2026 09:00:00 +0000\r\nMessage-ID: <d1@acme.test>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\
We approved the mixed-folder budget.\r\n";

#[tokio::test]
async fn a_grant_over_a_mixed_folder_indexes_every_kind_and_the_kb_page_shows_each() {
    let (dir, exp) = fixtures();
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let files = [
        exp["knownWords"]["file"].as_str().unwrap(),
        exp["docxPlain"]["file"].as_str().unwrap(),
        exp["image"]["file"].as_str().unwrap(),
        exp["sheets"]["xlsx"]["file"].as_str().unwrap(),
        exp["sheets"]["csv"]["file"].as_str().unwrap(),
        exp["slides"]["file"].as_str().unwrap(),
    ];
    copy_fixtures(&app, &dir, "mixed", &files);
    app.write_doc("team/mixed/notes.md", "# Notes\n\nThe mixed folder holds every kind.\n");
    app.write_doc("team/mixed/readme.txt", "A plain text file in the mixed folder.\n");
    app.write_doc(
        "team/mixed/page.html",
        "<!doctype html><html><head><title>Intranet</title></head><body><main><h1>Travel</h1><p>Book trains early.</p></main></body></html>",
    );
    app.write_doc("team/mixed/decision.eml", EML);
    register(&k, &app, "team/mixed").await;
    app.run_jobs().await;

    let sources = sources_by_path(&k).await;
    let kinds: BTreeMap<String, (String, String)> = sources
        .iter()
        .map(|(p, s)| (p.clone(), (s["kind"].as_str().unwrap().to_string(), s["status"].as_str().unwrap().to_string())))
        .collect();
    let expected = [
        ("known_words.pdf", "pdf"),
        ("plain.docx", "docx"),
        ("scope_zh.png", "image"),
        ("needles.xlsx", "spreadsheet"),
        ("zh_gbk.csv", "csv"),
        ("deck.pptx", "slides"),
        ("notes.md", "markdown"),
        ("readme.txt", "text"),
        ("page.html", "html"),
        ("decision.eml", "email"),
    ];
    assert_eq!(kinds.len(), expected.len(), "{kinds:#?}");
    for (name, kind) in expected {
        let (k_, st) = &kinds[&format!("mixed/{name}")];
        assert_eq!((k_.as_str(), st.as_str()), (kind, "indexed"), "{name}: {:#}", sources[&format!("mixed/{name}")]);
    }

    // The KB page: each file with its kind in words and its status, in both languages.
    let mut page = app.login("owner@acme.test").await;
    let (st, html) = page.page(&format!("/kbs/{}", k.kb)).await;
    assert_eq!(st, StatusCode::OK);
    for label in ["PDF", "DOCX", "Image", "Spreadsheet", "CSV", "Slides", "Markdown", "Text", "Web page", "E-mail"] {
        assert!(html.contains(&format!("<span class=\"kind\">{label}</span>")), "{label} missing");
    }
    assert_eq!(html.matches("<span class=\"status indexed\">").count(), expected.len(), "every row indexed");
    assert_eq!(html.matches("class=\"muted small passages-line\"").count(), expected.len(), "every row counts its passages");
}
