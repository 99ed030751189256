//! Connecting an agent to an OpenAI-compatible provider (issue 26 item 3): provider presets
//! (those inside the operator's allow-list), the provider's model list (`GET {root}/models`)
//! and "test connection" (one small streamed chat completion). Every request goes through the
//! one outbound client ([`crate::platform::http`]: no redirects, bounded time and size), with
//! a key typed for the check or the team's sealed key (only for the endpoint it was stored
//! with). Failures get stable codes — `llm_unauthorized`, `llm_unavailable`, `llm_timeout`,
//! `llm_bad_response`, `llm_stream_error` — and messages without the key.
//!
//! `POST /api/page-ai/agents/{agentId}/models`, `POST /api/page-ai/agents/{agentId}/test`
//! (admins); the settings page calls the same functions from its plain forms.

use std::time::{Duration, Instant};

use axum::{
    Json,
    extract::{Path, State},
};
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::{
    AgentId, Provider,
    config::{self, check_model},
    openai::{upstream, wire::Chunk},
};
use crate::{
    auth::Auth,
    error::{ApiJson, AppError, AppResult},
    platform::{
        SecretString,
        http::{self, HttpError, HttpErrorKind},
    },
    state::AppState,
    web::Lang,
};

/// A provider an admin can pick: its name and the API root its preset fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub id: &'static str,
    pub name: &'static str,
    pub url: &'static str,
}

/// The presets, in the order the page lists them (each URL is in
/// [`crate::config::DEFAULT_AGENT_ALLOWED_URLS`]).
pub const PRESETS: &[Preset] = &[
    Preset { id: "openai", name: "OpenAI", url: "https://api.openai.com/v1" },
    Preset { id: "deepseek", name: "DeepSeek", url: "https://api.deepseek.com" },
    Preset { id: "mistral", name: "Mistral AI", url: "https://api.mistral.ai/v1" },
    Preset { id: "groq", name: "Groq", url: "https://api.groq.com/openai/v1" },
    Preset { id: "openrouter", name: "OpenRouter", url: "https://openrouter.ai/api/v1" },
    Preset { id: "together", name: "Together AI", url: "https://api.together.xyz/v1" },
    Preset { id: "fireworks", name: "Fireworks AI", url: "https://api.fireworks.ai/inference/v1" },
    Preset { id: "xai", name: "xAI (Grok)", url: "https://api.x.ai/v1" },
    Preset { id: "gemini", name: "Google Gemini", url: "https://generativelanguage.googleapis.com/v1beta/openai" },
    Preset {
        id: "dashscope",
        name: "Alibaba Cloud Qwen (DashScope, China)",
        url: "https://dashscope.aliyuncs.com/compatible-mode/v1",
    },
    Preset {
        id: "dashscope_intl",
        name: "Alibaba Cloud Qwen (DashScope, international)",
        url: "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
    },
    Preset { id: "moonshot", name: "Moonshot AI Kimi (China)", url: "https://api.moonshot.cn/v1" },
    Preset { id: "moonshot_intl", name: "Moonshot AI Kimi (international)", url: "https://api.moonshot.ai/v1" },
    Preset { id: "zhipu", name: "Zhipu AI GLM (BigModel)", url: "https://open.bigmodel.cn/api/paas/v4" },
    Preset { id: "siliconflow", name: "SiliconFlow", url: "https://api.siliconflow.cn/v1" },
];

/// The presets this server's allow-list lets an admin use.
pub fn presets(cfg: &crate::config::Config) -> Vec<Preset> {
    PRESETS.iter().copied().filter(|p| http::allow_listed(&cfg.agents.allowed_urls, p.url).is_ok()).collect()
}

pub fn preset(id: &str) -> Option<Preset> {
    PRESETS.iter().copied().find(|p| p.id == id)
}

/// The preset whose URL `url` is (after normalisation), if any.
pub fn preset_of_url(url: &str) -> Option<Preset> {
    let norm = |u: &str| http::allow_listed(&[u.to_string()], u).ok();
    let url = norm(url)?;
    PRESETS.iter().copied().find(|p| norm(p.url).as_deref() == Some(url.as_str()))
}

/// How long listing the models may take, and how much of the list is read.
const MODELS_TIMEOUT: Duration = Duration::from_secs(20);
const MODELS_MAX_BYTES: usize = 2 << 20;
/// Models kept from a list (OpenRouter lists a few hundred).
const MAX_MODELS: usize = 1000;
/// The whole test (connect, answer, stream) may take this long.
const TEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The test stream is read until this much answer text, or its end.
const TEST_REPLY_CHARS: usize = 160;
/// The first words shown of the test's answer (whole words, at most this many characters).
const TEST_REPLY_WORDS_CHARS: usize = 100;
/// The test stream is dropped past this many bytes.
const TEST_MAX_BYTES: usize = 1 << 20;
/// Longest error body quoted from.
const ERROR_BODY: usize = 16 << 10;
/// The answer limit of the test request.
const TEST_MAX_TOKENS: u32 = 16;
const TEST_PROMPT: &str = "Reply with a short greeting of at most five words.";

pub const TIMEOUT: &str = "llm_timeout";

/// What a check talks to: a normalised endpoint inside the allow-list, a key, a model.
pub struct Target {
    pub endpoint: String,
    pub key: Option<SecretString>,
    pub model: Option<String>,
    /// Public addresses only ([`config::public_only`]).
    pub public_only: bool,
}

/// The target of a check of `agent`: the given values over the stored ones. The stored key
/// is used only with the endpoint it was stored for (a key never goes to another host).
pub async fn target(
    state: &AppState,
    auth: &Auth,
    agent: AgentId,
    lang: Lang,
    endpoint: Option<&str>,
    key: Option<&str>,
    model: Option<&str>,
) -> AppResult<Target> {
    auth.require_admin()?;
    if agent.configured_provider() != Provider::OpenAi {
        return Err(AppError::invalid("agentId", "this agent runs the operator's ACP command; it has no endpoint to check"));
    }
    let mut tx = auth.tx(state).await?;
    let row = config::load(&mut tx, agent).await?;
    tx.commit().await?;
    let stored = row.as_ref().and_then(|r| r.endpoint_url.clone());
    let given = endpoint.map(str::trim).filter(|s| !s.is_empty());
    let Some(raw) = given.map(String::from).or_else(|| stored.clone()) else {
        return Err(AppError::invalid("endpointUrl", lang.t("agents.connect.no_endpoint")));
    };
    let endpoint = config::check_endpoint_in(&state.config, &raw, lang).map_err(|m| AppError::invalid("endpointUrl", m))?;
    let key = match key.map(str::trim).filter(|k| !k.is_empty()) {
        Some(k) => Some(SecretString::new(k)),
        None => match &row {
            Some(r) if stored.as_deref() == Some(endpoint.as_str()) => match &r.api_key_cipher {
                Some(sealed) => Some(config::open_key(&state.config, auth.tenant_id, agent, sealed)?),
                None => None,
            },
            _ => None,
        },
    };
    let model = match model.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => Some(check_model(m).map_err(|e| AppError::invalid("model", e))?.to_string()),
        None => row.and_then(|r| r.model),
    };
    let public_only = config::public_only(&state.config, &endpoint);
    Ok(Target { endpoint, key, model, public_only })
}

fn failure(code: &'static str, message: String) -> AppError {
    AppError::Provider { code, message }
}

/// A request that failed before an answer, or an answer the client refused.
fn send_failure(shown: &str, e: &HttpError, key: Option<&SecretString>) -> AppError {
    match e.kind {
        HttpErrorKind::Timeout => {
            failure(TIMEOUT, upstream::clean(&format!("{shown} did not answer in time: {}", e.message), key))
        }
        HttpErrorKind::Unauthorized => failure(upstream::UNAUTHORIZED, format!("{shown} refused the credentials")),
        HttpErrorKind::BadResponse => {
            failure(upstream::BAD_RESPONSE, upstream::clean(&format!("{shown} answered {}", e.message), key))
        }
        HttpErrorKind::Unavailable => failure(upstream::UNAVAILABLE, upstream::transport_message(shown, e, key)),
    }
}

/// A non-success status, with the start of its body.
async fn status_failure(shown: &str, resp: reqwest::Response, key: Option<&SecretString>) -> AppError {
    let status = resp.status();
    let body = http::read_limited(resp, ERROR_BODY).await.unwrap_or_default();
    failure(upstream::code_of_status(status), upstream::status_message(shown, status, &body, key))
}

fn client(timeout: Duration, public_only: bool) -> AppResult<http::Client> {
    http::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(timeout)
        .public_only(public_only)
        .build()
        .map_err(|e| AppError::Upstream(format!("cannot build the HTTP client: {}", e.message)))
}

fn with_key(req: reqwest::RequestBuilder, key: Option<&SecretString>) -> reqwest::RequestBuilder {
    match key {
        Some(k) => req.bearer_auth(k.expose()),
        None => req,
    }
}

/// One model of a provider's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<String>,
}

/// `{"object": "list", "data": [{"id", "object": "model", "owned_by"}, ...]}`, read leniently.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ModelEntry {
    id: Option<String>,
    owned_by: Option<String>,
}

/// The models `t`'s endpoint lists (sorted, each a usable model name).
pub async fn list_models(t: &Target) -> AppResult<Vec<ModelInfo>> {
    let url = upstream::models_url(&t.endpoint).map_err(|m| failure(upstream::BAD_RESPONSE, m))?;
    let shown = http::display_url(&url);
    let key = t.key.as_ref();
    let c = client(MODELS_TIMEOUT, t.public_only)?;
    let req = with_key(c.get(url).header(reqwest::header::ACCEPT, "application/json"), key);
    let resp = c.send(req).await.map_err(|e| send_failure(&shown, &e, key))?;
    if !resp.status().is_success() {
        return Err(status_failure(&shown, resp, key).await);
    }
    let body = http::read_limited(resp, MODELS_MAX_BYTES).await.map_err(|e| send_failure(&shown, &e, key))?;
    let list: ModelList = serde_json::from_slice(&body).map_err(|_| {
        failure(upstream::BAD_RESPONSE, format!("{shown} answered something that is not a model list ({{\"data\": [...]}})"))
    })?;
    let mut out: Vec<ModelInfo> = list
        .data
        .into_iter()
        .filter_map(|m| {
            let id = check_model(m.id.as_deref()?).ok()?.to_string();
            Some(ModelInfo { id, owned_by: m.owned_by.filter(|o| !o.trim().is_empty() && o.len() <= 200) })
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    out.truncate(MAX_MODELS);
    Ok(out)
}

/// A successful test.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestResult {
    pub ok: bool,
    pub endpoint_url: String,
    pub model: String,
    /// The start of the model's answer (empty when it only "thought" within the small limit).
    pub reply: String,
    /// Until the first streamed text (or reasoning), in milliseconds.
    pub first_token_ms: u64,
    /// Until the stream ended (or enough text came), in milliseconds.
    pub latency_ms: u64,
    /// Chunks read.
    pub chunks: usize,
}

#[derive(Serialize)]
struct TestRequest<'a> {
    model: &'a str,
    messages: [TestMessage<'a>; 1],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Serialize)]
struct TestMessage<'a> {
    role: &'static str,
    content: &'a str,
}

/// Only the parts of a chunk the test reads besides [`Chunk`]: reasoning models stream
/// `reasoning_content` before any answer text.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReasoningChunk {
    choices: Vec<ReasoningChoice>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReasoningChoice {
    delta: Option<ReasoningDelta>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReasoningDelta {
    reasoning_content: Option<String>,
}

/// One small streamed chat completion with `t`'s model: `stream: true`, `max_tokens` 16 (a
/// model that wants `max_completion_tokens` instead gets one more request with it).
pub async fn test_connection(t: &Target, lang: Lang) -> AppResult<TestResult> {
    let Some(model) = t.model.as_deref() else {
        return Err(AppError::invalid("model", lang.t("agents.connect.no_model")));
    };
    let url = upstream::chat_url(&t.endpoint).map_err(|m| failure(upstream::BAD_RESPONSE, m))?;
    let shown = http::display_url(&url);
    let key = t.key.as_ref();
    let c = client(TEST_TIMEOUT, t.public_only)?;
    let started = Instant::now();
    let mut completion_tokens = false;
    let resp = loop {
        let body = TestRequest {
            model,
            messages: [TestMessage { role: "user", content: TEST_PROMPT }],
            stream: true,
            max_tokens: (!completion_tokens).then_some(TEST_MAX_TOKENS),
            max_completion_tokens: completion_tokens.then_some(TEST_MAX_TOKENS),
        };
        let req = with_key(c.post(url.clone()).header(reqwest::header::ACCEPT, "text/event-stream"), key).json(&body);
        let resp = c.send(req).await.map_err(|e| send_failure(&shown, &e, key))?;
        if resp.status().is_success() {
            break resp;
        }
        let status = resp.status();
        let body = http::read_limited(resp, ERROR_BODY).await.unwrap_or_default();
        if status == reqwest::StatusCode::BAD_REQUEST
            && !completion_tokens
            && String::from_utf8_lossy(&body).contains("max_completion_tokens")
        {
            completion_tokens = true;
            continue;
        }
        return Err(failure(upstream::code_of_status(status), upstream::status_message(&shown, status, &body, key)));
    };
    let kind = resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    if !kind.starts_with("text/event-stream") {
        return Err(failure(
            upstream::BAD_RESPONSE,
            format!(
                "{shown} did not stream its answer (Content-Type {}); MNote asks with stream: true and needs server-sent events",
                if kind.is_empty() { "missing".to_string() } else { upstream::clean(&kind, key) }
            ),
        ));
    }
    // At most TEST_MAX_BYTES of the stream are read (then it counts as ended).
    let bytes = resp.bytes_stream().scan(0usize, |read, part| {
        if let Ok(p) = &part {
            *read += p.len();
            if *read > TEST_MAX_BYTES {
                return futures_util::future::ready(None);
            }
        }
        futures_util::future::ready(Some(part))
    });
    let mut events = Box::pin(bytes.eventsource());
    let (mut text, mut chunks, mut first) = (String::new(), 0usize, None);
    while let Some(ev) = events.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(EventStreamError::Transport(e)) => return Err(send_failure(&shown, &HttpError::transport(e), key)),
            Err(e) => return Err(failure(upstream::BAD_RESPONSE, upstream::clean(&format!("{shown} streamed {e}"), key))),
        };
        let data = ev.data.trim();
        if data == "[DONE]" {
            break;
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|_| {
            failure(upstream::BAD_RESPONSE, upstream::clean(&format!("{shown} streamed a line that is not a chunk: {data}"), key))
        })?;
        if chunk.error.is_some() {
            return Err(failure(
                upstream::STREAM_ERROR,
                upstream::clean(&format!("{shown} failed mid-stream: {}", upstream::upstream_detail(data.as_bytes())), key),
            ));
        }
        chunks += 1;
        let thinking = serde_json::from_str::<ReasoningChunk>(data)
            .ok()
            .is_some_and(|r| r.choices.iter().any(|c| c.delta.as_ref().is_some_and(|d| d.reasoning_content.is_some())));
        let delta: String = chunk.choices.iter().filter_map(|c| c.delta.content.as_deref()).collect();
        if (!delta.is_empty() || thinking) && first.is_none() {
            first = Some(started.elapsed());
        }
        text.push_str(&delta);
        if text.chars().count() >= TEST_REPLY_CHARS {
            break;
        }
    }
    let latency = started.elapsed();
    if chunks == 0 {
        return Err(failure(upstream::BAD_RESPONSE, format!("{shown} streamed no answer at all")));
    }
    let reply = first_words(&text, TEST_REPLY_WORDS_CHARS);
    Ok(TestResult {
        ok: true,
        endpoint_url: t.endpoint.clone(),
        model: model.to_string(),
        reply: upstream::clean(&reply, key),
        first_token_ms: first.unwrap_or(latency).as_millis() as u64,
        latency_ms: latency.as_millis() as u64,
        chunks,
    })
}

/// The whole words of `text` that fit in `max` characters, with "…" when some were left out
/// (a single longer word is cut).
fn first_words(text: &str, max: usize) -> String {
    let mut out = String::new();
    let words: Vec<&str> = text.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let len = out.chars().count() + usize::from(!out.is_empty()) + w.chars().count();
        if len > max {
            if out.is_empty() {
                out = w.chars().take(max).collect();
            }
            out.push('…');
            return out;
        }
        if i > 0 {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

// ---- the API ----

/// `POST /api/page-ai/agents/{agentId}/models`, `POST /api/page-ai/agents/{agentId}/test`.
pub fn api_router() -> axum::Router<AppState> {
    use axum::routing::post;
    axum::Router::new()
        .route("/api/page-ai/agents/{agent}/models", post(models_handler))
        .route("/api/page-ai/agents/{agent}/test", post(test_handler))
}

/// The body of both routes: each part absent = the stored one.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckInput {
    #[serde(default)]
    pub endpoint_url: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelsResponse {
    pub endpoint_url: String,
    pub models: Vec<ModelInfo>,
}

fn agent_of(s: &str) -> AppResult<AgentId> {
    AgentId::parse(s).ok_or(AppError::NotFound)
}

async fn models_handler(
    State(state): State<AppState>,
    auth: Auth,
    Path(agent): Path<String>,
    ApiJson(input): ApiJson<CheckInput>,
) -> AppResult<Json<ModelsResponse>> {
    let agent = agent_of(&agent)?;
    let t = target(&state, &auth, agent, Lang::En, input.endpoint_url.as_deref(), input.api_key.as_deref(), None).await?;
    let models = list_models(&t).await?;
    Ok(Json(ModelsResponse { endpoint_url: t.endpoint, models }))
}

async fn test_handler(
    State(state): State<AppState>,
    auth: Auth,
    Path(agent): Path<String>,
    ApiJson(input): ApiJson<CheckInput>,
) -> AppResult<Json<TestResult>> {
    let agent = agent_of(&agent)?;
    let t =
        target(&state, &auth, agent, Lang::En, input.endpoint_url.as_deref(), input.api_key.as_deref(), input.model.as_deref())
            .await?;
    Ok(Json(test_connection(&t, Lang::En).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only endpoints allowed by the default public providers alone are public-only; one the
    /// operator listed (even beside the defaults) is not.
    #[test]
    fn endpoints_of_the_default_list_alone_connect_to_public_addresses_only() {
        let mut cfg = crate::config::Config::for_tests("postgres://x".into(), "/tmp".into(), vec![]);
        cfg.agents.allowed_urls = crate::config::agent_allowed_urls(None);
        assert!(config::public_only(&cfg, "https://api.openai.com/v1"));
        assert!(config::public_only(&cfg, "https://api.deepseek.com/v1"));
        cfg.agents.allowed_urls =
            crate::config::agent_allowed_urls(Some("https://api.openai.com/v1,http://10.0.0.5:8000/v1,https://llm.corp.example"));
        assert!(config::public_only(&cfg, "https://api.openai.com/v1"));
        assert!(!config::public_only(&cfg, "http://10.0.0.5:8000/v1"));
        assert!(!config::public_only(&cfg, "https://llm.corp.example/v1"));
        cfg.agents.allowed_urls = vec!["https://api.openai.com".into()];
        assert!(!config::public_only(&cfg, "https://api.openai.com/v1"), "the operator's own entry");
    }

    #[test]
    fn the_reply_is_cut_at_a_word() {
        assert_eq!(first_words("  Hello   there, friend ", 100), "Hello there, friend");
        assert_eq!(first_words("Hello there, friend", 12), "Hello there,…");
        assert_eq!(first_words("Supercalifragilistic", 5), "Super…");
        assert_eq!(first_words("", 5), "");
    }

    #[test]
    fn every_preset_is_in_the_default_allow_list_and_found_by_its_url() {
        let allowed = crate::config::agent_allowed_urls(None);
        for p in PRESETS {
            assert!(http::allow_listed(&allowed, p.url).is_ok(), "{}", p.url);
            assert_eq!(preset_of_url(&format!("{}/", p.url)), Some(*p));
        }
        assert_eq!(preset_of_url("https://api.openai.com/v1/x"), None);
        assert_eq!(preset("deepseek").map(|p| p.url), Some("https://api.deepseek.com"));
    }
}
