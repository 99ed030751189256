//! Conversations on `/ai` in the browser, in English and Chinese, at 1280 and 420 px, each step
//! screenshotted to `target/browser-artifacts/conv-*`:
//! 1. built-in agent: a two-turn conversation whose follow-up needs the first turn ("Tell me
//!    more about that." names nothing the handbook says), the whole conversation after a reload,
//!    a run from the KB panel listed on `/ai`, the list: rename, search, delete (with confirm);
//! 2. hermes on the scripted mock: cancel a slow answer, Retry it (same question, same
//!    conversation), Regenerate the answer; retry without JavaScript.

use reqwest::StatusCode;
use serde_json::json;

use crate::{
    ai::{EMAIL, QUESTION, ask, count, ended, hermes_app, new_conversation, run_of, seed, text, to_chinese},
    browser::Browser,
    helpers::{PASSWORD, spawn_app},
};

/// The page fits the window (no sideways scrolling).
async fn fits(b: &Browser, what: &str) {
    let over = b.js("return document.documentElement.scrollWidth - window.innerWidth", vec![]).await;
    assert!(over.as_i64().unwrap() <= 0, "{}: {what} is {over} px wider than the window", b.name);
}

async fn current_session(b: &Browser) -> String {
    let v = b.js("return new URLSearchParams(location.search).get('session')", vec![]).await;
    v.as_str().unwrap_or_else(|| panic!("no session in the address")).to_string()
}

#[tokio::test]
async fn a_follow_up_uses_the_first_turn_and_the_list_renames_searches_and_deletes() {
    let app = spawn_app().await;
    let seed = seed(&app).await;
    let b = Browser::start("conv-builtin", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    let rounds = [
        ("en", QUESTION, "Tell me more about that.", "north hall", "Charging notes", "more about", "Delete"),
        ("zh", "机器人在哪里过夜充电？", "再多说一点。", "北厅", "充电笔记", "多说", "删除"),
    ];
    for (lang, first, follow, fact, new_title, search, delete_word) in rounds {
        if lang == "zh" {
            to_chinese(&b).await;
        }
        new_conversation(&b).await;
        let one = ask(&b, "#ai-run", "hermes", first).await;
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        assert!(text(&b, "#ai-run .ai-view .ai-answer").await.contains(fact));
        let two = ask(&b, "#ai-run", "hermes", follow).await;
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        // The first turn stays on the page above the second, which answers from the first's topic.
        assert_eq!(count(&b, &format!("#ai-run .ai-thread .ai-past[data-run-id='{one}'] .ai-answer")).await, 1);
        let answer = text(&b, "#ai-run .ai-view .ai-answer").await;
        assert!(answer.contains(fact) || answer.contains("battery") || answer.contains("电量"), "{lang}: {answer}");
        let run = run_of(&seed.api, &two).await;
        assert!(run["receipt"]["total"].as_u64().unwrap() >= 1, "{run}");
        let session = current_session(&b).await;
        assert_eq!(run["sessionId"], session.as_str());
        assert_eq!(count(&b, &format!("#ai-run .ai-convs li.ai-conv.current[data-id='{session}']")).await, 1);

        // Reloaded: the whole conversation, rendered by the server, titled with the first question.
        b.c.refresh().await.unwrap();
        b.wait_for("#ai-run[data-checked]").await;
        assert_eq!(text(&b, "#ai-run .ai-conv-heading").await, first);
        assert_eq!(count(&b, "#ai-run .ai-thread .ai-past").await, 1);
        assert_eq!(count(&b, &format!("#ai-run .ai-view .ai-turn[data-run-id='{two}']")).await, 1);
        assert_eq!(count(&b, "#ai-run .ai-answer").await, 2);
        let receipt = text(&b, "#ai-run .ai-thread .ai-verified").await;
        assert!(receipt.contains("quotes found") || receipt.contains("条在所引段落中找到"), "{receipt}");
        fits(&b, "the conversation").await;
        b.screenshot(&format!("conversation-{lang}-1280")).await;
        b.resize(420, 900).await;
        b.c.refresh().await.unwrap();
        b.wait_for("#ai-run[data-checked]").await;
        assert_eq!(
            b.js("return document.querySelector('#ai-run .ai-convs-box').open", vec![]).await,
            false,
            "collapsed at 420 px"
        );
        b.js("window.scrollTo(0, 0)", vec![]).await;
        fits(&b, "the conversation at 420 px").await;
        b.screenshot(&format!("conversation-{lang}-420")).await;
        b.js("document.querySelector('#ai-run .ai-convs-box').open = true", vec![]).await;
        b.js("document.querySelector('#ai-run .ai-conv.current .ai-conv-edit').open = true", vec![]).await;
        b.js("window.scrollTo(0, 0)", vec![]).await;
        fits(&b, "the open list at 420 px").await;
        b.screenshot(&format!("list-{lang}-420")).await;
        b.resize(1280, 900).await;

        // Rename (a plain form).
        b.js("document.querySelector('#ai-run .ai-conv.current .ai-conv-edit').open = true", vec![]).await;
        let input = b.find("#ai-run .ai-conv.current .ai-conv-rename input[name=title]").await;
        input.clear().await.unwrap();
        input.send_keys(new_title).await.unwrap();
        b.find("#ai-run .ai-conv.current .ai-conv-rename button[type=submit]").await.click().await.unwrap();
        b.poll(
            "the new title",
            "const h = document.querySelector('#ai-run .ai-conv-heading'); return h && h.textContent === arguments[0]",
            vec![json!(new_title)],
        )
        .await;
        assert_eq!(text(&b, "#ai-run .ai-conv.current .ai-conv-name").await, new_title);

        // Search: the follow-up's words find it (questions are searched, not only titles).
        for (q, n) in [(search, 1), ("zzqx", 0)] {
            let field = b.find("#ai-run .ai-conv-search input[name=q]").await;
            field.clear().await.unwrap();
            field.send_keys(q).await.unwrap();
            b.find("#ai-run .ai-conv-search button[type=submit]").await.click().await.unwrap();
            b.poll("the search", "return new URLSearchParams(location.search).get('q') === arguments[0]", vec![json!(q)]).await;
            b.wait_for("#ai-run[data-checked]").await;
            assert_eq!(count(&b, "#ai-run .ai-convs li.ai-conv").await, n, "{lang} q={q}");
            if n == 0 {
                assert_eq!(count(&b, "#ai-run .ai-convs-empty").await, 1);
            }
        }
        b.screenshot(&format!("search-{lang}")).await;

        // Delete, after the confirmation dialog.
        b.goto(&format!("/ai?session={session}")).await;
        b.wait_for("#ai-run[data-checked]").await;
        b.js("document.querySelector('#ai-run .ai-conv.current .ai-conv-edit').open = true", vec![]).await;
        b.find("#ai-run .ai-conv.current .ai-conv-delete button").await.click().await.unwrap();
        b.wait_for("dialog.confirm-dialog[open] .confirm-ok").await;
        assert!(text(&b, "dialog.confirm-dialog .confirm-text").await.contains(new_title));
        assert_eq!(text(&b, "dialog.confirm-dialog .confirm-ok").await, delete_word);
        b.screenshot(&format!("delete-{lang}")).await;
        b.find("dialog.confirm-dialog .confirm-ok").await.click().await.unwrap();
        b.poll("the deletion", "return location.pathname === '/ai' && !location.search", vec![]).await;
        b.wait_for("#ai-run[data-checked]").await;
        assert_eq!(count(&b, &format!("#ai-run .ai-convs li[data-id='{session}']")).await, 0);
        let (st, _) = seed.api.get_json(&format!("/api/page-ai/conversations/{session}")).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
    }

    // A question asked in the KB page's panel is a conversation `/ai` lists and shows.
    b.goto(&format!("/kbs/{}", seed.kb)).await;
    let kb_run = ask(&b, ".ai-panel", "hermes", "What do people wear on the warehouse floor?").await;
    assert_eq!(ended(&b, ".ai-panel").await, "completed");
    let session = run_of(&seed.api, &kb_run).await["sessionId"].as_str().unwrap().to_string();
    b.goto("/ai").await;
    b.wait_for("#ai-run[data-checked]").await;
    b.js("document.querySelector('#ai-run .ai-convs-box').open = true", vec![]).await;
    let name = text(&b, &format!("#ai-run .ai-convs li[data-id='{session}'] .ai-conv-name")).await;
    assert_eq!(name, "What do people wear on the warehouse floor?");
    b.find(&format!("#ai-run .ai-convs li[data-id='{session}'] a.ai-conv-link")).await.click().await.unwrap();
    b.wait_for(&format!("#ai-run .ai-view .ai-turn[data-run-id='{kb_run}']")).await;
    b.screenshot("from-kb-panel").await;
    b.finish().await;
}

#[tokio::test]
async fn a_cancelled_answer_is_retried_and_a_finished_one_regenerated_in_the_same_conversation() {
    let (app, seed) = hermes_app().await;
    let b = Browser::start("conv-retry", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, cancelled, retry, regenerate) in [("en", "Cancelled", "Retry", "Regenerate"), ("zh", "已取消", "重试", "重新生成")]
    {
        if lang == "zh" {
            to_chinese(&b).await;
        }
        new_conversation(&b).await;
        let question = format!("{QUESTION} [[slow]]");
        let first = ask(&b, "#ai-run", "hermes", &question).await;
        b.poll(
            "some streamed text",
            "const s = document.querySelector('#ai-run .ai-view .ai-stream'); return s && s.textContent.length > 10",
            vec![],
        )
        .await;
        b.find("#ai-run .ai-view .ai-cancel").await.click().await.unwrap();
        assert_eq!(ended(&b, "#ai-run").await, "cancelled");
        assert!(text(&b, "#ai-run .ai-view .ai-status").await.contains(cancelled));
        assert_eq!(text(&b, "#ai-run .ai-view .ai-retry").await, retry);
        b.screenshot(&format!("cancelled-{lang}")).await;

        // Retry: the same question again, in the same conversation, under the cancelled turn.
        b.find("#ai-run .ai-view .ai-retry").await.click().await.unwrap();
        let again = b
            .poll(
                "the retried run",
                "const t = document.querySelector('#ai-run .ai-view .ai-turn'); const id = t && t.getAttribute('data-run-id'); \
                 return id && id !== arguments[0] ? id : null",
                vec![json!(first)],
            )
            .await;
        let again = again.as_str().unwrap().to_string();
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        let (old, new) = (run_of(&seed.api, &first).await, run_of(&seed.api, &again).await);
        assert_eq!((&new["prompt"], &new["sessionId"], &new["status"]), (&old["prompt"], &old["sessionId"], &json!("completed")));
        assert_eq!(count(&b, &format!("#ai-run .ai-thread .ai-past[data-run-id='{first}'] .ai-cancelled")).await, 1);
        assert_eq!(text(&b, "#ai-run .ai-view .ai-retry").await, regenerate);
        b.screenshot(&format!("retried-{lang}")).await;

        // Regenerate the finished answer: a third turn with the same question.
        b.find("#ai-run .ai-view .ai-retry").await.click().await.unwrap();
        let third = b
            .poll(
                "the regenerated run",
                "const t = document.querySelector('#ai-run .ai-view .ai-turn'); const id = t && t.getAttribute('data-run-id'); \
                 return id && id !== arguments[0] ? id : null",
                vec![json!(again)],
            )
            .await;
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        assert_eq!(run_of(&seed.api, third.as_str().unwrap()).await["sessionId"], old["sessionId"]);
        assert_eq!(count(&b, "#ai-run .ai-thread .ai-past").await, 2);
        b.resize(420, 900).await;
        b.c.refresh().await.unwrap();
        b.wait_for("#ai-run[data-checked]").await;
        assert_eq!(count(&b, "#ai-run .ai-thread .ai-past").await, 2, "after a reload too");
        fits(&b, "the retried conversation at 420 px").await;
        b.js("document.querySelector('#ai-run .ai-view .ai-turn').scrollIntoView({block: 'start'})", vec![]).await;
        b.screenshot(&format!("regenerated-{lang}-420")).await;
        b.resize(1280, 900).await;
    }
    b.finish().await;

    // Without JavaScript: the retry form creates the run and opens it.
    let (st, run) = seed
        .api
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": "nojs-retry-1", "sessionId": "nojs-retry", "agentId": "hermes", "prompt": format!("{QUESTION} [[hang]]"), "contextRefs": {"kbIds": [seed.kb]}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let id = run["hostRunId"].as_str().unwrap().to_string();
    let mut c = app.login(EMAIL).await;
    c.page(&format!("/ai/runs/{id}")).await;
    let r = c.post_form(&format!("/ai/runs/{id}/cancel"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    for _ in 0..200 {
        if run_of(&seed.api, &id).await["status"] == "cancelled" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (_, html) = c.page(&format!("/ai/runs/{id}")).await;
    assert!(html.contains(&format!("action=\"/ai/runs/{id}/retry\"")), "{html}");
    let r = c.post_form(&format!("/ai/runs/{id}/retry"), &[("request_id", "nojs-retry-2")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert!(to.starts_with("/ai/runs/") && !to.ends_with(&id), "{to}");
    let retried = run_of(&seed.api, to.trim_start_matches("/ai/runs/")).await;
    assert_eq!((retried["sessionId"].as_str(), retried["requestId"].as_str()), (Some("nojs-retry"), Some("nojs-retry-2")));
    let (st, conv) = seed.api.get_json("/api/page-ai/conversations/nojs-retry").await;
    assert_eq!((st, conv["runCount"].as_i64()), (StatusCode::OK, Some(2)), "{conv}");
    let _ = seed.api.post_json(&format!("/api/page-ai/runs/{}/cancel", retried["hostRunId"].as_str().unwrap()), json!({})).await;
}

/// Issue 41: after a conversation, "Assistant" in the navigation opens a new one (the earlier
/// turns are not on the page, nothing in the list is current, the next question starts its own
/// conversation); the list marks the one shown (`aria-current`, highlighted); the owner, with no
/// model connected, sees how to connect one. Screenshots at 1280 and 420 px, both languages.
#[tokio::test]
async fn the_navigation_starts_a_new_conversation_and_the_list_marks_the_current_one() {
    let app = spawn_app().await;
    let seed = seed(&app).await;
    let b = Browser::start("conv-nav", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, first, next, connect) in [
        ("en", QUESTION, "Who builds the warehouse robots?", "Connect a model provider"),
        ("zh", "机器人在哪里过夜充电？", "谁制造仓库机器人？", "连接模型服务"),
    ] {
        if lang == "zh" {
            to_chinese(&b).await;
        }
        b.resize(1280, 900).await;
        new_conversation(&b).await;
        let one = ask(&b, "#ai-run", "hermes", first).await;
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        let session = current_session(&b).await;
        b.c.refresh().await.unwrap();
        b.wait_for("#ai-run[data-checked]").await;
        let marked = format!("#ai-run .ai-convs li.ai-conv.current[data-id='{session}'] a.ai-conv-link[aria-current='true']");
        assert_eq!(count(&b, &marked).await, 1, "{lang}: the conversation shown is marked");
        assert_eq!(count(&b, "#ai-run .ai-convs [aria-current]").await, 1);

        b.find("nav.mainnav a[href='/ai?new=1']").await.click().await.unwrap();
        b.poll(
            "the new conversation",
            "return location.search === '?new=1' && !!document.querySelector('#ai-run[data-checked]')",
            vec![],
        )
        .await;
        assert_eq!(count(&b, "#ai-run .ai-turn, #ai-run .ai-past").await, 0, "{lang}: no earlier turns");
        assert_eq!(count(&b, &format!("#ai-run [data-run-id='{one}']")).await, 0);
        assert_eq!(count(&b, "#ai-run .ai-convs li.current, #ai-run .ai-convs [aria-current]").await, 0);
        assert_eq!(
            count(&b, &format!("#ai-run .ai-convs li.ai-conv[data-id='{session}'] a[href='/ai?session={session}']")).await,
            1
        );
        assert!(text(&b, ".ai-no-model").await.contains(connect), "{lang}");
        assert_eq!(count(&b, ".ai-no-model a[href='/settings/agents']").await, 1);
        fits(&b, "a new conversation").await;
        b.screenshot(&format!("new-{lang}-1280")).await;
        b.resize(420, 900).await;
        b.c.refresh().await.unwrap();
        b.wait_for("#ai-run[data-checked]").await;
        fits(&b, "a new conversation at 420 px").await;
        b.screenshot(&format!("new-{lang}-420")).await;
        b.resize(1280, 900).await;

        // The next question is a conversation of its own.
        let two = ask(&b, "#ai-run", "hermes", next).await;
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        let run = run_of(&seed.api, &two).await;
        assert_ne!(run["sessionId"], session.as_str(), "{lang}: not a follow-up of the earlier conversation");
        assert_eq!(count(&b, "#ai-run .ai-past").await, 0);
    }
}
