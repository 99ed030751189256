//! Issue 40 item 5: the new kinds go to LightRAG too. A KB bound to the real `lightrag-server`
//! sends a spreadsheet, a deck, a web page and an e-mail with an attachment as our extracted
//! text; each is processed, and a reference LightRAG returns for a needle maps back to our
//! blocks with that kind's locator: in a sheet or a deck the row or shape that holds the
//! needle (its cells, its slide and shape); in a page or a message the passage LightRAG read,
//! opened in the viewer with the needle inside the highlighted span.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::knowledge_rag::{settle, status_item};
use crate::{fixtures::*, helpers::*, lightrag};

const PAGE: &str = "<!doctype html><html><head><title>Intranet</title><script>var tracker = 1;</script></head><body>\
<nav><a href=\"/\">Home</a></nav><main><h1>Travel policy</h1><h2>Trains</h2>\
<p>Book trains two weeks early through the travel desk.</p><h2>Hotels</h2>\
<p>The zirconium lodge near the harbour is the preferred hotel for visitors.</p></main></body></html>";

const MAIL: &str = "From: Ana <ana@acme.test>\r\nTo: team@acme.test\r\nSubject: Venue decision\r\n\
Date: Mon, 7 Dec 2026 09:00:00 +0000\r\nMessage-ID: <v1@acme.test>\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n--XX\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\
We picked the venue; the plan is attached.\r\n--XX\r\nContent-Type: text/markdown; name=\"plan.md\"\r\n\
Content-Disposition: attachment; filename=\"plan.md\"\r\n\r\n# Plan\r\n\r\nThe obsidian pavilion hosts the spring offsite.\r\n--XX--\r\n";

/// The reference LightRAG gives for `query` that cites `source` (naive retrieval).
async fn reference(k: &Kb, query: &str, source: &str) -> Value {
    let (st, r) = k.client.post_json("/api/knowledge-rag/query", json!({"kbIds": [k.kb], "query": query, "mode": "naive"})).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(r["degraded"], false, "{r}");
    r["references"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["sourceId"] == source)
        .cloned()
        .unwrap_or_else(|| panic!("{query}: no reference to {source}: {r:#}"))
}

#[tokio::test]
async fn spreadsheets_slides_web_pages_and_mail_reach_lightrag_and_come_back_located() {
    let server = lightrag::shared();
    let url = server.url.clone();
    let app = spawn_app_with(|c| {
        c.rag.allowed_urls = vec![url.clone()];
        c.soffice = None;
    })
    .await;
    let (dir, exp) = fixtures();
    let k = kb_with_grant(&app).await;
    let (xlsx, deck) = (exp["sheets"]["xlsx"]["file"].as_str().unwrap(), exp["slides"]["file"].as_str().unwrap());
    copy_fixtures(&app, &dir, "kinds", &[xlsx, deck]);
    app.write_doc("team/kinds/travel.html", PAGE);
    app.write_doc("team/kinds/venue.eml", MAIL);
    register(&k, &app, "team/kinds").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    let id = |p: &str| sources[&format!("kinds/{p}")]["id"].as_str().unwrap().to_string();
    for p in [xlsx, deck, "travel.html", "venue.eml"] {
        assert_eq!(sources[&format!("kinds/{p}")]["status"], "indexed", "{p}");
    }

    let (st, b) = k
        .client
        .send_json("PUT", &format!("/api/kbs/{}/knowledge-rag", k.kb), json!({"url": url, "apiKey": lightrag::API_KEY}))
        .await;
    assert_eq!((st, b["reachable"].as_bool()), (StatusCode::OK, Some(true)), "{b}");
    settle(&app, k.tenant).await;
    let (st, status) = k.client.get_json(&format!("/api/knowledge-rag/status?kbId={}", k.kb)).await;
    assert_eq!(st, StatusCode::OK, "{status}");
    for p in [xlsx, deck, "travel.html", "venue.eml"] {
        let item = status_item(&status, &id(p));
        assert_eq!(
            (item["registered"].as_bool(), item["lightragStatus"].as_str(), item["locatorAvailable"].as_bool()),
            (Some(true), Some("processed"), Some(true)),
            "{p}: {item}"
        );
    }

    // The spreadsheet: the row that holds the needle, by sheet and cells.
    let needle = &exp["sheets"]["xlsx"]["needles"][0];
    let r = reference(&k, needle["text"].as_str().unwrap(), &id(xlsx)).await;
    let loc = &r["locator"];
    assert_eq!(loc["resourceKind"], "spreadsheet", "{r:#}");
    assert_eq!((&loc["sheet"], &loc["cellRange"]), (&needle["sheet"], &needle["cellRange"]), "{r:#}");
    assert!(r["quote"].as_str().unwrap().contains(needle["text"].as_str().unwrap()), "{r:#}");
    assert!(r["citationUrl"].as_str().unwrap().starts_with(&format!("/sources/{}/view?evidence=", id(xlsx))), "{r:#}");

    // The deck: the slide, its shape and paragraph.
    let needle =
        exp["slides"]["needles"].as_array().unwrap().iter().find(|n| n["text"] == "needle nebula launch in March").unwrap();
    let r = reference(&k, "needle nebula launch in March", &id(deck)).await;
    let sp = &r["locator"]["slide"];
    assert_eq!(r["locator"]["resourceKind"], "slides", "{r:#}");
    assert_eq!(
        (&sp["slide"], &sp["shapeId"], &sp["paragraph"]),
        (&needle["slide"], &needle["shapeId"], &needle["paragraph"]),
        "{r:#}"
    );

    // The web page and the message: the passage LightRAG read, the needle in its highlight.
    let mut browser = app.login("owner@acme.test").await;
    let flowing = [
        ("travel.html", "html", "zirconium lodge hotel", "zirconium lodge"),
        ("venue.eml", "email", "obsidian pavilion offsite", "obsidian pavilion"),
    ];
    for (file, kind, query, needle) in flowing {
        let r = reference(&k, query, &id(file)).await;
        assert_eq!((r["locator"]["resourceKind"].as_str(), r["matchQuality"].as_str()), (Some(kind), Some("exact")), "{r:#}");
        let (st, html) = browser.page(r["citationUrl"].as_str().unwrap().split('#').next().unwrap()).await;
        assert_eq!(st, StatusCode::OK);
        let doc = scraper::Html::parse_document(&html);
        let lit: String = doc.select(&scraper::Selector::parse("#hl, .hl-span").unwrap()).flat_map(|e| e.text()).collect();
        assert!(lit.contains(needle), "{file}: {needle:?} not in the highlighted passage {lit:?}");
    }
}
