//! The search page in the browser: results grouped by document with "n more in this
//! document", a true total and pages, the KB and date on each card, no raw score, the
//! citation behind a copy button, a one-line explanation of the selected mode, and "no
//! results" for a nonsense query in every mode; at 1280 and 420 px, in English and Chinese.

use serde_json::{Value, json};

use crate::{
    browser::Browser,
    helpers::{PASSWORD, spawn_app},
};

const EMAIL: &str = "owner@acme.test";

fn strings(v: Value) -> Vec<String> {
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn results_are_grouped_by_document_paged_and_nonsense_finds_nothing() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    // One long document (6 matching passages) and 11 short ones: 12 documents, 2 pages.
    let mut long = String::from("# Borrowing guide\n\n");
    for i in 0..6 {
        long.push_str(&format!("Rule {i}: a scoped thread may borrow data from the stack of its parent.\n\n"));
    }
    app.write_doc("team/guide.md", &long);
    for i in 0..11 {
        app.write_doc(&format!("team/note-{i:02}.md"), &format!("# Note {i}\n\nNote {i} says threads borrow values.\n"));
    }
    let kb = app.indexed_folder_kb(&api, "team", json!({"name": "Engineering"})).await;

    let b = Browser::start("search", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, width) in [("en", 1280), ("en", 420), ("zh", 1280), ("zh", 420)] {
        if lang == "zh" && width == 1280 {
            b.goto("/search").await;
            b.js("document.querySelector('form.lang button[value=\"zh-CN\"], form.lang button').click()", vec![]).await;
            b.poll(
                "the language switch",
                "return document.readyState === 'complete' && document.documentElement.lang.startsWith('zh')",
                vec![],
            )
            .await;
        }
        b.resize(width, 900).await;
        let tag = format!("{lang}-{width}");
        b.goto("/search?q=borrow&mode=lexical").await;
        b.wait_for("#results .result-doc").await;
        let docs = strings(
            b.js("return Array.from(document.querySelectorAll('.result-doc .result-title')).map(a => a.innerText)", vec![]).await,
        );
        assert_eq!(docs.len(), 10, "{tag}: ten documents per page: {docs:?}");
        assert_eq!(docs[0], "guide.md", "{tag}: {docs:?}");
        let summary = b.js("return document.getElementById('search-total').innerText", vec![]).await;
        let summary = summary.as_str().unwrap();
        let want = if lang == "en" { "18 passages in 12 documents" } else { "12 个文档中共 18 段" };
        assert!(summary.contains(want), "{tag}: {summary}");
        let page_of = b.js("return document.querySelector('.page-of').innerText", vec![]).await;
        assert_eq!(page_of, if lang == "en" { "Page 1 of 2" } else { "第 1 页，共 2 页" }, "{tag}");
        // The first card: its best 3 passages, "4 more", the KB and the date; no score.
        let card = b
            .js(
                "const c = document.querySelector('.result-doc');
                 return { passages: c.querySelectorAll('.passage').length, more: c.querySelector('.more-in-doc a')?.innerText,
                          kb: c.querySelector('.kb-name')?.innerText, date: c.querySelector('.doc-date')?.innerText,
                          score: document.querySelectorAll('.score').length,
                          citeVisible: c.querySelector('.cite-details').open || c.querySelector('.cite').checkVisibility(),
                          copyVisible: !c.querySelector('button.copy').hidden,
                          overflow: document.documentElement.scrollWidth - window.innerWidth }",
                vec![],
            )
            .await;
        assert_eq!(card["passages"], 3, "{tag}: {card}");
        let more = if lang == "en" { "4 more in this document" } else { "本文档中还有 4 处" };
        assert_eq!(card["more"], more, "{tag}: {card}");
        assert_eq!(card["kb"], "Engineering", "{tag}: {card}");
        assert!(card["date"].as_str().is_some_and(|d| d.contains("20")), "{tag}: {card}");
        assert_eq!(card["score"], 0, "{tag}: no raw score");
        assert_eq!(card["citeVisible"], false, "{tag}: the citation is behind the copy button: {card}");
        assert_eq!(card["copyVisible"], true, "{tag}: {card}");
        assert!(card["overflow"].as_i64().unwrap() <= 0, "{tag}: no horizontal scrolling: {card}");
        // The selected mode is explained in one line, and the line follows the select.
        let help = b.js("return document.getElementById('mode-help').innerText", vec![]).await;
        assert!(help.as_str().unwrap().starts_with(if lang == "en" { "Keyword:" } else { "关键词：" }), "{tag}: {help}");
        b.screenshot(&format!("grouped-{tag}")).await;
        b.js("const s = document.getElementById('search-mode'); s.value = 'graph'; s.dispatchEvent(new Event('change'))", vec![])
            .await;
        let help = b.js("return document.getElementById('mode-help').innerText", vec![]).await;
        assert!(help.as_str().unwrap().starts_with(if lang == "en" { "Connected:" } else { "关联：" }), "{tag}: {help}");

        // Page 2: the other two documents.
        b.find(".pager a[rel=next]").await.click().await.unwrap();
        b.poll("page 2", "return location.search.includes('page=2') && document.readyState === 'complete'", vec![]).await;
        let docs2 = strings(
            b.js("return Array.from(document.querySelectorAll('.result-doc .result-title')).map(a => a.innerText)", vec![]).await,
        );
        assert_eq!(docs2.len(), 2, "{tag}: {docs2:?}");
        assert!(docs2.iter().all(|d| !docs.contains(d)), "{tag}: no document on both pages: {docs:?} {docs2:?}");
        assert!(
            b.js(
                "return !!document.querySelector('.pager a[rel=prev]') && !document.querySelector('.pager a[rel=next]')",
                vec![]
            )
            .await
                == true
        );
        b.screenshot(&format!("page2-{tag}")).await;

        // "4 more in this document": all 7 of guide.md's passages, and the way back.
        b.goto("/search?q=borrow&mode=lexical").await;
        b.wait_for(".more-in-doc a").await.click().await.unwrap();
        b.poll(
            "the document's matches",
            "return location.search.includes('source=') && document.readyState === 'complete'",
            vec![],
        )
        .await;
        let n = b.js("return document.querySelectorAll('.passage').length", vec![]).await;
        assert_eq!(n, 7, "{tag}: heading + 6 rules");
        let within = b.js("return document.querySelector('.search-within').innerText", vec![]).await;
        assert!(within.as_str().unwrap().contains("guide.md"), "{tag}: {within}");
        b.screenshot(&format!("within-{tag}")).await;

        // Nonsense finds nothing in every mode, and the page says so with a hint.
        for mode in ["hybrid", "lexical", "vector", "graph"] {
            b.goto(&format!("/search?q=xyzzyplugh&mode={mode}")).await;
            b.wait_for("#no-results").await;
            let r = b
                .js(
                    "return [document.querySelectorAll('.result-doc').length, document.getElementById('no-results').innerText]",
                    vec![],
                )
                .await;
            assert_eq!(r[0], 0, "{tag} {mode}: {r}");
            let text = r[1].as_str().unwrap();
            let want = if lang == "en" { "No evidence found" } else { "没有找到" };
            assert!(text.contains(want) && text.lines().count() >= 2, "{tag} {mode}: a hint too: {text}");
            if mode == "hybrid" {
                b.screenshot(&format!("no-results-{tag}")).await;
            }
        }
    }

    // Per-KB search from the KB page: the search is pre-filtered to the KB.
    b.resize(1280, 900).await;
    b.goto(&format!("/kbs/{kb}")).await;
    let form = b.wait_for("form.kb-search").await;
    form.find(fantoccini::Locator::Css("input[name=q]")).await.unwrap().send_keys("borrow").await.unwrap();
    form.find(fantoccini::Locator::Css("button")).await.unwrap().click().await.unwrap();
    b.poll("the KB's search", "return location.pathname === '/search' && document.readyState === 'complete'", vec![]).await;
    let selected = b.js("return document.querySelector('select[name=kb]').value", vec![]).await;
    assert_eq!(selected, kb.as_str());
    b.wait_for("#results .result-doc").await;
    b.finish().await;
}
