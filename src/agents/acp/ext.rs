//! The `_mnote` ACP extension (see the module doc of [`super`]): how our tools are offered in
//! `session/new` and the typed `_mnote/tools/call` request an agent calls them with.

use agent_client_protocol::{JsonRpcRequest, JsonRpcResponse, v1::schema::Meta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agents::tools::ToolDef;

/// The method of the agent → client request that calls one of our tools.
pub const TOOLS_CALL: &str = "_mnote/tools/call";

/// `_mnote/tools/call` params: a tool name (dotted, as offered, or its function name) and
/// its arguments.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_mnote/tools/call", response = ToolsCallResponse)]
pub struct ToolsCallRequest {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// `_mnote/tools/call` result: whether the call succeeded and what the tool returned (on
/// failure `{"error": {code, message}}`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
pub struct ToolsCallResponse {
    pub ok: bool,
    pub content: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OfferedTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Offer<'a> {
    call_method: &'static str,
    tools: Vec<OfferedTool<'a>>,
}

/// `_meta` of `session/new`: `{"mnote": {"callMethod": "_mnote/tools/call", "tools": [{name,
/// description, inputSchema}]}}`.
pub fn session_meta(tools: &[&ToolDef]) -> Meta {
    let offer = Offer {
        call_method: TOOLS_CALL,
        tools: tools
            .iter()
            .map(|t| OfferedTool { name: t.name, description: t.description, input_schema: &t.parameters })
            .collect(),
    };
    let mut meta = Meta::new();
    // Serializing strings and already-valid JSON values cannot fail.
    meta.insert("mnote".into(), serde_json::to_value(offer).unwrap_or(Value::Null));
    meta
}

/// `meta` with the run's frozen preferences under `mnote.preferences` (`{key: value}`: the
/// user's `ai.common.*` and `ai.agent.reasonix.*` values, never secrets), when there are any.
pub fn with_preferences(mut meta: Meta, preferences: &std::collections::BTreeMap<String, crate::ai::PreferenceValue>) -> Meta {
    if !preferences.is_empty()
        && let Some(Value::Object(m)) = meta.get_mut("mnote")
    {
        m.insert("preferences".into(), serde_json::to_value(preferences).unwrap_or(Value::Null));
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offer_names_the_call_method_and_each_tool_with_its_schema() {
        let def = crate::agents::tools::lookup("mnote.evidence.search").unwrap();
        let meta = session_meta(&[def]);
        assert_eq!(
            Value::Object(meta),
            serde_json::json!({"mnote": {"callMethod": "_mnote/tools/call", "tools": [
                {"name": "mnote.evidence.search", "description": def.description, "inputSchema": def.parameters}
            ]}})
        );
    }

    #[test]
    fn a_call_without_arguments_gets_an_empty_object() {
        let r: ToolsCallRequest = serde_json::from_value(serde_json::json!({"name": "mnote.evidence.search"})).unwrap();
        assert_eq!(r.arguments, serde_json::json!({}));
        assert_eq!(agent_client_protocol::JsonRpcMessage::method(&r), TOOLS_CALL);
    }
}
