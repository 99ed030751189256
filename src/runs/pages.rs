//! Page AI in the browser.
//!
//! - `/ai`: pick an agent, the knowledge bases in context, ask; the session's earlier runs.
//!   `static/ai-run.js` streams a run's journal into the page (and picks a live run up again
//!   after a reload); without JavaScript the form posts to `POST /ai/runs`, which creates the run
//!   (its `requestId` is a hidden field rendered here) and redirects to `/ai/runs/{id}`.
//! - `/ai/runs/{id}`: the run rendered on the server from its row and journal (status, plan,
//!   tool calls, the text so far, and when it ended the answer with its citations checked);
//!   a reload shows the progress. Cancel and resume are plain forms too.
//! - `/ai/runs/{id}/result`: the ended run's result block alone, which `ai-run.js` swaps in when
//!   the ending event arrives, so the final answer is rendered by one renderer ([`answer`]).
//! - The compact panel of the KB and viewer pages (`templates/ai/panel.html`) is
//!   `web::ai_panel::AiPanel`, built by those pages' handlers.

mod answer;
pub mod conversations;
mod receipt;

use askama::Template;
use axum::{
    Form,
    extract::{Path, Query, State},
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use tower_sessions::Session;
use uuid::Uuid;

use super::service::{self, CreateRun};
use crate::journal::{
    ContextRefs, ErrorBody, Event, PlanEntry, RunStatus,
    store::{self, RunRow},
};
use crate::{
    agents::{AgentId, Provider, descriptors, pages as agent_pages},
    auth::Auth,
    error::{AppError, AppResult},
    state::AppState,
    web::{Lang, Page, PageCtx, flash, render},
};

/// Most events the run page reads (a run's journal is far smaller in practice).
const MAX_EVENTS: usize = 20_000;

use crate::web::ai_panel::tool_error_words;
pub use crate::web::ai_panel::{fresh_id, labels};

/// Why a run failed, in the reader's words.
fn run_error_words(lang: Lang, code: &str) -> String {
    lang.t_opt(&format!("assist.run_error.{code}")).unwrap_or_else(|| lang.t("assist.run_error.other"))
}

/// What `agent` is, in one line of `lang` (the picker's option: "Hermes — …").
pub fn about(lang: Lang, agent: AgentId) -> String {
    crate::web::ai_panel::about(lang, agent.as_str())
}

/// "3 results", "1 result" (the tool cards).
fn results_words(lang: Lang, n: usize) -> String {
    if n == 1 { lang.t("assist.result_one") } else { lang.t("ai.results").replace("{n}", &n.to_string()) }
}

/// An id a client makes up (the API's rule): 1–200 characters of `[A-Za-z0-9_.:-]`.
fn valid_client_id(v: &str) -> bool {
    !v.is_empty() && v.len() <= 200 && v.chars().all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

fn status_label(ctx: &PageCtx, s: RunStatus) -> String {
    ctx.tk("ai.status", s.as_str())
}

fn short(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max { s.to_string() } else { format!("{}…", s.chars().take(max).collect::<String>()) }
}

// ---------- the result of an ended run ----------

/// A citation that did not verify, listed below the answer.
pub struct UnverifiedRow {
    label: String,
    reason: String,
    sentence: String,
}

/// What an ended run shows: its answer (checked), or why there is none.
pub struct ResultView {
    run_id: Uuid,
    status: &'static str,
    answer_html: Option<String>,
    /// The answer of a run that did not complete (what it had written).
    partial: bool,
    /// Whether the evidence answers, and what was checked.
    verdict: receipt::VerdictView,
    unverified: Vec<UnverifiedRow>,
    error: Option<ErrorBody>,
    /// Why the run failed, in the reader's words.
    error_words: String,
    /// The server's own message of a failure, for admins (it may name server settings).
    error_detail: bool,
    cancelled: bool,
    interrupted: bool,
    /// The id a resume form sends (a second submit of the same form resumes once).
    resume_request_id: String,
    /// "Retry" (failed, cancelled) or "Regenerate" (completed): the same question again in the
    /// same conversation; empty while nothing can be retried.
    retry_label: String,
    /// The `requestId` of the run a retry form creates.
    retry_request_id: String,
}

fn reason_words(ctx: &PageCtx, code: &str) -> String {
    let key = format!("ai.reason.{code}");
    let w = ctx.t(&key);
    if w == key { code.to_string() } else { w }
}

fn result_view(ctx: &PageCtx, run: &RunRow) -> ResultView {
    let status = run.status;
    let receipt = run.receipt.as_ref().map(|r| &r.0);
    let checks: Vec<answer::Check> = receipt
        .iter()
        .flat_map(|r| r.citations.iter())
        .map(|c| answer::Check { evidence_id: c.evidence_id, verified: c.verified, reason: c.reason.clone() })
        .collect();
    let tooltip = |verified: bool, reason: &str| {
        let head = if verified { ctx.t("ai.cite_ok") } else { ctx.t("ai.cite_not_verified") };
        format!("{head}: {}", reason_words(ctx, reason))
    };
    let mark = ctx.t("assist.unsupported_mark");
    let rendered =
        run.answer.as_deref().filter(|a| !a.trim().is_empty()).map(|a| answer::render_marked(a, &checks, &tooltip, Some(&mark)));
    let verdict = receipt::verdict_view(ctx, receipt);
    let unverified = receipt
        .iter()
        .flat_map(|r| r.citations.iter())
        .filter(|c| !c.verified)
        .map(|c| UnverifiedRow {
            label: c.label.clone(),
            reason: reason_words(ctx, &c.reason),
            sentence: short(&c.sentence, 240),
        })
        .collect();
    let error = match (&run.error_code, status) {
        (Some(code), RunStatus::Failed) => {
            Some(ErrorBody { code: code.clone(), message: run.error_message.clone().unwrap_or_default() })
        }
        (None, RunStatus::Failed) => Some(ErrorBody { code: "internal".into(), message: String::new() }),
        _ => None,
    };
    ResultView {
        run_id: run.id,
        status: status.as_str(),
        partial: rendered.is_some() && status != RunStatus::Completed,
        answer_html: rendered.map(|r| r.html),
        verdict,
        unverified,
        error_words: error.as_ref().map(|e| run_error_words(ctx.lang, &e.code)).unwrap_or_default(),
        error_detail: ctx.user.as_ref().is_some_and(|u| u.is_admin),
        error,
        cancelled: status == RunStatus::Cancelled,
        interrupted: status == RunStatus::Interrupted,
        retry_label: match status {
            RunStatus::Completed => ctx.t("conversations.regenerate"),
            RunStatus::Failed | RunStatus::Cancelled => ctx.t("conversations.retry"),
            _ => String::new(),
        },
        retry_request_id: fresh_id(),
        resume_request_id: fresh_id(),
    }
}

// ---------- a run as the page shows it ----------

/// One tool call: `tool.started` and, once it returned, its `tool.completed`.
pub struct ToolCard {
    call_id: String,
    name: String,
    /// The tool in words (`ai.tool_label.<name>`), else its name.
    label: String,
    args: String,
    /// `running | ok | failed`
    state: &'static str,
    summary: String,
}

/// Whether an argument names ids (`sourceId`, `kbIds`, `block_id`): left out of the card,
/// which shows what was asked, not the machinery's ids.
fn is_id_arg(key: &str) -> bool {
    ["id", "ids"].contains(&key) || ["Id", "Ids", "_id", "_ids"].iter().any(|end| key.ends_with(end))
}

/// `{"query": "robots", "limit": 5}` → `limit: 5, query: "robots"` (one line, capped; id
/// arguments left out).
fn args_summary(v: &serde_json::Value) -> String {
    // JSON edge: tool arguments as a model sent them
    use serde_json::Value; // JSON edge: as above
    let one = |v: &Value| match v {
        Value::String(s) => format!("\"{}\"", short(s, 80)),
        Value::Array(a) => format!("[{}]", a.len()),
        Value::Object(_) => "{…}".to_string(),
        other => other.to_string(),
    };
    let s = match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().filter(|k| !is_id_arg(k)).collect();
            keys.sort();
            keys.iter().map(|k| format!("{k}: {}", one(&m[k.as_str()]))).collect::<Vec<_>>().join(", ")
        }
        Value::Null => String::new(),
        other => one(other),
    };
    short(&s, 200)
}

fn tool_summary(ctx: &PageCtx, c: &crate::journal::ToolCompleted) -> String {
    if let Some(e) = &c.error {
        return tool_error_words(ctx.lang, &e.code);
    }
    // A count reads in the page's language; the tool's own summary (English) otherwise.
    match (c.count, &c.summary) {
        (Some(n), _) => results_words(ctx.lang, n),
        (None, Some(s)) => s.clone(),
        _ => String::new(),
    }
}

pub struct RunDetail {
    id: Uuid,
    prompt: String,
    agent_name: String,
    runs_on: String,
    status: &'static str,
    status_label: String,
    live: bool,
    created: String,
    plan: Vec<PlanEntry>,
    tools: Vec<ToolCard>,
    changed_files: Vec<String>,
    /// The answer text streamed so far (shown until the final answer replaces it).
    stream: String,
    /// The last journal event rendered (`data-rendered-seq`, as the script marks it).
    rendered_seq: i64,
    result: Option<ResultView>,
}

impl RunDetail {
    fn title(&self) -> String {
        short(&self.prompt, 60)
    }

    fn stream_hidden(&self) -> bool {
        self.stream.is_empty() || self.result.as_ref().is_some_and(|r| r.answer_html.is_some())
    }
}

fn runs_on_words(ctx: &PageCtx, run: &RunRow) -> String {
    match (run.provider, run.provider_note.as_deref()) {
        (Provider::Builtin, Some("not_configured")) => ctx.t("ai.runs_on.builtin_not_configured"),
        (Provider::Builtin, _) => ctx.t("ai.runs_on.builtin"),
        (Provider::OpenAi, _) => ctx.t("ai.runs_on.openai_run"),
        (Provider::Acp, _) => ctx.t("ai.runs_on.acp"),
    }
}

fn run_detail(ctx: &PageCtx, run: &RunRow, events: &[store::EventRow]) -> RunDetail {
    let mut plan = Vec::new();
    let mut tools: Vec<ToolCard> = Vec::new();
    let mut changed_files = Vec::new();
    let mut stream = String::new();
    for e in events {
        match e.event.0.clone() {
            Event::MessageDelta { text } => stream.push_str(&text),
            Event::PlanUpdated { entries } => plan = entries,
            Event::ToolStarted(t) => match tools.iter_mut().find(|c| c.call_id == t.call_id) {
                Some(c) => c.args = args_summary(&t.arguments),
                None => tools.push(ToolCard {
                    call_id: t.call_id,
                    label: crate::web::ai_panel::tool_label(ctx.lang, &t.name),
                    name: t.name,
                    args: args_summary(&t.arguments),
                    state: "running",
                    summary: String::new(),
                }),
            },
            Event::ToolCompleted(t) => {
                let summary = tool_summary(ctx, &t);
                let state = if t.ok { "ok" } else { "failed" };
                match tools.iter_mut().find(|c| c.call_id == t.call_id) {
                    Some(c) => {
                        c.state = state;
                        c.summary = summary;
                    }
                    None => tools.push(ToolCard {
                        call_id: t.call_id,
                        label: crate::web::ai_panel::tool_label(ctx.lang, &t.name),
                        name: t.name,
                        args: String::new(),
                        state,
                        summary,
                    }),
                }
            }
            Event::ChangedFiles { files } => changed_files.extend(files),
            _ => {}
        }
    }
    let status = run.status;
    let agent_name = run.agent_id.display_name().to_string();
    RunDetail {
        id: run.id,
        prompt: run.prompt.clone(),
        agent_name,
        runs_on: runs_on_words(ctx, run),
        status: status.as_str(),
        status_label: status_label(ctx, status),
        live: status.is_live(),
        created: run.created_at.format("%Y-%m-%d %H:%M").to_string(),
        plan,
        tools,
        changed_files,
        stream,
        rendered_seq: events.last().map(|e| e.seq).unwrap_or(0),
        result: (!status.is_live()).then(|| result_view(ctx, run)),
    }
}

/// One earlier run of the session.
pub struct HistoryItem {
    id: Uuid,
    prompt: String,
    status: &'static str,
    status_label: String,
    when: String,
    current: bool,
}

fn history(ctx: &PageCtx, runs: &[RunRow], current: Option<Uuid>) -> Vec<HistoryItem> {
    runs.iter()
        .map(|r| HistoryItem {
            id: r.id,
            prompt: short(&r.prompt, 90),
            status: r.status.as_str(),
            status_label: status_label(ctx, r.status),
            when: r.created_at.format("%m-%d %H:%M").to_string(),
            current: Some(r.id) == current,
        })
        .collect()
}

// ---------- the /ai page ----------

pub struct AgentChoice {
    id: &'static str,
    name: &'static str,
    /// What the agent is, in one line.
    about: String,
    note: String,
    caps: String,
    selected: bool,
}

/// `Evidence · Knowledge graph (switched off)`: an agent's capabilities as its descriptor says.
fn capability_words(ctx: &PageCtx, d: &descriptors::Descriptor) -> String {
    if d.capability_states.is_empty() {
        return ctx.t("agents.without_tools");
    }
    let parts: Vec<String> = d
        .capability_states
        .iter()
        .map(|(c, s)| {
            let name = ctx.tk("agents.cap", c.as_str());
            if *s == "enabled" { name } else { format!("{name} ({})", ctx.tk("agents.cap_state", s)) }
        })
        .collect();
    format!("{}: {}", ctx.t("agents.capabilities"), parts.join(" · "))
}

pub struct KbChoice {
    id: Uuid,
    name: String,
    checked: bool,
}

#[derive(Template)]
#[template(path = "ai/page.html")]
struct AiPage {
    ctx: PageCtx,
    labels: String,
    agents: Vec<AgentChoice>,
    agent_note: String,
    /// The picked agent's capabilities, in words.
    agent_caps: String,
    kbs: Vec<KbChoice>,
    request_id: String,
    session_id: String,
    /// The session came from the URL (or the shown run): the script keeps it.
    session_fixed: bool,
    /// A new conversation (`new=1`, the navigation's link; or `ask=`): the script does not
    /// resume the one this tab had open.
    session_fresh: bool,
    /// No model connected for the agents that chat: who is told so.
    no_model: Option<NoModel>,
    history: Vec<HistoryItem>,
    run: Option<RunDetail>,
    /// The conversation's turns before the shown run, and after it (rendered from their rows).
    before: Vec<RunDetail>,
    after: Vec<RunDetail>,
    /// The shown conversation's title (none before its first question).
    conversation_title: Option<String>,
    /// The caller's conversations, and the search over them.
    conversations: Vec<conversations::ConversationItem>,
    q: String,
    /// A question to fill into the box (`ask=`: the former Ask pages lead here with theirs).
    ask: String,
}

/// Who reads `/ai` while no model is connected: an owner or admin is shown how to connect one
/// (a link to the agent settings), a member that the built-in offline agent answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoModel {
    Admin,
    Member,
}

impl NoModel {
    fn for_admin(self) -> bool {
        self == NoModel::Admin
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct AiQuery {
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    kb: Option<Uuid>,
    #[serde(default)]
    agent: Option<String>,
    /// Searches the conversation list.
    #[serde(default)]
    q: Option<String>,
    /// A question to fill into the box, not yet asked.
    #[serde(default)]
    ask: Option<String>,
    /// `new=1`: a new conversation (the navigation's "Assistant"), not the last one resumed.
    #[serde(default)]
    new: Option<String>,
}

/// What the page's text boxes start with: the conversation search, a question to ask.
#[derive(Debug, Default)]
struct Typed {
    search: String,
    ask: String,
    /// A new conversation was asked for (`new=1`).
    new: bool,
}

/// Everything the page needs besides the run: agents, KBs, the session's runs.
async fn page_of(
    state: &AppState,
    page: Page,
    session: Option<String>,
    agent: Option<&str>,
    kbs_in_context: Option<&[Uuid]>,
    run: Option<(RunRow, Vec<store::EventRow>)>,
    typed: Typed,
) -> AppResult<Response> {
    let q = typed.search.as_str();
    // Agents, the default agent, the KBs with the default ones and each agent's capabilities
    // all come from the caller's descriptors.
    let d = descriptors::for_caller(state, &page.auth, page.ctx.lang).await?;
    let mut tx = page.auth.tx(state).await?;
    let (session_id, session_fixed) = match session {
        Some(s) => (s, true),
        None => (fresh_id(), false),
    };
    // The whole conversation: its runs oldest first; the one shown (asked for, else the newest)
    // with its journal, the others from their rows.
    let all =
        if session_fixed { crate::runs::conversations::runs(&mut tx, page.auth.user_id, &session_id).await? } else { Vec::new() };
    let run = match run {
        Some(r) => Some(r),
        None => match all.last() {
            Some(last) => Some((last.clone(), load_events(&mut tx, last.id).await?)),
            None => None,
        },
    };
    let runs: Vec<RunRow> = all.iter().rev().take(50).cloned().collect();
    let conversation_title = if session_fixed { conversations::title(&mut tx, &page.auth, &session_id).await? } else { None };
    let conversation_list =
        conversations::items(&page.ctx, &mut tx, &page.auth, q, session_fixed.then_some(session_id.as_str())).await?;
    tx.commit().await?;
    let ctx = page.ctx;
    let picked = agent.and_then(AgentId::parse).unwrap_or_else(|| d.default_agent());
    let agents: Vec<AgentChoice> = d
        .items
        .iter()
        .map(|x| AgentChoice {
            id: x.agent_id,
            name: x.display_name,
            about: AgentId::parse(x.agent_id).map(|a| about(ctx.lang, a)).unwrap_or_default(),
            note: agent_pages::runs_on_words(&ctx, x),
            caps: capability_words(&ctx, x),
            selected: x.agent_id == picked.as_str(),
        })
        .collect();
    // No agent that talks to a model has one connected: every run answers on the built-in agent.
    let chatting: Vec<bool> = d.items.iter().filter(|x| x.provider == Provider::OpenAi).map(|x| x.runtime_configured).collect();
    let no_model = (!chatting.is_empty() && !chatting.contains(&true)).then_some(if page.auth.role.is_admin() {
        NoModel::Admin
    } else {
        NoModel::Member
    });
    let session_fresh = !session_fixed && (typed.new || !typed.ask.is_empty());
    let agent_note = agents.iter().find(|a| a.selected).map(|a| a.note.clone()).unwrap_or_default();
    let agent_caps = agents.iter().find(|a| a.selected).map(|a| a.caps.clone()).unwrap_or_default();
    // The context: the run's KBs, else the user's default KBs, else every KB they can read.
    let defaults = d.default_kbs();
    let in_context: Option<&[Uuid]> = match kbs_in_context {
        Some(ids) => Some(ids),
        None if !defaults.is_empty() => Some(defaults.as_slice()),
        None => None,
    };
    let kbs = d
        .common
        .fields
        .iter()
        .find(|f| f.key == "ai.common.default_kbs")
        .map(|f| f.options_list().to_vec())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| Some((Uuid::parse_str(&o.value).ok()?, o.label)))
        .map(|(id, name)| KbChoice { checked: in_context.is_none_or(|ids| ids.is_empty() || ids.contains(&id)), id, name })
        .collect();
    let current = run.as_ref().map(|(r, _)| r.id);
    let (before, after) = conversations::around(&ctx, &all, current);
    let detail = run.map(|(r, events)| run_detail(&ctx, &r, &events));
    render(AiPage {
        labels: labels(ctx.lang),
        history: history(&ctx, &runs, current),
        ctx,
        agents,
        agent_note,
        agent_caps,
        kbs,
        request_id: fresh_id(),
        session_fresh,
        no_model,
        session_id,
        session_fixed,
        run: detail,
        before,
        after,
        conversation_title,
        conversations: conversation_list,
        q: q.to_string(),
        ask: typed.ask,
    })
}

/// `GET /ai?session=&kb=&agent=&q=&ask=`
pub async fn ai_page(State(state): State<AppState>, page: Page, Query(q): Query<AiQuery>) -> AppResult<Response> {
    let session = q.session.filter(|s| valid_client_id(s));
    let kbs: Option<Vec<Uuid>> = q.kb.map(|k| vec![k]);
    let typed = Typed {
        search: q.q.as_deref().unwrap_or("").trim().chars().take(200).collect(),
        ask: q.ask.as_deref().unwrap_or("").trim().chars().take(4000).collect(),
        new: q.new.is_some(),
    };
    page_of(&state, page, session, q.agent.as_deref(), kbs.as_deref(), None, typed).await
}

async fn load_run(state: &AppState, auth: &Auth, id: Uuid) -> AppResult<(RunRow, Vec<store::EventRow>)> {
    let mut tx = auth.tx(state).await?;
    let run = store::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    let events = load_events(&mut tx, id).await?;
    tx.commit().await?;
    Ok((run, events))
}

/// A run's journal (at most [`MAX_EVENTS`] events).
async fn load_events(tx: &mut crate::db::TenantTx, id: Uuid) -> AppResult<Vec<store::EventRow>> {
    let mut events = Vec::new();
    loop {
        let after = events.last().map(|e: &store::EventRow| e.seq).unwrap_or(0);
        let page = store::events_after(tx, id, after, store::PAGE).await?;
        let n = page.len();
        events.extend(page);
        if (n as i64) < store::PAGE || events.len() >= MAX_EVENTS {
            break;
        }
    }
    Ok(events)
}

/// `GET /ai/runs/{id}`: the run, server-rendered (reload to see progress).
pub async fn run_page(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    let (run, events) = load_run(&state, &page.auth, id).await?;
    let session = Some(run.session_id.clone());
    let agent = run.agent_id.as_str();
    let kbs = run.context().kb_ids;
    page_of(&state, page, session, Some(agent), Some(&kbs), Some((run, events)), Typed::default()).await
}

#[derive(Template)]
#[template(path = "ai/result.html")]
struct ResultFragment {
    ctx: PageCtx,
    result: ResultView,
}

/// `GET /ai/runs/{id}/result`: the result block of an ended run, for `ai-run.js`.
pub async fn result_fragment(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Response> {
    let mut tx = page.auth.tx(&state).await?;
    let run = store::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    let result = result_view(&page.ctx, &run);
    render(ResultFragment { ctx: page.ctx, result })
}

// ---------- forms (no JavaScript) ----------

/// The ask form, read from its pairs (`kb_id` and `source_id` repeat).
#[derive(Debug, Default)]
struct AskForm {
    request_id: String,
    session_id: String,
    agent_id: String,
    prompt: String,
    kb_ids: Vec<Uuid>,
    /// How many KB boxes the form had (`/ai`): all of them ticked means every KB the user can
    /// read, sent as none (the API takes at most 50).
    kb_choices: Option<usize>,
    source_ids: Vec<Uuid>,
    back: Option<String>,
}

impl AskForm {
    fn from_pairs(pairs: Vec<(String, String)>) -> AppResult<AskForm> {
        let mut f = AskForm::default();
        let uuid = |field: &str, v: &str| Uuid::parse_str(v.trim()).map_err(|_| AppError::invalid(field, "not an id"));
        for (k, v) in pairs {
            match k.as_str() {
                "request_id" => f.request_id = v,
                "session_id" => f.session_id = v,
                "agent_id" => f.agent_id = v,
                "prompt" => f.prompt = v,
                "kb_id" => f.kb_ids.push(uuid("kb_id", &v)?),
                "source_id" => f.source_ids.push(uuid("source_id", &v)?),
                "back" => f.back = Some(v),
                "kb_choices" => f.kb_choices = v.trim().parse().ok(),
                _ => {}
            }
        }
        Ok(f)
    }
}

/// Create a run with the API's checks and idempotency; its id.
async fn start(state: &AppState, auth: &Auth, body: CreateRun) -> AppResult<Uuid> {
    Ok(service::start(state, auth, &body).await?.run().id)
}

/// A form error goes back to the page it came from as a notice, not an error page.
async fn back_with(session: &Session, to: String, e: AppError) -> AppResult<Response> {
    match e {
        AppError::Invalid { .. } | AppError::Conflict(_) | AppError::Upstream(_) => {
            flash(session, e.to_string()).await?;
            Ok(Redirect::to(&to).into_response())
        }
        other => Err(other),
    }
}

/// `POST /ai/runs` (the ask form without JavaScript) → `/ai/runs/{id}`.
pub async fn create_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Form(pairs): Form<Vec<(String, String)>>,
) -> AppResult<Response> {
    let f = AskForm::from_pairs(pairs)?;
    let back = match &f.back {
        Some(b) => crate::web::safe_next(Some(b)),
        None if valid_client_id(&f.session_id) => format!("/ai?session={}", f.session_id),
        None => "/ai".to_string(),
    };
    let mut kb_ids = if f.kb_choices.is_some_and(|n| n > 0 && n == f.kb_ids.len()) { Vec::new() } else { f.kb_ids.clone() };
    if kb_ids.is_empty() && !f.source_ids.is_empty() {
        // The viewer's panel names the document; its KB comes with it.
        let mut tx = page.auth.tx(&state).await?;
        for s in &f.source_ids {
            if let Some(src) = crate::sources::queries::get(&mut tx, *s).await?
                && !kb_ids.contains(&src.kb_id)
            {
                kb_ids.push(src.kb_id);
            }
        }
        tx.commit().await?;
    }
    let body = CreateRun {
        request_id: f.request_id,
        session_id: f.session_id,
        agent_id: f.agent_id,
        prompt: f.prompt,
        context_refs: ContextRefs { kb_ids, source_ids: f.source_ids, evidence_ids: Vec::new() },
        parent_run_id: None,
        resume_request_id: None,
    };
    match start(&state, &page.auth, body).await {
        Ok(id) => Ok(Redirect::to(&format!("/ai/runs/{id}")).into_response()),
        Err(e) => back_with(&session, back, e).await,
    }
}

/// `POST /ai/runs/{id}/cancel`
pub async fn cancel_form(State(state): State<AppState>, page: Page, Path(id): Path<Uuid>) -> AppResult<Redirect> {
    let _run = crate::journal::handlers::cancel(State(state), page.auth, Path(id)).await?;
    Ok(Redirect::to(&format!("/ai/runs/{id}")))
}

#[derive(Debug, Deserialize)]
pub struct ResumeForm {
    resume_request_id: String,
}

/// `POST /ai/runs/{id}/resume`: a child run that continues the interrupted one.
pub async fn resume_form(
    State(state): State<AppState>,
    session: Session,
    page: Page,
    Path(id): Path<Uuid>,
    Form(f): Form<ResumeForm>,
) -> AppResult<Response> {
    let mut tx = page.auth.tx(&state).await?;
    let parent = store::get(&mut tx, id).await?.ok_or(AppError::NotFound)?;
    tx.commit().await?;
    let body = CreateRun {
        request_id: fresh_id(),
        session_id: parent.session_id.clone(),
        agent_id: parent.agent_id.as_str().to_string(),
        prompt: parent.prompt.clone(),
        context_refs: parent.context(),
        parent_run_id: Some(id),
        resume_request_id: Some(f.resume_request_id),
    };
    match start(&state, &page.auth, body).await {
        Ok(child) => Ok(Redirect::to(&format!("/ai/runs/{child}")).into_response()),
        Err(e) => back_with(&session, format!("/ai/runs/{id}"), e).await,
    }
}

#[cfg(test)]
mod tests;
