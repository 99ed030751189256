//! The `openai` runtime: an OpenAI-compatible `/v1/chat/completions` endpoint, streamed, with
//! the MNote tools as functions (`hermes`) or without them (`chat_only`).
//!
//! A run is a short conversation: the system prompt, the earlier turns, the question; then up
//! to `max_tool_rounds` rounds in which the model may call our tools (each call goes through
//! the run's [`ToolBox`](super::tools::ToolBox), which journals it and checks the actor's
//! rights), and a last request without tools when the rounds are used up. Text streams into
//! the journal as it arrives; the final answer's `[evidence:<id>]` markers become
//! `citationMarkdown` links.
//!
//! - `wire`: the request and (lenient) response types;
//! - `accumulate`: chunks → one response (text, tool calls joined by index);
//! - `stream`: one request, its SSE stream, cancellation and the idle timeout;
//! - `upstream`: the endpoint URL, error codes, safe messages.

mod accumulate;
mod marker;
mod stream;
pub(crate) mod upstream;
pub(crate) mod wire;

use std::time::Duration;

use futures_util::future::BoxFuture;

use self::{
    accumulate::ToolCall,
    stream::{Endpoint, Streamed},
    wire::{ChatRequest, FunctionCallOut, FunctionSpec, Message, ToolCallOut, ToolSpec},
};
use super::{
    AgentError, AgentRuntime, Provider, RunEnv, RunInput, RunOutput, TurnRole,
    verdict::{self, Claim, ModelSaid, NOT_FOUND_MARKER, PARTIAL_MARKER},
};
use crate::platform::{SecretString, http};

/// How long connecting to the endpoint may take (the stream itself has no overall limit: only
/// the idle timeout between chunks, and the executor's run timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Tool calls one response may make; further ones are answered with an error, unrun.
const MAX_CALLS_PER_ROUND: usize = 8;

/// How to reach the model.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// Base URL as configured (`http://host:port/v1` or without `/v1`).
    pub endpoint: String,
    pub model: String,
    pub api_key: Option<SecretString>,
    /// Offer the MNote tools (`hermes`) or not (`chat_only`).
    pub with_tools: bool,
    /// No chunk for this long fails the run (`agent_timeout`).
    pub idle_timeout: Duration,
    pub max_tool_rounds: usize,
    /// The longest line the model may stream (`MNOTE_AGENT_MAX_LINE_BYTES`).
    pub max_line_bytes: usize,
    /// Connect to public addresses only (an endpoint allowed only by the default list of
    /// public providers, see `agents::config::public_only`).
    pub public_only: bool,
}

pub struct OpenAiRuntime {
    settings: OpenAiSettings,
}

impl OpenAiRuntime {
    pub fn new(settings: OpenAiSettings) -> Self {
        OpenAiRuntime { settings }
    }
}

impl AgentRuntime for OpenAiRuntime {
    fn provider(&self) -> Provider {
        Provider::OpenAi
    }

    fn run<'a>(&'a self, input: &'a RunInput, env: &'a RunEnv) -> BoxFuture<'a, Result<RunOutput, AgentError>> {
        Box::pin(self.converse(input, env))
    }
}

const SYSTEM_WITH_TOOLS: &str = "You are the research assistant of MNote. You answer the user's questions from their MNote \
knowledge bases, which you reach only through the tools you are given (they already search the knowledge bases the user \
chose). Search before you answer, and base every statement on what the tools returned. Cite every claim: write \
[evidence:<evidenceId>] right after the sentence it supports, with the evidenceId exactly as a tool result gave it (one \
marker per piece of evidence). Never invent, shorten or alter an evidence id, and never cite evidence the tools did not \
return. Answer in the language of the question, in Markdown.";

/// The verdict instruction: how the model says the evidence does not (fully) answer.
fn verdict_instruction() -> String {
    format!(
        "If the evidence the tools returned does not answer the question (it is about something else, or lacks what is \
         asked for), do not guess: start your answer with {NOT_FOUND_MARKER} on its own line, then say plainly that the \
         knowledge bases do not answer it. If it answers only part of the question, start with {PARTIAL_MARKER} on its \
         own line and say which part is missing. Otherwise start directly with the answer."
    )
}

const SYSTEM_CHAT_ONLY: &str = "You are a helpful assistant in MNote. In this conversation you have no access to the \
user's documents or knowledge bases: do not claim to have read them and do not write citations. Answer in the language \
of the question, in Markdown.";

const RESUME_NOTE: &str = "Your previous answer in this conversation was cut off. Continue it from where it stopped, \
without repeating what you already wrote.";

const LAST_ROUND: &str = "You have made all the tool calls you may make for this question. Answer now from the evidence \
you already have, citing it as instructed; if it does not answer the question, start with the marker as instructed.";

/// The conversation a run starts with: instructions, earlier turns, the question.
/// The function-calling mapping of registry tools: what the model is offered (`tools` of the
/// request). The self-test compares it with the registry.
pub fn tool_specs<'a>(offered: &[&'a super::tools::ToolDef]) -> Vec<ToolSpec<'a>> {
    offered
        .iter()
        .map(|d| ToolSpec {
            kind: "function",
            function: FunctionSpec { name: &d.function_name, description: d.description, parameters: &d.parameters },
        })
        .collect()
}

fn initial_messages(input: &RunInput, with_tools: bool) -> Vec<Message> {
    let mut system =
        if with_tools { format!("{SYSTEM_WITH_TOOLS} {}", verdict_instruction()) } else { SYSTEM_CHAT_ONLY.to_string() };
    if input.transcript.last().is_some_and(|t| t.role == TurnRole::Assistant) {
        system.push_str("\n\n");
        system.push_str(RESUME_NOTE);
    }
    let mut messages = vec![Message::System { content: system }];
    // The conversation's earlier turns, then (a resume) the run's own earlier attempt.
    for turn in input.history.iter().chain(&input.transcript) {
        messages.push(match turn.role {
            TurnRole::User => Message::User { content: turn.text.clone() },
            TurnRole::Assistant => Message::Assistant { content: Some(turn.text.clone()), tool_calls: Vec::new() },
        });
    }
    messages.push(Message::User { content: input.prompt.clone() });
    messages
}

/// The assistant turn that asked for `calls`, as the conversation must repeat it.
fn assistant_turn(text: &str, calls: &[ToolCall]) -> Message {
    Message::Assistant {
        content: (!text.is_empty()).then(|| text.to_string()),
        tool_calls: calls
            .iter()
            .map(|c| ToolCallOut {
                id: c.id.clone(),
                kind: "function",
                function: FunctionCallOut { name: c.name.clone(), arguments: c.raw_arguments.clone() },
            })
            .collect(),
    }
}

impl OpenAiRuntime {
    async fn converse(&self, input: &RunInput, env: &RunEnv) -> Result<RunOutput, AgentError> {
        let s = &self.settings;
        let key = s.api_key.as_ref().filter(|k| !k.expose().is_empty());
        let url = upstream::chat_url(&s.endpoint).map_err(|m| AgentError::upstream(upstream::UNAVAILABLE, m))?;
        let shown = http::display_url(&url);
        let client =
            http::Client::builder().connect_timeout(CONNECT_TIMEOUT).public_only(s.public_only).build().map_err(|e| {
                AgentError::upstream(upstream::UNAVAILABLE, format!("cannot build the HTTP client: {}", e.message))
            })?;
        let ep = Endpoint { client: &client, url: &url, shown: &shown, key, idle: s.idle_timeout, max_line: s.max_line_bytes };
        let tools: Vec<ToolSpec> = if s.with_tools { tool_specs(env.tools.offered()) } else { Vec::new() };

        // No tool offered (chat_only, or every capability switched off): the chat-only prompt.
        let mut messages = initial_messages(input, !tools.is_empty());
        let mut out = Streamed::new(&env.events);
        let mut provider_run_id = None;
        let mut rounds = 0;
        let answered = loop {
            let offer = !tools.is_empty() && rounds < s.max_tool_rounds;
            if !tools.is_empty() && !offer {
                messages.push(Message::User { content: LAST_ROUND.to_string() });
            }
            let body = ChatRequest::new(&s.model, &messages, if offer { &tools } else { &[] });
            let turn = stream::complete(&ep, &body, &env.cancel, &mut out).await?;
            if let Some(u) = turn.usage {
                tracing::debug!(prompt = ?u.prompt_tokens, completion = ?u.completion_tokens, "model usage");
            }
            provider_run_id = turn.id.clone().or(provider_run_id);
            // Calls in a response that was offered no tools are not run (some models imitate
            // the calls of the history): its text is the answer. The last response must say
            // something: text of earlier rounds alone ("Let me search…") is no answer.
            if !offer || turn.tool_calls.is_empty() {
                break !turn.text.trim().is_empty();
            }
            rounds += 1;
            messages.push(assistant_turn(&turn.text, &turn.tool_calls));
            for (i, call) in turn.tool_calls.into_iter().enumerate() {
                let content = if i < MAX_CALLS_PER_ROUND {
                    let result = tokio::select! {
                        biased;
                        _ = env.cancel.cancelled() => return Err(AgentError::Cancelled),
                        r = env.tools.call(&call.id, &call.name, call.arguments.into_value()) => r,
                    };
                    serde_json::to_string(&result.content)
                        .unwrap_or_else(|_| r#"{"error":{"code":"internal","message":"the result could not be encoded"}}"#.into())
                } else {
                    format!(
                        r#"{{"error":{{"code":"too_many_calls","message":"at most {MAX_CALLS_PER_ROUND} tool calls per turn; this one was not run"}}}}"#
                    )
                };
                messages.push(Message::Tool { tool_call_id: call.id, content });
            }
            out.next_round().await.map_err(AgentError::Journal)?;
        };
        out.end_response().await.map_err(AgentError::Journal)?;
        if !answered {
            return Err(AgentError::upstream(upstream::BAD_RESPONSE, format!("{shown} returned an empty answer")));
        }
        // The model's verdict marker: at the start of a response (never streamed), or at the
        // start of a later line of its text (left out of the answer).
        let (text, later) = verdict::model_marker(out.text());
        let said = [out.said(), later]
            .into_iter()
            .min_by_key(|s| match s {
                ModelSaid::NotFound => 0,
                ModelSaid::Partial => 1,
                ModelSaid::Answer => 2,
            })
            .unwrap_or(ModelSaid::Answer);
        let answer = env.tools.link_citations(&text).await;
        Ok(RunOutput { answer, provider_run_id, claim: Claim::Model(said) })
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::{agents::Turn as Said, journal::ContextRefs};

    fn input(transcript: Vec<Said>) -> RunInput {
        RunInput {
            host_run_id: Uuid::nil(),
            agent: crate::agents::AgentId::Hermes,
            prompt: "Where do the robots charge?".into(),
            context: ContextRefs::default(),
            transcript,
            history: Vec::new(),
            preferences: Default::default(),
        }
    }

    #[test]
    fn the_conversation_starts_with_instructions_earlier_turns_and_the_question() {
        let m = initial_messages(&input(Vec::new()), true);
        assert_eq!(m.len(), 2);
        let Message::System { content } = &m[0] else { panic!("{m:?}") };
        assert!(content.contains("[evidence:<evidenceId>]") && content.contains("Never invent"), "{content}");
        assert!(content.contains("start your answer with [not-found] on its own line"), "{content}");
        assert_eq!(m[1], Message::User { content: "Where do the robots charge?".into() });

        let m = initial_messages(&input(Vec::new()), false);
        let Message::System { content } = &m[0] else { panic!("{m:?}") };
        assert!(!content.contains("[evidence:"), "{content}");

        let resumed = input(vec![
            Said { role: TurnRole::User, text: "Where do the robots charge?".into() },
            Said { role: TurnRole::Assistant, text: "In the north".into() },
        ]);
        let m = initial_messages(&resumed, true);
        assert_eq!(m.len(), 4);
        let Message::System { content } = &m[0] else { panic!("{m:?}") };
        assert!(content.ends_with(RESUME_NOTE));
        assert_eq!(m[2], Message::Assistant { content: Some("In the north".into()), tool_calls: Vec::new() });

        // A follow-up: the conversation's earlier turns come as earlier messages, and nothing
        // says an answer was cut off.
        let mut follow_up = input(Vec::new());
        follow_up.history = vec![
            Said { role: TurnRole::User, text: "Where are the robots built?".into() },
            Said { role: TurnRole::Assistant, text: "In Lyon".into() },
        ];
        assert_eq!(follow_up.previous_question(), Some("Where are the robots built?"));
        let m = initial_messages(&follow_up, true);
        assert_eq!(m.len(), 4);
        let Message::System { content } = &m[0] else { panic!("{m:?}") };
        assert!(!content.contains(RESUME_NOTE), "{content}");
        assert_eq!(m[1], Message::User { content: "Where are the robots built?".into() });
        assert_eq!(m[2], Message::Assistant { content: Some("In Lyon".into()), tool_calls: Vec::new() });
        assert_eq!(m[3], Message::User { content: "Where do the robots charge?".into() });
    }

    #[test]
    fn a_tool_turn_repeats_the_calls_as_the_model_wrote_them() {
        let call = ToolCall {
            id: "c1".into(),
            name: "mnote_evidence_search".into(),
            raw_arguments: "{\"query\":\"x\"}".into(),
            arguments: accumulate::Arguments::Json(serde_json::json!({"query": "x"})),
        };
        let Message::Assistant { content, tool_calls } = assistant_turn("", &[call]) else { panic!() };
        assert_eq!(content, None);
        assert_eq!(tool_calls[0].function.arguments, "{\"query\":\"x\"}");
        assert_eq!(tool_calls[0].kind, "function");
    }
}
