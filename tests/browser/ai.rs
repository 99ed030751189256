//! The assistant in the browser (`/ai`, the KB and viewer panels, `static/ai-run.js`), in English
//! and Chinese, each case screenshotted to `target/browser-artifacts/ai-*`, on each runtime:
//! builtin (hermes with nothing configured), openai (hermes on the scripted OpenAI mock) and acp
//! (reasonix on the test ACP agent, `scripts/acp_agent.py`):
//! 1. builtin: the answer completes with citations and "verified n/m", a citation opens the
//!    viewer highlighted, the KB and viewer panels put their context in the run, the page
//!    without JavaScript (plain forms) creates and renders a run;
//! 2. builtin, the page reloaded right after asking (the run has usually ended by then): the
//!    final state, shown once: the answer as the run has it, one tool card per `tool.started`;
//! 3. hermes on the mock and reasonix: a slow answer, the page reloaded mid-answer (the run still
//!    live), picked up again from the journal: the transcript is exactly the journal's text
//!    (nothing rendered twice), one tool card per `tool.started`, the final answer as the run has it;
//! 4. hermes on the mock and reasonix: cancel during a slow run → cancelled (also without JavaScript);
//! 5. reasonix streams and completes;
//! 6. an interrupted run offers Resume, which continues it as a child run.

use std::path::PathBuf;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    browser::Browser,
    helpers::{Client, PASSWORD, TestApp, spawn_app, spawn_app_with},
    lightrag,
};

pub(crate) const EMAIL: &str = "owner@acme.test";
const HANDBOOK: &str = "# Warehouse handbook\n\nAcme Robotics builds warehouse robots in Lyon.\n\n## Charging\n\nThe robots charge overnight in the north hall. Each robot reports its battery level to the fleet controller every minute.\n\n## Safety\n\nPeople wear orange vests on the warehouse floor.\n";
const HANDBOOK_ZH: &str = "# 仓库手册\n\n## 充电\n\n机器人在北厅过夜充电。每台机器人每分钟向调度系统报告电量。\n\n## 安全\n\n仓库地面上的人员穿橙色背心。\n";
pub(crate) const QUESTION: &str = "Where do the robots charge overnight?";

/// A tenant whose owner has the KB "Handbook" with the two handbooks indexed.
pub(crate) struct Seed {
    pub(crate) tenant: uuid::Uuid,
    pub(crate) api: Client,
    pub(crate) kb: String,
    /// `handbook.md`'s source id.
    pub(crate) source: String,
}

pub(crate) async fn seed(app: &TestApp) -> Seed {
    let s = app.bootstrap("acme", EMAIL).await;
    let api = app.api(s.tenant_id, s.user_id).await;
    app.write_doc("team/handbook.md", HANDBOOK);
    app.write_doc("team/手册.md", HANDBOOK_ZH);
    let (st, g) = api
        .post_json("/api/grants", json!({"path": app.docs_path("team"), "allMembers": true, "permission": "read_index"}))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{g}");
    let (_, kb) = api.post_json("/api/kbs", json!({"name": "Handbook"})).await;
    let kb = kb["id"].as_str().unwrap().to_string();
    let (st, r) = api.post_json(&format!("/api/kbs/{kb}/sources"), json!({"path": app.docs_path("team")})).await;
    assert!(st.is_success(), "{r}");
    app.run_jobs().await;
    let (_, list) = api.get_json(&format!("/api/kbs/{kb}/sources")).await;
    let items = list["items"].as_array().or(list.as_array()).cloned().unwrap_or_default();
    assert!(items.iter().all(|i| i["status"] == "indexed"), "{list}");
    let source =
        items.iter().find(|i| i["resourcePath"].as_str().unwrap_or("").ends_with("handbook.md")).expect("handbook.md")["id"]
            .as_str()
            .unwrap()
            .to_string();
    Seed { tenant: s.tenant_id, api, kb, source }
}

/// Every event of a run's journal, oldest first.
pub(crate) async fn journal(api: &Client, run: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    loop {
        let after = out.last().map(|e| e["seq"].as_i64().unwrap()).unwrap_or(0);
        let (st, page) = api.get_json(&format!("/api/page-ai/runs/{run}/events?afterSeq={after}")).await;
        assert_eq!(st, StatusCode::OK, "{page}");
        let items = page["items"].as_array().unwrap().clone();
        let n = items.len();
        out.extend(items);
        if n == 0 || page["ended"] == true {
            return out;
        }
    }
}

pub(crate) fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn deltas(events: &[Value]) -> String {
    of_kind(events, "message.delta").iter().map(|e| e["payload"]["text"].as_str().unwrap_or("")).collect()
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The answer's Markdown as its text reads on the page: links as their label, no block markers
/// (headings, list items) or escapes, whitespace squashed.
fn answer_text(md: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, TagEnd};
    let mut out = String::new();
    for e in Parser::new_ext(md, Options::ENABLE_STRIKETHROUGH) {
        match e {
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => out.push_str(&t),
            Event::SoftBreak | Event::HardBreak | Event::Rule => out.push(' '),
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::List(_)
                | TagEnd::BlockQuote(_)
                | TagEnd::CodeBlock
                | TagEnd::HtmlBlock,
            ) => out.push(' '),
            _ => {}
        }
    }
    squash(&out)
}

pub(crate) async fn run_of(api: &Client, id: &str) -> Value {
    let (st, run) = api.get_json(&format!("/api/page-ai/runs/{id}")).await;
    assert_eq!(st, StatusCode::OK, "{run}");
    run
}

/// The shown run's id, once the component shows one.
async fn shown_run(b: &Browser, root: &str) -> String {
    let v = b.poll("a run to be shown", SHOWN, vec![json!(root)]).await;
    v.as_str().unwrap().to_string()
}

/// Wait until the component's run ended and its result is in; how it ended.
pub(crate) async fn ended(b: &Browser, root: &str) -> String {
    let v = b
        .poll(
            "the run to end",
            "const t = document.querySelector(arguments[0] + ' .ai-turn[data-ended]'); return t && t.getAttribute('data-ended')",
            vec![json!(root)],
        )
        .await;
    v.as_str().unwrap().to_string()
}

pub(crate) async fn text(b: &Browser, css: &str) -> String {
    let v = b.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", vec![json!(css)]).await;
    v.as_str().unwrap_or_else(|| panic!("{}: no `{css}`", b.name)).to_string()
}

pub(crate) async fn count(b: &Browser, css: &str) -> usize {
    b.js("return document.querySelectorAll(arguments[0]).length", vec![json!(css)]).await.as_u64().unwrap() as usize
}

const SHOWN: &str = "const t = document.querySelector(arguments[0] + ' .ai-turn'); return t && t.getAttribute('data-run-id')";

/// Ask through the component's form; the id of the run it then shows.
pub(crate) async fn ask(b: &Browser, root: &str, agent: &str, prompt: &str) -> String {
    let sel = format!("{root} select.ai-agent");
    b.wait_for(&sel).await.select_by_value(agent).await.unwrap();
    // The component's first look for a run to resume is over (it may show one).
    b.wait_for(&format!("{root}[data-checked]")).await;
    let before = b.js(SHOWN, vec![json!(root)]).await;
    b.find(&format!("{root} textarea[name=prompt]")).await.send_keys(prompt).await.unwrap();
    b.find(&format!("{root} form.ai-ask button[type=submit]")).await.click().await.unwrap();
    let v = b
        .poll(
            "the new run to be shown",
            "const t = document.querySelector(arguments[0] + ' .ai-turn'); const id = t && t.getAttribute('data-run-id'); \
             return id && id !== arguments[1] ? id : null",
            vec![json!(root), before],
        )
        .await;
    v.as_str().unwrap().to_string()
}

/// A screenshot with the component's run in view.
async fn shot(b: &Browser, root: &str, label: &str) {
    b.js(
        "const t = document.querySelector(arguments[0] + ' .ai-turn') || document.querySelector(arguments[0]); \
         if (t) t.scrollIntoView({block: 'start'});",
        vec![json!(root)],
    )
    .await;
    b.screenshot(label).await;
}

/// Start a new conversation on `/ai`: the page then shows no earlier turn (a question asked
/// on a resumed page would continue the resumed run's conversation).
pub(crate) async fn new_conversation(b: &Browser) {
    b.goto("/ai").await;
    b.wait_for("#ai-run[data-checked]").await;
    b.js("document.querySelector('#ai-run .ai-convs-box').open = true", vec![]).await;
    b.find("#ai-run button.ai-new-session").await.click().await.unwrap();
    b.poll("an empty conversation", "return !document.querySelector('#ai-run .ai-turn, #ai-run .ai-past')", vec![]).await;
}

pub(crate) async fn to_chinese(b: &Browser) {
    b.goto("/").await;
    b.js("document.querySelector('form.lang button[value=\"zh-CN\"]').click()", vec![]).await;
    b.poll(
        "the language switch",
        "return document.readyState === 'complete' && document.documentElement.lang.startsWith('zh')",
        vec![],
    )
    .await;
}

/// The run's receipt agrees with the page: "n of m quotes found in their passages" (`word`
/// names the language: "Quotes checked" or "引文核对") and one marked link per unverified citation.
async fn check_verified_line(b: &Browser, run: &Value, word: &str) {
    let total = run["receipt"]["total"].as_u64().unwrap();
    let verified = run["receipt"]["verified"].as_u64().unwrap();
    assert!(total >= 1, "{run}");
    let line = text(b, "#ai-run .ai-verified").await;
    let said = if word == "引文核对" {
        format!("{total} 条引文中有 {verified} 条在所引段落中找到")
    } else {
        format!("{verified} of {total} quotes found in their passages")
    };
    assert!(line.contains(&said), "{line} vs {run}");
    let cites = count(b, "#ai-run .ai-answer .ai-cite").await;
    let unverified = count(b, "#ai-run .ai-answer .ai-cite-unverified").await;
    assert_eq!(cites as u64, total, "one marked citation per receipt entry");
    assert_eq!(unverified as u64, total - verified);
}

/// The ended run `id` is on the page (`#ai-run`) once, in its final state: the streamed text is
/// exactly the journal's deltas, every event up to the run's last seq rendered, one tool card per
/// `tool.started` (no call twice), the final answer in place of the stream reading as the run's
/// answer, the verified line right, and the run once in the session's history.
async fn check_shown_once(b: &Browser, id: &str, run: &Value, events: &[Value], word: &str) {
    assert_eq!(text(b, "#ai-run .ai-stream").await, deltas(events));
    let rendered = b.js("return document.querySelector('#ai-run .ai-turn').getAttribute('data-rendered-seq')", vec![]).await;
    assert_eq!(rendered.as_str().unwrap().parse::<i64>().unwrap(), run["lastSeq"].as_i64().unwrap());
    assert_eq!(events.last().unwrap()["seq"], run["lastSeq"], "the journal read to its end");
    let started = of_kind(events, "tool.started");
    assert!(!started.is_empty(), "{events:?}");
    assert_eq!(count(b, "#ai-run .ai-tool").await, started.len());
    let calls = b
        .js("return Array.from(document.querySelectorAll('#ai-run .ai-tool')).map(c => c.getAttribute('data-call-id'))", vec![])
        .await;
    let mut calls: Vec<String> = calls.as_array().unwrap().iter().map(|c| c.as_str().unwrap_or("").to_string()).collect();
    let mut expected: Vec<String> = started.iter().map(|e| e["payload"]["callId"].as_str().unwrap_or("").to_string()).collect();
    calls.sort();
    expected.sort();
    assert_eq!(calls, expected, "one card per tool call");
    assert_eq!(b.js("return document.querySelector('#ai-run .ai-stream').hidden", vec![]).await, true);
    assert_eq!(count(b, "#ai-run .ai-answer").await, 1);
    let shown = b.js("return document.querySelector('#ai-run .ai-answer').innerText", vec![]).await;
    assert_eq!(squash(shown.as_str().unwrap()), answer_text(run["answer"].as_str().unwrap()));
    check_verified_line(b, run, word).await;
    let in_history = format!("#ai-run .ai-history a[data-run-id='{id}']");
    b.poll("the run in the history", "return document.querySelectorAll(arguments[0]).length > 0", vec![json!(in_history)]).await;
    assert_eq!(count(b, &in_history).await, 1);
}

#[tokio::test]
async fn builtin_answers_with_verified_citations_that_open_the_viewer() {
    let app = spawn_app().await;
    let seed = seed(&app).await;
    let b = Browser::start("ai-builtin", &app.base).await;
    b.login(EMAIL, PASSWORD).await;

    b.goto("/ai").await;
    b.wait_for("#ai-form").await;
    let note =
        b.poll("the agent note", "const n = document.querySelector('#ai-agent-note'); return n && n.textContent", vec![]).await;
    assert_eq!(note, "runs offline (built-in): not configured");
    let id = ask(&b, "#ai-run", "hermes", QUESTION).await;
    assert_eq!(ended(&b, "#ai-run").await, "completed");
    let run = run_of(&seed.api, &id).await;
    assert_eq!((run["provider"].as_str(), run["providerNote"].as_str()), (Some("builtin"), Some("not_configured")));
    // Every KB ticked (the default): every KB the user can read, sent as none.
    assert_eq!(run["contextRefs"]["kbIds"], json!([]));
    let events = journal(&seed.api, &id).await;
    assert_eq!(count(&b, "#ai-run .ai-tool").await, of_kind(&events, "tool.started").len());
    assert!(count(&b, "#ai-run .ai-tool.ok").await >= 1);
    assert!(!text(&b, "#ai-run .ai-plan").await.is_empty(), "the plan is shown");
    // The answer first; how it was made (plan, tool cards in words, no ids) folded below it.
    let layout = b
        .js(
            "const t = document.querySelector('#ai-run .ai-turn'); const w = t.querySelector('.ai-work'); \
             const r = t.querySelector('.ai-result'); \
             return [!!(r.compareDocumentPosition(w) & Node.DOCUMENT_POSITION_FOLLOWING), w.open, \
               t.querySelector('.ai-tool-name').textContent, t.querySelector('.ai-tool-name').dataset.tool]",
            vec![],
        )
        .await;
    assert_eq!(layout, json!([true, false, "Searched the passages", "mnote.evidence.search"]));
    assert!(!text(&b, "#ai-run .ai-tool-args").await.contains("kbIds"), "no ids on the card");
    check_verified_line(&b, &run, "Quotes checked").await;
    assert!(text(&b, "#ai-run .ai-answer").await.contains("north hall"));
    // The run is in the session's history.
    b.poll("the history", "return document.querySelectorAll('#ai-run .ai-history li.current').length === 1", vec![]).await;
    shot(&b, "#ai-run", "en").await;

    // A citation opens the viewer at the cited block.
    let href = b.js("return document.querySelector('#ai-run .ai-answer a.ai-cite').getAttribute('href')", vec![]).await;
    let href = href.as_str().unwrap().to_string();
    assert!(href.starts_with("/sources/") && href.contains("?evidence=") && href.ends_with("#hl"), "{href}");
    assert!(href.contains(&format!("from=ai:{id}")), "the citation leads back to the answer: {href}");
    b.find("#ai-run .ai-answer a.ai-cite").await.click().await.unwrap();
    b.poll("the viewer", "return location.pathname.endsWith('/view') && !!document.getElementById('hl')", vec![]).await;
    let hl = b.js("return document.getElementById('hl').innerText", vec![]).await;
    assert!(hl.as_str().unwrap().contains("north hall"), "{hl}");
    let back = b.js("const a = document.querySelector('a.back-to-answer'); return a && a.getAttribute('href')", vec![]).await;
    assert_eq!(back, json!(format!("/ai/runs/{id}")), "the viewer leads back to the answer");
    b.screenshot("viewer").await;

    // Back on /ai the ended run is shown again (the snapshot), in its final state.
    b.goto("/ai").await;
    assert_eq!(shown_run(&b, "#ai-run").await, id);
    assert_eq!(ended(&b, "#ai-run").await, "completed");

    // The KB page's panel: that KB in context.
    b.goto(&format!("/kbs/{}", seed.kb)).await;
    let kb_run = ask(&b, ".ai-panel", "hermes", "What do people wear on the warehouse floor?").await;
    assert_eq!(ended(&b, ".ai-panel").await, "completed");
    assert!(count(&b, ".ai-panel .ai-answer a.ai-cite").await >= 1);
    let r = run_of(&seed.api, &kb_run).await;
    assert_eq!(r["contextRefs"]["kbIds"], json!([seed.kb]));
    shot(&b, ".ai-panel", "kb-panel").await;

    // The viewer's panel: the open document and its KB.
    b.goto(&format!("/sources/{}/view", seed.source)).await;
    b.wait_for(".ai-panel textarea").await;
    b.poll("the document's KB", "return !!document.querySelector('.ai-panel input[name=kb_id]')", vec![]).await;
    let doc_run = ask(&b, ".ai-panel", "hermes", "How often do robots report their battery level?").await;
    assert_eq!(ended(&b, ".ai-panel").await, "completed");
    let r = run_of(&seed.api, &doc_run).await;
    assert_eq!(
        (r["contextRefs"]["kbIds"].clone(), r["contextRefs"]["sourceIds"].clone()),
        (json!([seed.kb]), json!([seed.source]))
    );
    shot(&b, ".ai-panel", "viewer-panel").await;

    // The agent settings (rendered from the descriptors): everything on built-in, reasonix
    // left to the operator.
    b.goto("/settings/agents?tab=hermes").await;
    b.wait_for("#panel-hermes form.settings-form[data-section=admin]").await;
    assert!(text(&b, "#panel-hermes .ai-runs-on").await.contains("runs offline (built-in): not configured"));
    assert!(text(&b, "#panel-reasonix .ai-operator-note").await.contains("Not configured by the server operator"));
    assert_eq!(count(&b, "#panel-reasonix form[data-section=admin]").await, 0);
    assert_eq!(text(&b, "#panel-hermes .settings-secret-state").await, "no key");
    b.screenshot("settings-en").await;

    // 中文
    to_chinese(&b).await;
    b.goto("/settings/agents?tab=hermes").await;
    assert!(text(&b, "#panel-hermes .ai-runs-on").await.contains("离线运行（内置）：未配置"));
    b.screenshot("settings-zh").await;
    // A member sees no admin section and cannot save one.
    app.add_user(seed.tenant, "member@acme.test", "member").await;
    let mut m = app.login("member@acme.test").await;
    let (st, html) = m.page("/settings/agents").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("id=\"panel-hermes\"") && !html.contains("data-section=\"admin\""), "{html}");
    let r = m
        .post_form("/settings/agents/hermes", &[("section", "admin"), ("ai.agent.hermes.endpoint_url", "http://127.0.0.1:9/v1")])
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    b.goto("/ai").await;
    b.find("#ai-run button.ai-new-session").await.click().await.unwrap();
    b.poll("a new session", "return !document.querySelector('#ai-run .ai-turn')", vec![]).await;
    let note = text(&b, "#ai-agent-note").await;
    assert_eq!(note, "离线运行（内置）：未配置");
    let zh = ask(&b, "#ai-run", "hermes", "机器人在哪里过夜充电？").await;
    assert_eq!(ended(&b, "#ai-run").await, "completed");
    let run = run_of(&seed.api, &zh).await;
    check_verified_line(&b, &run, "引文核对").await;
    assert!(text(&b, "#ai-run .ai-answer").await.contains("北厅"));
    assert!(text(&b, "#ai-run .ai-status").await.contains("已完成"));
    shot(&b, "#ai-run", "zh").await;
    // The run's own page, rendered by the server.
    b.goto(&format!("/ai/runs/{zh}")).await;
    b.wait_for("#ai-run .ai-turn[data-ended=completed] .ai-answer a.ai-cite").await;
    assert!(text(&b, "#ai-run .ai-verified").await.contains("条在所引段落中找到"));
    shot(&b, "#ai-run", "run-page-zh").await;
    b.finish().await;

    // Without JavaScript: the form posts, the server creates the run and renders it.
    let mut c = app.login(EMAIL).await;
    let (st, html) = c.page("/ai").await;
    assert_eq!(st, StatusCode::OK);
    let doc = scraper::Html::parse_document(&html);
    let field = |name: &str| {
        let sel = scraper::Selector::parse(&format!("#ai-form input[name={name}]")).unwrap();
        doc.select(&sel).next().and_then(|e| e.value().attr("value")).unwrap_or_else(|| panic!("no {name}")).to_string()
    };
    let (request_id, session_id) = (field("request_id"), field("session_id"));
    let form = [
        ("request_id", request_id.as_str()),
        ("session_id", session_id.as_str()),
        ("agent_id", "hermes"),
        ("prompt", QUESTION),
        ("kb_id", seed.kb.as_str()),
    ];
    let r = c.post_form("/ai/runs", &form).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    assert!(to.starts_with("/ai/runs/"), "{to}");
    // The same form again (a double submit) is the same run.
    let again = c.post_form("/ai/runs", &form).await;
    assert_eq!(again.headers()["location"].to_str().unwrap(), to);
    let mut page = String::new();
    for _ in 0..200 {
        let (st, html) = c.page(&to).await;
        assert_eq!(st, StatusCode::OK);
        page = html;
        if page.contains("data-has-answer=\"true\"") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(page.contains("data-has-answer=\"true\""), "the run page never showed the answer:\n{page}");
    assert!(page.contains("class=\"ai-cite ai-cite-ok\"") && page.contains("class=\"ai-verified all\""), "{page}");
    assert!(page.contains("class=\"ai-tool ok\""), "{page}");
    assert!(page.contains(&format!("<a href=\"{to}\" data-run-id=")), "the session's history lists the run");
}

#[tokio::test]
async fn builtin_a_reload_right_after_asking_shows_the_final_state_once() {
    let app = spawn_app().await;
    let seed = seed(&app).await;
    let b = Browser::start("ai-builtin-reload", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, word, question) in [("en", "Quotes checked", QUESTION), ("zh", "引文核对", "机器人在哪里过夜充电？")]
    {
        if lang == "zh" {
            to_chinese(&b).await;
        }
        new_conversation(&b).await;
        let id = ask(&b, "#ai-run", "hermes", question).await;
        // Reloaded as soon as the run is shown: it ends about now (before, during or after the reload).
        b.c.refresh().await.unwrap();
        assert_eq!(shown_run(&b, "#ai-run").await, id);
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        let run = run_of(&seed.api, &id).await;
        assert_eq!((run["provider"].as_str(), run["status"].as_str()), (Some("builtin"), Some("completed")));
        let events = journal(&seed.api, &id).await;
        assert_eq!(events.last().unwrap()["kind"], "run.completed");
        check_shown_once(&b, &id, &run, &events, word).await;
        assert!(text(&b, "#ai-run .ai-answer").await.contains(if lang == "zh" { "北厅" } else { "north hall" }));
        shot(&b, "#ai-run", &format!("reloaded-{lang}")).await;
    }
    b.finish().await;
}

/// A runtime to run on in the browser: the app, the agent to pick, what its runs are on.
struct Runtime {
    app: TestApp,
    seed: Seed,
    agent: &'static str,
    /// The run's `provider`.
    provider: &'static str,
    /// Part of the (English) agent note once the agent is picked.
    note: &'static str,
}

/// An app whose `hermes` runs on the scripted OpenAI mock.
pub(crate) async fn hermes_app() -> (TestApp, Seed) {
    let base = lightrag::mock_llm().to_string();
    let allowed = base.clone();
    let app = spawn_app_with(move |c| c.agents.allowed_urls = vec![allowed]).await;
    let seed = seed(&app).await;
    let (st, v) =
        seed.api.send_json("PUT", "/api/page-ai/agents/hermes/config", json!({"endpointUrl": base, "model": "scripted"})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["provider"], "openai");
    (app, seed)
}

async fn hermes_runtime() -> Runtime {
    let (app, seed) = hermes_app().await;
    Runtime { app, seed, agent: "hermes", provider: "openai", note: "scripted" }
}

/// `scripts/acp_agent.py` (the test ACP agent), where the unprivileged agent user can read it.
fn acp_agent() -> PathBuf {
    crate::files::acp_agent_script().to_path_buf()
}

/// An app whose `reasonix` runs on the test ACP agent.
async fn reasonix_app() -> (TestApp, Seed) {
    let agent = acp_agent();
    assert!(agent.is_file(), "{} is missing", agent.display());
    let cmd = vec!["python3".to_string(), agent.display().to_string()];
    // The agent is confined (Landlock): it may read its own script's directory, as the
    // operator allows an agent's install path with MNOTE_ACP_READ_PATHS.
    let dir = agent.parent().unwrap().to_path_buf();
    let app = spawn_app_with(move |c| {
        c.agents.acp_command = Some(cmd);
        c.agents.acp_read_paths = vec![dir];
    })
    .await;
    let seed = seed(&app).await;
    (app, seed)
}

async fn reasonix_runtime() -> Runtime {
    let (app, seed) = reasonix_app().await;
    Runtime { app, seed, agent: "reasonix", provider: "acp", note: "ACP agent" }
}

/// Ask `rt.agent` a slow question, reload the page while the run is still live, and check the
/// run is picked up again and ends shown once (in English, then from the snapshot in Chinese).
/// The browser (in Chinese) and the run's id.
async fn reload_mid_answer(rt: &Runtime, name: &str) -> (Browser, String) {
    let b = Browser::start(name, &rt.app.base).await;
    b.login(EMAIL, PASSWORD).await;
    b.goto("/ai").await;
    b.wait_for("#ai-run select.ai-agent").await.select_by_value(rt.agent).await.unwrap();
    b.poll(
        "the agent note",
        "const n = document.querySelector('#ai-agent-note'); return n && n.textContent.includes(arguments[0])",
        vec![json!(rt.note)],
    )
    .await;
    let id = ask(&b, "#ai-run", rt.agent, &format!("{QUESTION} [[slow]]")).await;
    b.poll(
        "some streamed text",
        "const s = document.querySelector('#ai-run .ai-stream'); return s && s.textContent.length > 20",
        vec![],
    )
    .await;
    shot(&b, "#ai-run", "streaming-en").await;
    // Still answering when the page goes away.
    assert_eq!(run_of(&rt.seed.api, &id).await["status"], "running");
    b.c.refresh().await.unwrap();
    assert_eq!(shown_run(&b, "#ai-run").await, id);
    let mid = b
        .poll(
            "the run to stream again",
            "const t = document.querySelector('#ai-run .ai-turn'); \
             return t && !t.hasAttribute('data-ended') && t.querySelector('.ai-stream').textContent.length > 0 ? 'live' : (t && t.getAttribute('data-ended'))",
            vec![],
        )
        .await;
    assert_eq!(mid, "live", "the run ended before the reload finished: the test proves nothing");
    assert_eq!(ended(&b, "#ai-run").await, "completed");

    let run = run_of(&rt.seed.api, &id).await;
    assert_eq!(run["provider"], rt.provider);
    let events = journal(&rt.seed.api, &id).await;
    assert!(of_kind(&events, "message.delta").len() >= 10, "a slow answer comes in many deltas");
    // The transcript is the journal's text exactly (nothing twice, nothing missing), one card
    // per tool call, the final answer in place of the streamed text.
    check_shown_once(&b, &id, &run, &events, "Quotes checked").await;
    shot(&b, "#ai-run", "resumed-en").await;

    // 中文: the same run, ended, shown from the snapshot.
    to_chinese(&b).await;
    b.goto("/ai").await;
    assert_eq!(shown_run(&b, "#ai-run").await, id);
    assert_eq!(ended(&b, "#ai-run").await, "completed");
    check_shown_once(&b, &id, &run, &events, "引文核对").await;
    shot(&b, "#ai-run", "resumed-zh").await;
    (b, id)
}

#[tokio::test]
async fn a_reload_mid_answer_picks_the_run_up_without_rendering_anything_twice() {
    let rt = hermes_runtime().await;
    let (b, id) = reload_mid_answer(&rt, "ai-resume").await;

    // The settings page: hermes on the mock; a URL outside the allow-list is refused (saved
    // inline), the reason next to the field.
    b.goto("/settings/agents?tab=hermes").await;
    assert!(text(&b, "#panel-hermes .ai-runs-on").await.contains("scripted"));
    let url = b.find("#panel-hermes input[name='ai.agent.hermes.endpoint_url']").await;
    url.clear().await.unwrap();
    url.send_keys("http://evil.example/v1").await.unwrap();
    b.find("#panel-hermes form[data-section=admin] button.primary").await.click().await.unwrap();
    let err = b
        .poll(
            "the field's error",
            "const e = document.querySelector('#panel-hermes [data-error-for=\"ai.agent.hermes.endpoint_url\"]'); \
             return e && !e.hidden && e.textContent",
            vec![],
        )
        .await;
    assert!(err.as_str().unwrap().contains("此服务器不允许连接 http://evil.example"), "{err}");
    assert!(text(&b, "#panel-hermes form[data-section=admin] .settings-status").await.contains("未保存"));
    assert_eq!(run_of(&rt.seed.api, &id).await["provider"], "openai");
    let (_, agents) = rt.seed.api.get_json("/api/page-ai/agents").await;
    let hermes = agents["items"].as_array().unwrap().iter().find(|a| a["agentId"] == "hermes").unwrap().clone();
    assert_eq!(hermes["endpointUrl"].as_str(), Some(lightrag::mock_llm()), "the refused URL was not stored");
    b.screenshot("settings-refused-zh").await;
    b.finish().await;
}

#[tokio::test]
async fn a_reload_mid_answer_on_reasonix_picks_the_run_up_without_rendering_anything_twice() {
    let rt = reasonix_runtime().await;
    let (b, _) = reload_mid_answer(&rt, "ai-resume-reasonix").await;
    b.finish().await;
}

/// Cancel a slow run of `rt.agent` from the page (in English, then in Chinese), then without
/// JavaScript from the run page's cancel form.
async fn cancel_during_a_slow_run(rt: &Runtime, name: &str) {
    let (app, seed) = (&rt.app, &rt.seed);
    let b = Browser::start(name, &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, word) in [("en", "Cancelled"), ("zh", "已取消")] {
        if lang == "zh" {
            to_chinese(&b).await;
        }
        new_conversation(&b).await;
        let id = ask(&b, "#ai-run", rt.agent, &format!("{QUESTION} [[slow]]")).await;
        b.poll(
            "some streamed text",
            "const s = document.querySelector('#ai-run .ai-stream'); return s && s.textContent.length > 10",
            vec![],
        )
        .await;
        b.find("#ai-run .ai-cancel").await.click().await.unwrap();
        assert_eq!(ended(&b, "#ai-run").await, "cancelled");
        assert!(text(&b, "#ai-run .ai-status").await.contains(word));
        assert_eq!(count(&b, "#ai-run .ai-cancelled").await, 1);
        assert_eq!(count(&b, "#ai-run .ai-cancel").await, 0, "no cancel button once it ended");
        let run = run_of(&seed.api, &id).await;
        assert_eq!((run["status"].as_str(), run["provider"].as_str()), (Some("cancelled"), Some(rt.provider)));
        let events = journal(&seed.api, &id).await;
        assert_eq!(events.last().unwrap()["kind"], "run.cancelled");
        assert_eq!(text(&b, "#ai-run .ai-stream").await, deltas(&events));
        shot(&b, "#ai-run", &format!("cancelled-{lang}")).await;
    }
    b.finish().await;

    // Without JavaScript: the run page's cancel form. The agent stays silent until cancelled
    // (`[[hang]]`): a slow answer (6 s) could end before a loaded machine gets to the cancel.
    let (st, run) = seed
        .api
        .post_json(
            "/api/page-ai/runs",
            json!({"requestId": format!("nojs-cancel-{}", rt.agent), "sessionId": "nojs", "agentId": rt.agent, "prompt": format!("{QUESTION} [[hang]]"), "contextRefs": {"kbIds": [seed.kb]}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{run}");
    let id = run["hostRunId"].as_str().unwrap().to_string();
    let mut c = app.login(EMAIL).await;
    let (_, html) = c.page(&format!("/ai/runs/{id}")).await;
    assert!(html.contains(&format!("action=\"/ai/runs/{id}/cancel\"")), "{html}");
    let r = c.post_form(&format!("/ai/runs/{id}/cancel"), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let mut status = Value::Null;
    for _ in 0..200 {
        status = run_of(&seed.api, &id).await["status"].clone();
        if status != "running" && status != "pending" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, "cancelled");
    let (_, html) = c.page(&format!("/ai/runs/{id}")).await;
    assert!(html.contains("class=\"notice warn ai-cancelled\"") && !html.contains("ai-cancel-form"), "{html}");
}

#[tokio::test]
async fn cancel_during_a_slow_run_shows_it_cancelled() {
    cancel_during_a_slow_run(&hermes_runtime().await, "ai-cancel").await;
}

#[tokio::test]
async fn cancel_during_a_slow_reasonix_run_shows_it_cancelled() {
    cancel_during_a_slow_run(&reasonix_runtime().await, "ai-cancel-reasonix").await;
}

#[tokio::test]
async fn reasonix_on_the_test_acp_agent_streams_and_completes() {
    let (app, seed) = reasonix_app().await;
    let b = Browser::start("ai-reasonix", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    for (lang, word, status) in [("en", "Quotes checked", "Completed"), ("zh", "引文核对", "已完成")] {
        if lang == "zh" {
            to_chinese(&b).await;
        }
        new_conversation(&b).await;
        b.wait_for("#ai-run select.ai-agent").await.select_by_value("reasonix").await.unwrap();
        let note = text(&b, "#ai-agent-note").await;
        assert!(!note.contains("built-in") && !note.contains("内置"), "{note}");
        let id = ask(&b, "#ai-run", "reasonix", QUESTION).await;
        assert_eq!(ended(&b, "#ai-run").await, "completed");
        let run = run_of(&seed.api, &id).await;
        assert_eq!(run["provider"], "acp");
        let events = journal(&seed.api, &id).await;
        assert!(!of_kind(&events, "message.delta").is_empty());
        assert_eq!(text(&b, "#ai-run .ai-stream").await, deltas(&events));
        assert!(!text(&b, "#ai-run .ai-plan").await.is_empty(), "the agent's plan is shown");
        assert!(count(&b, "#ai-run .ai-tool").await >= 1);
        assert!(text(&b, "#ai-run .ai-answer").await.contains("north hall"));
        assert!(text(&b, "#ai-run .ai-status").await.contains(status));
        check_verified_line(&b, &run, word).await;
        shot(&b, "#ai-run", lang).await;
    }
    b.finish().await;
}

#[tokio::test]
async fn an_interrupted_run_offers_resume_which_continues_it_as_a_child_run() {
    let (app, seed) = hermes_app().await;
    let b = Browser::start("ai-interrupted", &app.base).await;
    b.login(EMAIL, PASSWORD).await;
    b.goto("/ai").await;
    let parent = ask(&b, "#ai-run", "hermes", &format!("{QUESTION} [[slow]]")).await;
    b.poll(
        "some streamed text",
        "const s = document.querySelector('#ai-run .ai-stream'); return s && s.textContent.length > 10",
        vec![],
    )
    .await;
    // The worker's process "stops": its live runs are handed over as interrupted.
    let owner: String = {
        let mut tx = mnote::db::TenantTx::begin(&app.pool, seed.tenant, mnote::db::Scope::System).await.unwrap();
        let o = sqlx::query_scalar("select lease_owner from ai_run where id = $1::uuid")
            .bind(&parent)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        o
    };
    assert_eq!(mnote::journal::reconcile::release(&app.pool, &owner).await.unwrap(), 1);
    assert_eq!(ended(&b, "#ai-run").await, "interrupted");
    assert_eq!(count(&b, "#ai-run .ai-interrupted .ai-resume").await, 1);
    assert!(text(&b, "#ai-run .ai-status").await.contains("Interrupted"));
    shot(&b, "#ai-run", "interrupted-en").await;

    // Resume: a child run of the same question, shown and streamed.
    b.find("#ai-run .ai-resume").await.click().await.unwrap();
    let child = b
        .poll(
            "the child run",
            "const t = document.querySelector('#ai-run .ai-turn'); const id = t && t.getAttribute('data-run-id'); \
             return id && id !== arguments[0] ? id : null",
            vec![json!(parent)],
        )
        .await;
    let child = child.as_str().unwrap().to_string();
    let run = run_of(&seed.api, &child).await;
    assert_eq!(run["parentRunId"].as_str(), Some(parent.as_str()));
    assert_eq!(run["prompt"], run_of(&seed.api, &parent).await["prompt"]);
    assert_eq!(ended(&b, "#ai-run").await, "completed");
    let events = journal(&seed.api, &child).await;
    assert_eq!(text(&b, "#ai-run .ai-stream").await, deltas(&events));
    shot(&b, "#ai-run", "resumed-child-en").await;

    // 中文: the interrupted run's own page (server-rendered) still offers Resume, as a plain form.
    to_chinese(&b).await;
    b.goto(&format!("/ai/runs/{parent}")).await;
    b.wait_for("#ai-run .ai-resume-form button").await;
    assert!(text(&b, "#ai-run .ai-resume").await.contains("继续"));
    assert!(text(&b, "#ai-run .ai-status").await.contains("已中断"));
    shot(&b, "#ai-run", "interrupted-zh").await;
    b.finish().await;

    // Without JavaScript: the resume form creates one child however often it is sent.
    let mut c = app.login(EMAIL).await;
    let (_, html) = c.page(&format!("/ai/runs/{parent}")).await;
    let doc = scraper::Html::parse_document(&html);
    let sel = scraper::Selector::parse(".ai-resume-form input[name=resume_request_id]").unwrap();
    let resume_id = doc.select(&sel).next().and_then(|e| e.value().attr("value")).expect("a resume form").to_string();
    let path = format!("/ai/runs/{parent}/resume");
    let first = c.post_form(&path, &[("resume_request_id", &resume_id)]).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    let to = first.headers()["location"].to_str().unwrap().to_string();
    let again = c.post_form(&path, &[("resume_request_id", &resume_id)]).await;
    assert_eq!(again.headers()["location"].to_str().unwrap(), to);
    let second = to.trim_start_matches("/ai/runs/");
    assert!(second != child && second != parent, "{to}");
    assert_eq!(run_of(&seed.api, second).await["parentRunId"].as_str(), Some(parent.as_str()));
    let (st, _) = seed.api.post_json(&format!("/api/page-ai/runs/{second}/cancel"), json!({})).await;
    assert_eq!(st, StatusCode::OK);
}
