//! Folding a completion's chunks into one [`Turn`]: the text, the tool calls (pieces joined by
//! `index`: `id` and `name` once, `arguments` concatenated, parsed as JSON at the end), the
//! finish reason, usage and the completion id. Pure: the stream reader feeds it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::wire::{Chunk, ToolCallDelta, Usage};

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (sent back in the conversation as they were).
    pub raw_arguments: String,
    pub arguments: Arguments,
}

/// A call's arguments. Invalid JSON is not fatal: it goes to the tool box, whose error the
/// model sees and can correct.
#[derive(Debug, Clone, PartialEq)]
pub enum Arguments {
    Json(Value),
    Invalid(String),
}

impl Arguments {
    /// What [`crate::agents::tools::ToolBox::call`] gets: the object, or the text that did
    /// not parse (which the tool box rejects as invalid arguments).
    pub fn into_value(self) -> Value {
        match self {
            Arguments::Json(v) => v,
            Arguments::Invalid(s) => Value::String(s),
        }
    }
}

/// One response of the model, complete.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// The completion id (`chatcmpl-…`), the run's `providerRunId`.
    pub id: Option<String>,
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// What a chunk added.
#[derive(Debug, Default, PartialEq)]
pub struct Step {
    /// Answer text to stream now.
    pub text: String,
    /// The server reported an error in the stream (its message).
    pub error: Option<String>,
}

#[derive(Debug, Default)]
pub struct Accumulator {
    id: Option<String>,
    text: String,
    calls: BTreeMap<usize, PartialCall>,
    /// The index the last index-less delta went to.
    last_index: Option<usize>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl Accumulator {
    /// Fold `chunk` in. Only the first choice counts (we never ask for `n > 1`).
    pub fn push(&mut self, chunk: Chunk) -> Step {
        let mut step = Step::default();
        if let Some(id) = chunk.id.filter(|i| !i.is_empty()) {
            self.id.get_or_insert(id);
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        if let Some(e) = chunk.error {
            step.error = Some(e.describe());
            return step;
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(t) = choice.delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&t);
                step.text.push_str(&t);
            }
            for d in choice.delta.tool_calls {
                self.push_call(d);
            }
            if let Some(r) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(r);
            }
        }
        step
    }

    fn push_call(&mut self, d: ToolCallDelta) {
        // Without an index (some servers send each call whole): a new id starts a new call,
        // anything else continues the last one.
        let index = d.index.unwrap_or_else(|| {
            let last = self.last_index.and_then(|i| self.calls.get(&i).map(|c| (i, c)));
            match (last, d.id.as_deref()) {
                (Some((i, c)), Some(id)) if c.id.as_deref() == Some(id) => i,
                (Some((i, _)), None) => i,
                _ => self.calls.keys().next_back().map_or(0, |k| k + 1),
            }
        });
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = d.id.filter(|i| !i.is_empty()) {
            call.id.get_or_insert(id);
        }
        if let Some(name) = d.function.name.filter(|n| !n.is_empty()) {
            call.name.get_or_insert(name);
        }
        if let Some(a) = d.function.arguments {
            call.arguments.push_str(&a);
        }
    }

    /// Whether the server said the completion ended (`finish_reason`).
    pub fn finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// The turn, with every call's arguments parsed (empty arguments are `{}`).
    pub fn finish(self) -> Turn {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, c)| {
                let raw = c.arguments.trim().to_string();
                let arguments = if raw.is_empty() {
                    Arguments::Json(Value::Object(Default::default()))
                } else {
                    match serde_json::from_str::<Value>(&raw) {
                        Ok(v) => Arguments::Json(v),
                        Err(_) => Arguments::Invalid(raw.clone()),
                    }
                };
                ToolCall {
                    id: c.id.unwrap_or_else(|| format!("call_{index}")),
                    name: c.name.unwrap_or_default(),
                    raw_arguments: if raw.is_empty() { "{}".to_string() } else { raw },
                    arguments,
                }
            })
            .collect();
        Turn { id: self.id, text: self.text, tool_calls, finish_reason: self.finish_reason, usage: self.usage }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn chunk(v: Value) -> Chunk {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn tool_call_arguments_split_over_chunks_are_joined_by_index() {
        let mut acc = Accumulator::default();
        let steps = [
            json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me look."}}]}),
            json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_a", "type": "function", "function": {"name": "mnote_evidence_search", "arguments": "{\"qu"}}]}}]}),
            json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 1, "id": "call_b", "function": {"name": "mnote_evidence_read", "arguments": ""}}]}}]}),
            json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": "ery\": \"robots"}}]}}]}),
            json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": " charging\"}"}}, {"index": 1, "function": {"arguments": "{oops"}}]}}]}),
            json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}),
        ];
        let mut streamed = String::new();
        for s in steps {
            let step = acc.push(chunk(s));
            assert!(step.error.is_none());
            streamed.push_str(&step.text);
        }
        assert!(acc.finished());
        let turn = acc.finish();
        assert_eq!(streamed, "Let me look.");
        assert_eq!(turn.text, "Let me look.");
        assert_eq!(turn.id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(turn.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(turn.usage.and_then(|u| u.total_tokens), Some(7));
        assert_eq!(turn.tool_calls.len(), 2);
        let a = &turn.tool_calls[0];
        assert_eq!((a.id.as_str(), a.name.as_str()), ("call_a", "mnote_evidence_search"));
        assert_eq!(a.arguments, Arguments::Json(json!({"query": "robots charging"})));
        assert_eq!(a.raw_arguments, "{\"query\": \"robots charging\"}");
        let b = &turn.tool_calls[1];
        assert_eq!(b.arguments, Arguments::Invalid("{oops".into()));
        assert_eq!(b.clone().arguments.into_value(), json!("{oops"));
    }

    #[test]
    fn calls_without_index_or_id_still_come_out_whole() {
        let mut acc = Accumulator::default();
        acc.push(chunk(
            json!({"choices": [{"delta": {"tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{\"a\":"}}]}}]}),
        ));
        acc.push(chunk(json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "1}"}}]}}]})));
        acc.push(chunk(json!({"choices": [{"delta": {"tool_calls": [{"id": "y", "function": {"name": "g"}}]}}]})));
        // A second choice (n > 1) is ignored.
        acc.push(chunk(json!({"choices": [{"index": 1, "delta": {"content": "other"}}]})));
        let turn = acc.finish();
        assert_eq!(turn.text, "");
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[0].arguments, Arguments::Json(json!({"a": 1})));
        assert_eq!(turn.tool_calls[1].name, "g");
        assert_eq!(turn.tool_calls[1].arguments, Arguments::Json(json!({})));
        assert_eq!(turn.tool_calls[1].raw_arguments, "{}");
    }

    #[test]
    fn a_missing_call_id_is_made_up_and_an_error_chunk_is_reported() {
        let mut acc = Accumulator::default();
        acc.push(chunk(
            json!({"choices": [{"delta": {"tool_calls": [{"index": 2, "function": {"name": "f", "arguments": "{}"}}]}}]}),
        ));
        let step = acc.push(chunk(json!({"error": {"message": "overloaded", "type": "server_error"}})));
        assert_eq!(step.error.as_deref(), Some("overloaded (server_error)"));
        assert!(!acc.finished());
        assert_eq!(acc.finish().tool_calls[0].id, "call_2");
    }

    #[test]
    fn a_non_streamed_completion_reads_like_one_chunk() {
        let full: super::super::wire::Completion = serde_json::from_value(json!({
            "id": "chatcmpl-9", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"q\":\"x\"}"}}]}}]
        }))
        .unwrap();
        let mut acc = Accumulator::default();
        acc.push(full.into_chunk());
        let turn = acc.finish();
        assert_eq!(turn.id.as_deref(), Some("chatcmpl-9"));
        assert_eq!(turn.tool_calls[0].arguments, Arguments::Json(json!({"q": "x"})));
    }
}
