//! Saved web pages (HTML) as located evidence through the HTTP API: the page's own charset,
//! main content only, heading path + element index as the locator, the viewer's reading view
//! opened at the cited row, and hostile pages ending with their code.

use reqwest::StatusCode;
use scraper::{Html, Selector};
use serde_json::{Value, json};

use crate::{fixtures::*, helpers::*};

/// A wiki page saved by a browser in GB2312 (read as GBK), with page chrome and a script.
const WIKI_PAGE: &str = r#"<!DOCTYPE html><html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312"><title>差旅制度 - 内网</title><script>var token = "zebraquark";</script></head>
<body><nav><a href="/">首页</a> navwordalpha</nav>
<div id="content"><h1>差旅制度</h1><h2>住宿标准</h2><table><tr><th>城市</th><th>每晚上限</th></tr><tr><td>北京</td><td>650元</td></tr></table>
<h2>Receipts</h2><p>Submit the lodging receipts within thirty days of return.</p></div>
<footer>footerwordbeta</footer></body></html>"#;

async fn search(c: &Client, q: &str) -> Vec<Value> {
    let (st, v) = c.post_json("/api/evidence/search", json!({"query": q, "mode": "lexical", "topK": 5})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["results"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_saved_web_page_is_found_at_its_heading_path_and_element_and_opens_there() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let (gbk, _, unmappable) = encoding_rs::GBK.encode(WIKI_PAGE);
    assert!(!unmappable);
    std::fs::create_dir_all(app.docs.join("team/wiki")).unwrap();
    std::fs::write(app.docs.join("team/wiki/travel.htm"), &gbk).unwrap();
    let depth = 100_000;
    let deep = format!("<body>{}<p>deepest needle sentence</p>{}</body>", "<div>".repeat(depth), "</div>".repeat(depth));
    std::fs::write(app.docs.join("team/wiki/deep.html"), deep).unwrap();
    std::fs::write(app.docs.join("team/wiki/binary.html"), b"<p>not\0a page</p>").unwrap();
    register(&k, &app, "team/wiki").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    assert_eq!(sources["wiki/travel.htm"]["status"], "indexed", "{:?}", sources["wiki/travel.htm"]);
    assert_eq!(sources["wiki/travel.htm"]["kind"], "html");
    assert_eq!(sources["wiki/deep.html"]["status"], "indexed");
    assert_eq!(sources["wiki/binary.html"]["status"], "failed");
    assert_eq!(sources["wiki/binary.html"]["error"]["code"], "html_malformed");

    // A row of a table, in Chinese, with its column names carried into the text.
    let hits = search(&k.client, "北京 每晚上限").await;
    let top = &hits[0];
    assert_eq!(top["quote"], "城市: 北京 | 每晚上限: 650元", "{top}");
    let loc = &top["source"];
    assert_eq!(loc["resourceKind"], "html");
    assert_eq!(loc["resourcePath"], "wiki/travel.htm");
    assert_eq!(loc["sectionPath"], json!(["差旅制度", "住宿标准"]));
    // (//*)[17]: html head meta title script body nav a div h1 h2 table tbody tr th th tr.
    assert_eq!(loc["paragraphOrdinal"], 17);
    // An English paragraph under its own heading.
    let hits = search(&k.client, "lodging receipts").await;
    assert_eq!(hits[0]["source"]["sectionPath"], json!(["差旅制度", "Receipts"]));
    assert_eq!(hits[0]["source"]["paragraphOrdinal"], 21);
    // Scripts, navigation and footers are not content.
    for noise in ["zebraquark", "navwordalpha", "footerwordbeta"] {
        assert!(search(&k.client, noise).await.is_empty(), "{noise} was indexed");
    }
    assert_eq!(search(&k.client, "deepest needle").await[0]["source"]["resourcePath"], "wiki/deep.html");

    // The citation opens our reading view of the page at that row, highlighted.
    let url = top["openAction"]["url"].as_str().unwrap();
    let mut browser = app.login("owner@acme.test").await;
    let (st, html) = browser.page(url.split('#').next().unwrap()).await;
    assert_eq!(st, StatusCode::OK);
    let doc = Html::parse_document(&html);
    let hl = doc.select(&Selector::parse("#hl").unwrap()).next().expect("a highlighted block");
    assert_eq!(hl.value().name(), "tr");
    assert_eq!(hl.value().attr("data-ordinal"), Some("17"));
    assert!(hl.text().collect::<String>().contains("650元"));
    assert!(!html.contains("zebraquark"), "the page's script never reaches the viewer");
}
