//! Evidence search through the HTTP API (continued from search.rs): how headings, passages and graph mode rank, and the paged search that groups by document.

use std::io::{Cursor, Write};

use mnote::db::{Scope, TenantTx};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;

use crate::search::*;

/// `# title` then `## sub` sections with paragraphs, as a DOCX with outline levels.
fn docx_outline(items: &[(Option<u8>, &str)]) -> Vec<u8> {
    let body: String = items
        .iter()
        .map(|(level, text)| match level {
            Some(l) => format!("<w:p><w:pPr><w:outlineLvl w:val=\"{}\"/></w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>", l - 1),
            None => format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"),
        })
        .collect();
    let doc = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}<w:sectPr/></w:body></w:document>"#
    );
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in [("[Content_Types].xml", "<Types/>"), ("word/document.xml", doc.as_str())] {
        w.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
        w.write_all(data.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// The demo's Chinese document (Markdown) and the same outline as a DOCX: headings under a
/// title that holds the query words used to be the top hits (short, matched through their
/// section path); now the passages that use the words come first and those headings do not
/// match at all.
#[tokio::test]
async fn headings_match_by_their_own_text_and_passages_using_the_words_rank_first() {
    let app = spawn_app().await;
    let guide = include_str!("../../scripts/demo-docs/线程作用域.md");
    let report = docx_outline(&[
        (Some(1), "线程作用域（scoped threads）"),
        (None, "Rust 1.63 在标准库中加入了 std::thread::scope。使用线程作用域可以借用栈上的数据。"),
        (Some(2), "基本用法"),
        (None, "在闭包里启动任务，然后借用数据。"),
        (Some(2), "注意事项"),
        (None, "不需要 Arc 就能在多个线程之间共享只读数据。"),
        (None, "借用规则照常适用：可变借用只能有一个。"),
    ]);
    let t = team(&app, "acme", &[("线程作用域.md", guide.as_bytes()), ("线程作用域.docx", &report)]).await;
    for mode in ["lexical", "hybrid", "graph"] {
        let v = search(&t.client, json!({"query": "线程作用域", "mode": mode, "topK": 20})).await;
        // Graph mode may add a seed's section heading as a neighbour (it says so): the matches
        // are the results without a graph step.
        let quotes: Vec<&str> =
            results(&v).iter().filter(|r| r["graph"].is_null()).map(|r| r["quote"].as_str().unwrap()).collect();
        assert!(quotes.len() >= 2, "{mode}: {quotes:?}");
        for heading in ["基本用法", "注意事项"] {
            assert!(!quotes.contains(&heading), "{mode}: the heading {heading} matched through its path: {quotes:?}");
        }
        for (i, q) in quotes.iter().take(2).enumerate() {
            assert!(q.contains("线程作用域"), "{mode}: result {i} does not use the words: {quotes:?}");
        }
    }
    // A paragraph is still found by the heading it sits under (the path counts once).
    let v = search(&t.client, json!({"query": "注意事项", "mode": "lexical", "topK": 20})).await;
    let quotes: Vec<&str> = results(&v).iter().map(|r| r["quote"].as_str().unwrap()).collect();
    assert!(quotes.contains(&"注意事项"), "{quotes:?}");
    assert!(quotes.iter().any(|q| q.contains("不需要 Arc")), "paragraphs under the heading: {quotes:?}");
    // The heading itself first: the passages under it use none of the words (found through
    // their path only), so they do not take its place.
    assert_eq!(results(&v)[0]["quote"], "注意事项", "the heading itself first: {quotes:?}");

    // `mnote reindex` applies the rule to existing rows (and ranks the same again).
    let ids = |v: &Value| results(v).iter().map(|r| r["evidenceId"].clone()).collect::<Vec<_>>();
    let before = ids(&search(&t.client, json!({"query": "线程作用域", "mode": "lexical", "topK": 20})).await);
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    let (sources, blocks) = mnote::ingest::index::rebuild_all(&mut tx, t.tenant).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(sources, 2);
    assert!(blocks > 8);
    let after = ids(&search(&t.client, json!({"query": "线程作用域", "mode": "lexical", "topK": 20})).await);
    assert_eq!(before, after, "a rebuild ranks the same");
}

/// Graph mode returns only the lexical matches and what is connected to them: not a long
/// section's every block at one shared score, not repeated boilerplate, nothing at all for a
/// query nothing matches.
#[tokio::test]
async fn graph_mode_does_not_pad_with_unrelated_blocks() {
    let app = spawn_app().await;
    let mut handbook = String::from("# Handbook\n\nScoped threads borrow data from the stack.\n\nAll rights reserved.\n\n");
    for i in 0..12 {
        handbook.push_str(&format!("Unrelated paragraph number {i} about gardening tomatoes.\n\nAll rights reserved.\n\n"));
    }
    let t = team(&app, "acme", &[("handbook.md", handbook.as_bytes()), ("own.md", OWNERSHIP.as_bytes())]).await;

    let v = search(&t.client, json!({"query": "borrow stack", "mode": "graph", "topK": 20})).await;
    let rs = results(&v);
    let quotes: Vec<&str> = rs.iter().map(|r| r["quote"].as_str().unwrap()).collect();
    assert_eq!(quotes[0], "Scoped threads borrow data from the stack.", "{quotes:?}");
    assert!(!quotes.iter().any(|q| q.contains("All rights reserved")), "boilerplate is no neighbour: {quotes:?}");
    assert!(quotes.iter().filter(|q| q.contains("gardening")).count() <= 1, "only the adjacent block: {quotes:?}");
    assert!(rs.len() <= 3, "{quotes:?}");
    for r in &rs[1..] {
        assert!(r["graph"]["hop"].as_u64().is_some(), "a neighbour says how it was reached: {r}");
        assert!(r["score"].as_f64().unwrap() < rs[0]["score"].as_f64().unwrap());
    }
    let seed = rs[0]["evidenceId"].clone();
    assert!(rs[1..].iter().all(|r| r["graph"]["fromEvidenceId"] == seed), "{quotes:?}");

    for mode in ["graph", "lexical", "hybrid", "vector"] {
        let v = search(&t.client, json!({"query": "xyzzyplugh", "mode": mode})).await;
        assert!(results(&v).is_empty(), "{mode}: {v}");
    }
}

/// Paging: `groupBy: "document"` pages through documents (best block first), each with its
/// best `perGroup` blocks, a true total and `nextOffset`; flat paging cuts the same ranking;
/// `sourceIds` lists one document's matches; an unpaged request is answered as before.
#[tokio::test]
async fn paged_search_groups_by_document_and_counts_every_match() {
    let app = spawn_app().await;
    let many = |n: usize, word: &str| -> String {
        let mut s = format!("# {word} notes\n\n");
        for i in 0..n {
            s.push_str(&format!("Paragraph {i} mentions the {word} once among other words to make it longer.\n\n"));
        }
        s
    };
    let (a, b, c) = (
        many(5, "borrow"),
        "# B\n\nWe borrow twice: borrow it.\n\nNo match here.\n\nAnd borrow again.\n",
        "# C\n\nOne borrow.\n",
    );
    let zebra = many(230, "zebra");
    let t =
        team(&app, "acme", &[("a.md", a.as_bytes()), ("b.md", b.as_bytes()), ("c.md", c.as_bytes()), ("z.md", zebra.as_bytes())])
            .await;

    // Unpaged: no paging fields.
    let v = search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 50})).await;
    assert!(v.get("total").is_none() && v.get("groups").is_none(), "{v}");
    let flat: Vec<Value> = results(&v).clone();
    // a.md: heading "borrow notes" + 5 paragraphs; b.md: 2 blocks; c.md: 1.
    assert_eq!(flat.len(), 9, "{:?}", paths(&v));

    let p1 =
        search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 2, "groupBy": "document", "perGroup": 2})).await;
    assert_eq!(p1["total"], 9, "{p1}");
    assert_eq!(p1["totalDocuments"], 3);
    assert!(p1.get("totalIsLowerBound").is_none());
    assert_eq!(p1["offset"], 0);
    assert_eq!(p1["nextOffset"], 2);
    let groups = p1["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let order = paths(&v);
    let mut shown = 0;
    for (g, path) in groups.iter().zip(&order) {
        assert_eq!(g["resourcePath"], *path, "documents in the order of their best block");
        assert_eq!(g["kbId"], t.kb.as_str());
        assert!(g["modifiedAt"].as_str().is_some(), "{g}");
        let [s, e] = [g["resultRange"][0].as_u64().unwrap() as usize, g["resultRange"][1].as_u64().unwrap() as usize];
        assert_eq!(s, shown);
        let in_doc: Vec<&Value> = flat.iter().filter(|r| r["source"]["resourcePath"] == *path).collect();
        assert_eq!(g["total"], in_doc.len());
        assert_eq!(e - s, in_doc.len().min(2));
        for (r, want) in results(&p1)[s..e].iter().zip(&in_doc) {
            assert_eq!(r["evidenceId"], want["evidenceId"], "a document's best blocks, in rank order");
        }
        shown = e;
    }
    assert_eq!(results(&p1).len(), shown);

    let p2 =
        search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 2, "groupBy": "document", "offset": 2})).await;
    assert_eq!(p2["groups"].as_array().unwrap().len(), 1);
    assert_eq!(p2["groups"][0]["resourcePath"], order[2].as_str());
    assert!(p2.get("nextOffset").is_none(), "{p2}");

    // Flat pages cut the same ranking.
    let f = search(&t.client, json!({"query": "borrow", "mode": "lexical", "topK": 3, "offset": 3})).await;
    let ids: Vec<&Value> = results(&f).iter().map(|r| &r["evidenceId"]).collect();
    let want: Vec<&Value> = flat[3..6].iter().map(|r| &r["evidenceId"]).collect();
    assert_eq!(ids, want);
    assert_eq!(f["total"], 9);
    assert_eq!(f["nextOffset"], 6);

    // One document's matches.
    let src = flat.iter().find(|r| r["source"]["resourcePath"] == "b.md").unwrap()["source"]["sourceId"].clone();
    let one = search(&t.client, json!({"query": "borrow", "mode": "lexical", "sourceIds": [src], "offset": 0})).await;
    assert_eq!(one["total"], 2);
    assert!(results(&one).iter().all(|r| r["source"]["resourcePath"] == "b.md"));

    // More matches than are ranked for paging: lexical still counts them all.
    let z = search(&t.client, json!({"query": "zebra", "mode": "lexical", "groupBy": "document"})).await;
    assert_eq!(z["total"], 231, "{}", z["total"]);
    assert!(z.get("totalIsLowerBound").is_none());
    assert_eq!(z["groups"][0]["total"], z["depth"]);

    // Graph and the degraded modes page too.
    for mode in ["graph", "hybrid", "vector"] {
        let v = search(&t.client, json!({"query": "borrow", "mode": mode, "groupBy": "document", "topK": 10})).await;
        assert_eq!(v["totalDocuments"], 3, "{mode}: {v}");
        assert!(v["total"].as_u64().unwrap() >= 9, "{mode}");
    }

    for bad in [
        json!({"query": "borrow", "perGroup": 0, "groupBy": "document"}),
        json!({"query": "borrow", "offset": 20000}),
        json!({"query": "borrow", "groupBy": "folder"}),
    ] {
        let (st, e) = t.client.post_json("/api/evidence/search", bad.clone()).await;
        assert_eq!((st, error_code(&e)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input"), "{bad}: {e}");
    }
}

/// Issue 26 (item 9): a block that is only a heading never comes before its own body, and a
/// passage repeated word for word (a copied file) comes after the other results.
#[tokio::test]
async fn headings_follow_their_body_and_repeated_passages_come_last() {
    let app = spawn_app().await;
    let notes =
        "# Release checklist\n\n## Release checklist steps\n\nTag the release checklist commit, then publish the notes.\n";
    let copy = "# Copy\n\nTag the release checklist commit, then publish the notes.\n";
    let other = "# Other\n\nThe release checklist lives in the wiki as well.\n";
    let t =
        team(&app, "acme", &[("notes.md", notes.as_bytes()), ("copy.md", copy.as_bytes()), ("other.md", other.as_bytes())]).await;
    let v = search(&t.client, json!({"query": "release checklist steps", "mode": "lexical", "topK": 10})).await;
    let quotes: Vec<(&str, &str)> =
        results(&v).iter().map(|r| (r["source"]["resourcePath"].as_str().unwrap(), r["quote"].as_str().unwrap())).collect();
    let at = |path: &str, text: &str| {
        quotes.iter().position(|(p, q)| *p == path && q.contains(text)).unwrap_or_else(|| panic!("{path} {text}: {quotes:?}"))
    };
    let body = at("notes.md", "Tag the release checklist commit");
    let heading = at("notes.md", "Release checklist steps");
    assert!(body < heading, "the body before its heading: {quotes:?}");
    let repeat = at("copy.md", "Tag the release checklist commit");
    assert!(repeat > at("other.md", "lives in the wiki"), "the word-for-word repeat comes last: {quotes:?}");
    assert_eq!(repeat, quotes.len() - 1, "{quotes:?}");
}
