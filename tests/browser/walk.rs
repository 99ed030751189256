//! The defects a new team met on its walk through the assistant (issue 26), each in the browser,
//! in English and Chinese, at 1280 and 420 px, screenshotted to `target/browser-artifacts/walk-*`:
//! 1. "Chat only" with no model answers (no planned searches, no `unknown_tool` failure), and
//!    each agent in the picker says in one line what it is, the line below what it runs on;
//!    the receipt line says "quotes checked n/m" and what that means;
//! 2. an ended session on the assistant's form: the sign-in page with a notice, then back to the
//!    page with the question kept;
//! 3. `j` / `k` on the search page move between documents without a script error;
//! 4. revoking an API token asks first; the invitation notice promises no email; a member on
//!    an unbound knowledge-RAG page reads whom to ask; no horizontal scrolling at 420 px.

use serde_json::{Value, json};

use crate::{
    ai::{EMAIL, QUESTION, ask, count, ended, new_conversation, run_of, seed, text, to_chinese},
    browser::Browser,
    helpers::{PASSWORD, spawn_app},
};

/// How far the page scrolls sideways (0: not at all), and whether `css` (if any) sticks out of
/// the viewport.
async fn overflow(b: &Browser, css: &str) -> Value {
    b.js(
        "const d = document.documentElement; const e = arguments[0] ? document.querySelector(arguments[0]) : null;
         return { page: d.scrollWidth - d.clientWidth,
                  element: e ? Math.ceil(e.getBoundingClientRect().right - d.clientWidth) : 0 };",
        vec![json!(css)],
    )
    .await
}

fn assert_no_overflow(v: &Value, what: &str) {
    assert!(v["page"].as_i64().unwrap() <= 0 && v["element"].as_i64().unwrap() <= 0, "{what}: sideways overflow {v}");
}

#[tokio::test]
async fn chat_only_answers_and_each_agent_says_what_it_is() {
    let app = spawn_app().await;
    let seed = seed(&app).await;
    let b = Browser::start("walk-agents", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, width) in [("en", 1280), ("en", 420), ("zh", 1280), ("zh", 420)] {
        if lang == "zh" && width == 1280 {
            to_chinese(&b).await;
        }
        b.resize(width, 900).await;
        let tag = format!("{lang}-{width}");
        b.goto("/ai").await;
        b.wait_for("#ai-form").await;
        // Each option: the name and what the agent is (the descriptors' script keeps that).
        let hermes_about =
            if lang == "en" { "answers from your knowledge bases" } else { "从你的知识库中检索并作答" };
        let options = b
            .poll(
                "the agent options",
                "const o = Array.from(document.querySelectorAll('#ai-form select.ai-agent option'));
                 return o.length === 3 && o[0].textContent.includes(arguments[0]) && o.map(x => x.textContent)",
                vec![json!(hermes_about)],
            )
            .await;
        let options: Vec<String> = serde_json::from_value(options).unwrap();
        assert!(options[0].starts_with("Hermes — "), "{tag}: {options:?}");
        let chat_about = if lang == "en" {
            "Chat only — chats with a language model only"
        } else {
            "仅对话 — 只与语言模型对话"
        };
        assert!(options[2].starts_with(chat_about), "{tag}: {options:?}");
        assert!(
            options.iter().all(|o| !o.contains("runs offline") && !o.contains("离线")),
            "what it runs on is the note's: {options:?}"
        );
        let note = text(&b, "#ai-agent-note").await;
        assert!(note.contains(if lang == "en" { "built-in" } else { "内置" }), "{tag}: {note}");
        assert_no_overflow(&overflow(&b, "#ai-form select.ai-agent").await, &tag);

        // Chat only, no model connected: it answers, plans nothing, calls nothing.
        let q = if lang == "en" { QUESTION } else { "机器人在哪里过夜充电？" };
        // A new conversation each time: the page shows one turn (a question would otherwise
        // continue the conversation shown).
        new_conversation(&b).await;
        let id = ask(&b, "#ai-run", "chat_only", q).await;
        assert_eq!(ended(&b, "#ai-run").await, "completed", "{tag}");
        let run = run_of(&seed.api, &id).await;
        assert_eq!(run["status"], "completed", "{tag}: {run}");
        let answer = text(&b, "#ai-run .ai-answer").await;
        let words = if lang == "en" { "without tools I cannot search" } else { "没有工具就无法检索" };
        assert!(answer.contains(words), "{tag}: {answer}");
        assert_eq!(count(&b, "#ai-run .ai-tool").await, 0, "{tag}: no tool calls");
        assert_eq!(count(&b, "#ai-run .ai-error").await, 0, "{tag}");
        let receipt = text(&b, "#ai-run .ai-verified").await;
        assert!(receipt.contains(if lang == "en" { "cites no evidence" } else { "未引用任何证据" }), "{tag}: {receipt}");
        assert_no_overflow(&overflow(&b, "#ai-run .ai-turn").await, &tag);
        b.screenshot(&format!("chat-only-{tag}")).await;

        // Hermes: the receipt line says what was checked, and what that does not mean.
        new_conversation(&b).await;
        ask(&b, "#ai-run", "hermes", q).await;
        assert_eq!(ended(&b, "#ai-run").await, "completed", "{tag}");
        let receipt = text(&b, "#ai-run .ai-verified").await;
        let (head, meaning) = if lang == "en" {
            ("quotes found in their passages", "not whether the answer is right")
        } else {
            ("条在所引段落中找到", "不代表回答一定正确")
        };
        assert!(receipt.contains(head) && receipt.contains(meaning), "{tag}: {receipt}");
        assert!(!receipt.contains("Verified") && !receipt.contains("已核验"), "{tag}: {receipt}");
        b.js("document.querySelector('#ai-run .ai-verified').scrollIntoView({block: 'center'})", vec![]).await;
        b.screenshot(&format!("receipt-{tag}")).await;
    }
    b.finish().await;
}

#[tokio::test]
async fn an_ended_session_on_page_ai_signs_in_and_comes_back_with_the_question() {
    let app = spawn_app().await;
    seed(&app).await;
    for (lang, accept) in [("en", None), ("zh", Some("zh-CN"))] {
        let b = Browser::start_in(&format!("walk-expired-{lang}"), &app.base, accept).await;
        b.login(EMAIL, PASSWORD).await;
        for width in [1280, 420] {
            let tag = format!("{lang}-{width}");
            b.resize(width, 900).await;
            b.goto("/ai?session=walk-1").await;
            b.wait_for("#ai-run[data-checked]").await;
            let q = format!("{QUESTION} ({tag})");
            b.find("#ai-run textarea[name=prompt]").await.send_keys(&q).await.unwrap();
            // The session ends on the server (idle expiry does the same).
            sqlx::query("delete from tower_sessions.session").execute(&app.owner_pool).await.unwrap();
            b.find("#ai-run form.ai-ask button[type=submit]").await.click().await.unwrap();
            b.poll("the sign-in page", "return location.pathname === '/login' && document.readyState === 'complete'", vec![])
                .await;
            let notice = text(&b, ".notice").await;
            let words =
                if lang == "en" { "Your session has expired. Sign in again" } else { "登录已过期。请重新登录" };
            assert!(notice.contains(words), "{tag}: {notice}");
            let body = b.js("return document.body.innerText", vec![]).await;
            assert!(!body.as_str().unwrap().to_lowercase().contains("csrf"), "{tag}: {body}");
            assert_no_overflow(&overflow(&b, ".notice").await, &tag);
            b.screenshot(&format!("signin-{tag}")).await;
            b.find("form[action='/login'] input[name=email]").await.send_keys(EMAIL).await.unwrap();
            b.find("form[action='/login'] input[name=password]").await.send_keys(PASSWORD).await.unwrap();
            b.find("form[action='/login'] button[type=submit]").await.click().await.unwrap();
            b.poll(
                "back on the assistant",
                "return location.pathname === '/ai' && location.search === '?session=walk-1' && document.readyState === 'complete'",
                vec![],
            )
            .await;
            let kept = b
                .poll(
                    "the question back in its box",
                    "const t = document.querySelector('#ai-run textarea[name=prompt]'); return t && t.value",
                    vec![],
                )
                .await;
            assert_eq!(kept.as_str().unwrap(), q, "{tag}");
            b.screenshot(&format!("back-{tag}")).await;
        }
        b.finish().await;
    }
}

#[tokio::test]
async fn j_and_k_move_between_search_results_without_a_script_error() {
    let app = spawn_app().await;
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    for i in 0..3 {
        app.write_doc(&format!("team/note-{i}.md"), &format!("# Note {i}\n\nNote {i} says threads borrow values.\n"));
    }
    app.indexed_folder_kb(&api, "team", json!({"name": "Engineering"})).await;
    let b = Browser::start("walk-keys", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    b.goto("/search?q=borrow&mode=lexical").await;
    b.wait_for("#results .result-doc").await;
    b.js("window.__errors = []; window.addEventListener('error', e => window.__errors.push(String(e.message)));", vec![]).await;
    let focused = "const all = Array.from(document.querySelectorAll('#results .result-title')); \
                   return all.indexOf(document.activeElement)";
    // Nothing focused: the keys go to the page, then to the focused result (keyboard actions,
    // which type into whatever has the focus, as a person does).
    b.js("document.activeElement && document.activeElement.blur()", vec![]).await;
    for (key, want) in [('j', 0), ('j', 1), ('j', 2), ('j', 2), ('k', 1)] {
        use fantoccini::actions::{InputSource, KeyAction, KeyActions};
        let press = KeyActions::new("keyboard".into()).then(KeyAction::Down { value: key }).then(KeyAction::Up { value: key });
        b.c.perform_actions(press).await.unwrap();
        let at = b.js(focused, vec![]).await;
        assert_eq!(at, json!(want), "after {key}");
    }
    let errors = b.js("return window.__errors", vec![]).await;
    assert_eq!(errors, json!([]), "no script error");
    b.finish().await;
}

#[tokio::test]
async fn tokens_ask_before_revoking_invitations_promise_no_email_and_members_read_whom_to_ask() {
    let app = spawn_app().await;
    let seed = seed(&app).await;
    app.add_user(seed.tenant, "member.with.a.rather.long.address@engineering.acme-robotics.test", "member").await;
    let b = Browser::start("walk-settings", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, width) in [("en", 1280), ("en", 420), ("zh", 1280), ("zh", 420)] {
        if lang == "zh" && width == 1280 {
            to_chinese(&b).await;
        }
        b.resize(width, 900).await;
        let tag = format!("{lang}-{width}");

        // A token, then Revoke: a dialog first; cancelling keeps the token.
        b.goto("/settings/tokens").await;
        b.wait_for("form[action='/settings/tokens'] input[name=name]").await.send_keys(&format!("agent {tag}")).await.unwrap();
        b.find("form[action='/settings/tokens'] button").await.click().await.unwrap();
        // The new page, with the new token's row (the old page may still show other tokens).
        b.poll(
            "the new token's row",
            "if (document.readyState !== 'complete') return false;
             const row = [...document.querySelectorAll('tr')].find(tr => tr.textContent.includes(arguments[0]) && tr.querySelector('form[action$=\"/revoke\"]'));
             if (row) row.id = 'new-token-row';
             return !!row",
            vec![json!(format!("agent {tag}"))],
        )
        .await;
        let live = "return document.querySelectorAll('form[action$=\"/revoke\"]').length";
        let before = b.js(live, vec![]).await.as_u64().unwrap();
        b.find("#new-token-row form[action$='/revoke'] button").await.click().await.unwrap();
        let title = b.poll("the dialog", "const d = document.querySelector('dialog.confirm-dialog'); return d && d.open && d.querySelector('.confirm-title').textContent", vec![]).await;
        assert_eq!(title, json!(if lang == "en" { "Revoke this token?" } else { "撤销这个令牌？" }), "{tag}");
        b.screenshot(&format!("token-dialog-{tag}")).await;
        b.find("dialog.confirm-dialog .confirm-cancel").await.click().await.unwrap();
        assert_eq!(b.js(live, vec![]).await.as_u64().unwrap(), before, "{tag}: cancelled, nothing revoked");
        b.find("#new-token-row form[action$='/revoke'] button").await.click().await.unwrap();
        b.poll("the dialog again", "const d = document.querySelector('dialog.confirm-dialog'); return d && d.open", vec![]).await;
        b.find("dialog.confirm-dialog .confirm-ok").await.click().await.unwrap();
        b.poll(
            "the token revoked",
            "return document.readyState === 'complete' && document.querySelectorAll('form[action$=\"/revoke\"]').length === arguments[0]",
            vec![json!(before - 1)],
        )
        .await;
        assert_no_overflow(&overflow(&b, "").await, &tag);

        // An invitation: the notice promises no email; long emails stay inside the page.
        b.goto("/admin/members").await;
        let email = format!("new.colleague.{lang}{width}@research-and-development.acme-robotics.test");
        b.wait_for("form[action='/admin/members'] input[name=email]").await.send_keys(&email).await.unwrap();
        b.find("form[action='/admin/members'] button").await.click().await.unwrap();
        b.poll("the invitation", "return document.readyState === 'complete' && !!document.querySelector('#invite-link')", vec![])
            .await;
        let flash = b.js("return document.body.innerText", vec![]).await;
        let flash = flash.as_str().unwrap();
        let (promise, no_email) =
            if lang == "en" { ("Invitation sent", "No email is sent") } else { ("已发送邀请", "系统不会发送邮件") };
        assert!(!flash.contains(promise) && flash.contains(no_email), "{tag}: {flash}");
        assert_no_overflow(&overflow(&b, "").await, &tag);
        // Each member's email is readable: nothing of the row (the role form) lies over it.
        let covered = b
            .js(
                "const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
                 return Array.from(document.querySelectorAll('.members-table tbody tr')).filter(tr => {
                   const t = tr.querySelector('td.card-title').getBoundingClientRect();
                   return Array.from(tr.querySelectorAll('td.card-status > *')).some(e => hit(t, e.getBoundingClientRect()));
                 }).map(tr => tr.querySelector('td.card-title').innerText)",
                vec![],
            )
            .await;
        assert_eq!(covered, json!([]), "{tag}: emails under the role form");
        b.screenshot(&format!("members-{tag}")).await;
        b.js("window.scrollTo(0, document.body.scrollHeight)", vec![]).await;
        b.screenshot(&format!("members-end-{tag}")).await;
    }
    b.finish().await;

    // A member on the knowledge-RAG page of a KB nobody bound: whom to ask.
    for (lang, accept) in [("en", None), ("zh", Some("zh-CN"))] {
        let b = Browser::start_in(&format!("walk-rag-{lang}"), &app.base, accept).await;
        b.login("member.with.a.rather.long.address@engineering.acme-robotics.test", PASSWORD).await;
        for width in [1280, 420] {
            let tag = format!("{lang}-{width}");
            b.resize(width, 900).await;
            b.goto(&format!("/kbs/{}/knowledge-rag", seed.kb)).await;
            let line = text(&b, ".rag-ask-admin").await;
            let words = if lang == "en" { "Ask one of them" } else { "请联系他们" };
            assert!(line.contains(words), "{tag}: {line}");
            assert_eq!(count(&b, "#rag-bind-form").await, 0, "{tag}: a member cannot bind");
            assert_no_overflow(&overflow(&b, "").await, &tag);
            b.screenshot(&format!("rag-member-{tag}")).await;
        }
        b.finish().await;
    }
}
