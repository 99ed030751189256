//! `session/update` notifications → journal events. Answer text streams as deltas; the
//! agent's plan becomes `plan.updated`; the agent's own tool calls become compact
//! `tool.started`/`tool.completed` events attributed to the agent (ids, title, kind, status:
//! never their raw input, output or content). Thoughts and everything else are not journaled.

use std::collections::HashMap;

use agent_client_protocol::v1::schema::{
    ContentBlock, PlanEntryStatus, SessionUpdate, ToolCall, ToolCallStatus, ToolCallUpdate, ToolKind,
};
use serde_json::{Map, Value};

use crate::journal::{ErrorBody, Event, PlanEntry, ToolCompleted, ToolStarted, sink::EventSink, sink::JournalError};

/// What one agent tool call looked like so far.
struct AgentTool {
    title: String,
    done: bool,
}

/// The state of one prompt turn's updates.
#[derive(Default)]
pub struct Updates {
    text: String,
    tools: HashMap<String, AgentTool>,
}

impl Updates {
    /// The answer text streamed so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub async fn apply(&mut self, events: &EventSink, update: SessionUpdate) -> Result<(), JournalError> {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                if let ContentBlock::Text(t) = chunk.content {
                    self.text.push_str(&t.text);
                    events.delta(&t.text).await?;
                }
            }
            SessionUpdate::Plan(plan) => {
                let entries = plan
                    .entries
                    .into_iter()
                    .map(|e| PlanEntry { content: e.content, status: plan_status(&e.status).to_string() })
                    .collect();
                events.agent(Event::PlanUpdated { entries }).await?;
            }
            SessionUpdate::ToolCall(call) => self.tool_call(events, call).await?,
            SessionUpdate::ToolCallUpdate(update) => self.tool_call_update(events, update).await?,
            // Thoughts, the user's echoed message, commands, modes, usage: not part of the run's record.
            _ => {}
        }
        Ok(())
    }

    async fn tool_call(&mut self, events: &EventSink, call: ToolCall) -> Result<(), JournalError> {
        let id = call.tool_call_id.0.to_string();
        if self.tools.get(&id).is_some_and(|t| t.done) {
            return Ok(());
        }
        if !self.tools.contains_key(&id) {
            let arguments = compact(call.name.as_deref(), Some(&call.kind), Some(&call.status));
            events.agent(Event::ToolStarted(ToolStarted { call_id: id.clone(), name: call.title.clone(), arguments })).await?;
        }
        self.tools.insert(id.clone(), AgentTool { title: call.title, done: false });
        self.finish_if_ended(events, &id, call.status).await
    }

    async fn tool_call_update(&mut self, events: &EventSink, update: ToolCallUpdate) -> Result<(), JournalError> {
        let id = update.tool_call_id.0.to_string();
        let fields = update.fields;
        match self.tools.get_mut(&id) {
            Some(t) => {
                if let Some(title) = fields.title {
                    t.title = title;
                }
            }
            None => {
                // An update for a call the agent never announced: announce it, so the
                // completion has a start.
                let title = fields.title.unwrap_or_else(|| id.clone());
                let arguments = compact(fields.name.as_deref(), fields.kind.as_ref(), fields.status.as_ref());
                events.agent(Event::ToolStarted(ToolStarted { call_id: id.clone(), name: title.clone(), arguments })).await?;
                self.tools.insert(id.clone(), AgentTool { title, done: false });
            }
        }
        match fields.status {
            Some(status) => self.finish_if_ended(events, &id, status).await,
            None => Ok(()),
        }
    }

    async fn finish_if_ended(&mut self, events: &EventSink, id: &str, status: ToolCallStatus) -> Result<(), JournalError> {
        let ok = match status {
            ToolCallStatus::Completed => true,
            ToolCallStatus::Failed => false,
            _ => return Ok(()),
        };
        let Some(tool) = self.tools.get_mut(id).filter(|t| !t.done) else { return Ok(()) };
        tool.done = true;
        let error = (!ok).then(|| ErrorBody {
            code: "agent_tool_failed".into(),
            message: format!("the agent reports that “{}” failed", tool.title),
        });
        let completed = ToolCompleted {
            call_id: id.to_string(),
            name: tool.title.clone(),
            ok,
            count: None,
            evidence_ids: Vec::new(),
            summary: None,
            error,
        };
        events.agent(Event::ToolCompleted(completed)).await
    }
}

fn plan_status(s: &PlanEntryStatus) -> &'static str {
    match s {
        PlanEntryStatus::InProgress => "in_progress",
        PlanEntryStatus::Completed => "completed",
        _ => "pending",
    }
}

/// `tool.started` arguments of an agent's own tool: what kind of tool, in what state, and its
/// programmatic name if it gave one. Never its raw input.
fn compact(name: Option<&str>, kind: Option<&ToolKind>, status: Option<&ToolCallStatus>) -> Value {
    let mut m = Map::new();
    if let Some(n) = name {
        m.insert("tool".into(), Value::String(n.chars().take(200).collect()));
    }
    for (key, v) in [("kind", kind.and_then(wire_name)), ("status", status.and_then(wire_name))] {
        if let Some(v) = v {
            m.insert(key.into(), Value::String(v));
        }
    }
    Value::Object(m)
}

/// The protocol's own name of an enum value (`search`, `in_progress`).
fn wire_name(v: &impl serde::Serialize) -> Option<String> {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(String::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::AgentId;
    use crate::journal::EventSource;

    fn update(v: Value) -> SessionUpdate {
        serde_json::from_value(v).unwrap()
    }

    #[tokio::test]
    async fn chunks_plans_and_the_agents_tool_calls_become_journal_events() {
        let sink = EventSink::memory(EventSource::Agent(AgentId::Reasonix));
        let mut u = Updates::default();
        for v in [
            serde_json::json!({"sessionUpdate": "plan", "entries": [
                {"content": "Search", "priority": "high", "status": "in_progress"},
                {"content": "Answer", "priority": "medium", "status": "pending"}]}),
            serde_json::json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}),
            serde_json::json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Search the KBs",
                "kind": "search", "status": "in_progress", "rawInput": {"secret": "not journaled"}}),
            serde_json::json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}),
            serde_json::json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
                "rawOutput": {"big": "not journaled"}}),
            serde_json::json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}),
            serde_json::json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}}),
            serde_json::json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lo"}}),
            serde_json::json!({"sessionUpdate": "tool_call_update", "toolCallId": "c2", "title": "Fetch", "status": "failed"}),
        ] {
            u.apply(&sink, update(v)).await.unwrap();
        }
        sink.flush().await.unwrap();
        assert_eq!(u.text(), "Hello");
        let got: Vec<Event> = sink
            .recorded()
            .into_iter()
            .map(|(src, e)| {
                assert_eq!(src, EventSource::Agent(AgentId::Reasonix));
                e
            })
            .collect();
        let plan = Event::PlanUpdated {
            entries: vec![
                PlanEntry { content: "Search".into(), status: "in_progress".into() },
                PlanEntry { content: "Answer".into(), status: "pending".into() },
            ],
        };
        let started = Event::ToolStarted(ToolStarted {
            call_id: "c1".into(),
            name: "Search the KBs".into(),
            arguments: serde_json::json!({"kind": "search", "status": "in_progress"}),
        });
        let completed = Event::ToolCompleted(ToolCompleted {
            call_id: "c1".into(),
            name: "Search the KBs".into(),
            ok: true,
            count: None,
            evidence_ids: vec![],
            summary: None,
            error: None,
        });
        assert_eq!(got[..3], [plan, started, completed], "{got:#?}");
        assert_eq!(got[3], Event::MessageDelta { text: "Hel".into() });
        assert_eq!(got[4], Event::MessageDelta { text: "lo".into() });
        // An update for an unannounced call is announced first, then fails.
        assert!(matches!(&got[5], Event::ToolStarted(s) if s.call_id == "c2" && s.name == "Fetch"), "{got:#?}");
        assert!(
            matches!(&got[6], Event::ToolCompleted(c) if !c.ok && c.error.as_ref().is_some_and(|e| e.code == "agent_tool_failed")),
            "{got:#?}"
        );
        assert_eq!(got.len(), 7, "{got:#?}");
    }
}
