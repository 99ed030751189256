//! The wire types of `POST /v1/chat/completions`. What we send is typed exactly; what we read
//! is lenient (every field defaulted, `null` read as absent, unknown fields ignored), because
//! "OpenAI-compatible" servers differ: empty `finish_reason`s, `"tool_calls": null`, extra
//! fields, a missing tool-call `index`, `{"error": "text"}` instead of an object.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The request body (always streamed).
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    pub stream: bool,
    pub stream_options: StreamOptions,
    /// Left out when empty: several servers reject `"tools": []`.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tools: &'a [ToolSpec<'a>],
    /// `"auto"` whenever `tools` are sent (see [`ChatRequest::new`]): some servers
    /// (llama-cpp-python's) ignore the tools without it; left out with no tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
}

impl<'a> ChatRequest<'a> {
    /// A streamed request (usage asked for) offering `tools`, with `tool_choice: "auto"` when
    /// there are any.
    pub fn new(model: &'a str, messages: &'a [Message], tools: &'a [ToolSpec<'a>]) -> Self {
        ChatRequest {
            model,
            messages,
            stream: true,
            stream_options: StreamOptions { include_usage: true },
            tools,
            tool_choice: (!tools.is_empty()).then_some("auto"),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct StreamOptions {
    /// Ask for a last chunk with `usage` (and empty `choices`).
    pub include_usage: bool,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        /// `null` when the turn was only tool calls.
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallOut>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A tool call of an earlier assistant turn, as the model sent it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallOut {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCallOut,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCallOut {
    pub name: String,
    /// The arguments exactly as the model wrote them (a JSON text).
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Serialize)]
pub struct ToolSpec<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionSpec<'a>,
}

#[derive(Debug, Serialize)]
pub struct FunctionSpec<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// JSON Schema of the arguments (the registry's, passed through).
    pub parameters: &'a Value,
}

/// One streamed chunk (`data: {...}`), or a whole non-streamed completion read the same way
/// (see [`Completion::into_chunk`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Chunk {
    pub id: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub choices: Vec<Choice>,
    pub usage: Option<Usage>,
    /// What a server sends in place of chunks when generation fails mid-stream.
    pub error: Option<StreamError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Choice {
    pub index: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub delta: Delta,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Delta {
    pub content: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A piece of a tool call: `id` and `name` come once, `arguments` in pieces, all under `index`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ToolCallDelta {
    pub index: Option<usize>,
    pub id: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub function: FunctionDelta,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct FunctionDelta {
    pub name: Option<String>,
    pub arguments: Option<String>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

/// `{"error": {"message", "type"}}` or `{"error": "message"}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum StreamError {
    Text(String),
    Object {
        #[serde(default)]
        message: Option<String>,
        #[serde(default, rename = "type")]
        kind: Option<String>,
    },
}

impl StreamError {
    /// One line: the message and its type.
    pub fn describe(&self) -> String {
        match self {
            StreamError::Text(t) => t.clone(),
            StreamError::Object { message, kind } => match (message.as_deref(), kind.as_deref()) {
                (Some(m), Some(k)) => format!("{m} ({k})"),
                (Some(m), None) => m.to_string(),
                (None, Some(k)) => k.to_string(),
                (None, None) => "no details".to_string(),
            },
        }
    }
}

/// A non-streamed completion (`application/json`), from a server that ignored `stream: true`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Completion {
    pub id: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub choices: Vec<FullChoice>,
    pub usage: Option<Usage>,
    pub error: Option<StreamError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct FullChoice {
    pub index: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub message: FullMessage,
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct FullMessage {
    pub content: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub tool_calls: Vec<ToolCallDelta>,
}

impl Completion {
    /// The same content as one chunk, so one accumulator reads both shapes. Tool calls without
    /// an `index` get their position.
    pub fn into_chunk(self) -> Chunk {
        let choices = self
            .choices
            .into_iter()
            .map(|c| {
                let tool_calls = c
                    .message
                    .tool_calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| ToolCallDelta { index: t.index.or(Some(i)), ..t })
                    .collect();
                Choice { index: c.index, delta: Delta { content: c.message.content, tool_calls }, finish_reason: c.finish_reason }
            })
            .collect();
        Chunk { id: self.id, choices, usage: self.usage, error: self.error }
    }
}

/// `null` (or absent) as the type's default.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_serialize_as_the_api_expects() {
        let messages = vec![
            Message::System { content: "s".into() },
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCallOut {
                    id: "c1".into(),
                    kind: "function",
                    function: FunctionCallOut { name: "f".into(), arguments: "{}".into() },
                }],
            },
            Message::Tool { tool_call_id: "c1".into(), content: "{\"results\":[]}".into() },
        ];
        let params = json!({"type": "object"});
        let tools = [ToolSpec { kind: "function", function: FunctionSpec { name: "f", description: "d", parameters: &params } }];
        let body = ChatRequest::new("m", &messages, &tools);
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!((&v["stream"], &v["stream_options"]), (&json!(true), &json!({"include_usage": true})));
        assert_eq!(v["tool_choice"], "auto", "tools offered: tool_choice auto");
        assert_eq!(v["messages"][0], json!({"role": "system", "content": "s"}));
        assert_eq!(
            v["messages"][1],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        );
        assert_eq!(v["messages"][2], json!({"role": "tool", "tool_call_id": "c1", "content": "{\"results\":[]}"}));
        assert_eq!(v["tools"][0]["function"]["parameters"], params);
        let no_tools = serde_json::to_value(ChatRequest::new("m", &messages, &[])).unwrap();
        assert!(no_tools.get("tools").is_none() && no_tools.get("tool_choice").is_none(), "{no_tools}");
    }

    #[test]
    fn chunks_are_read_leniently() {
        let c: Chunk = serde_json::from_str(
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":null,"tool_calls":null,"reasoning_content":"…"},
                "finish_reason":"","logprobs":null}],"service_tier":"default","usage":null}"#,
        )
        .unwrap();
        assert_eq!(c.choices.len(), 1);
        assert!(c.choices[0].delta.tool_calls.is_empty() && c.choices[0].delta.content.is_none());
        let c: Chunk = serde_json::from_str(r#"{"choices":null,"usage":{"total_tokens":7}}"#).unwrap();
        assert_eq!(c.usage.unwrap().total_tokens, Some(7));
        let c: Chunk = serde_json::from_str(r#"{"error":"overloaded"}"#).unwrap();
        assert_eq!(c.error.unwrap().describe(), "overloaded");
        let c: Chunk = serde_json::from_str(r#"{"error":{"message":"boom","type":"server_error","code":500}}"#).unwrap();
        assert_eq!(c.error.unwrap().describe(), "boom (server_error)");
    }
}
