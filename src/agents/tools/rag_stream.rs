//! `mnote.knowledge_rag.query` with LightRAG's answer streamed (for the built-in assistant):
//! journaled and recorded like every call of [`ToolBox::call`], its references cited at our
//! evidence, the answer's pieces sent to the caller as they come (`rag::stream`).

use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;
use uuid::Uuid;

use super::{Done, RAG_QUERY, RagQueryOutput, RagReference, ToolBox, ToolResult, failure, from_app, plural};
use crate::rag::{
    client::QueryMode,
    query::QueryInput,
    stream::{self, Piece, Streamed},
};

impl ToolBox {
    /// Ask the context's bound KBs in `mode`, streaming LightRAG's answer into `out` while
    /// `consumer` reads it (the two run together: the consumer may write into the run's
    /// journal as the pieces come, and `tool.completed` is journaled only after it ended, so
    /// the answer's deltas come before it). The result is the tool's (references as the model
    /// sees them), the streamed answer and the consumer's output. `unknown_tool` when the
    /// knowledge-RAG tools are not offered to this run.
    pub async fn rag_answer<C: Future>(
        &self,
        call_id: &str,
        query: &str,
        mode: QueryMode,
        out: UnboundedSender<Piece>,
        consumer: C,
    ) -> (ToolResult, Option<Streamed>, C::Output) {
        let offered = self.offered.iter().any(|d| d.name == RAG_QUERY);
        let arguments = json!({"query": query, "mode": mode.as_str()});
        self.journal_started(call_id, RAG_QUERY, &arguments).await;
        let streaming = async move {
            if !offered {
                return Err(failure("unknown_tool", format!("no tool named {RAG_QUERY} is offered to this run")));
            }
            let input =
                QueryInput { kb_ids: self.context.kb_ids.clone(), query: query.to_string(), mode, top_k: None, answer: true };
            // `out` is dropped at the end: the consumer then sees the stream end.
            stream::answer(&self.state, &self.actor, input, &out).await.map_err(from_app)
        };
        let (answered, consumed) = tokio::join!(streaming, consumer);
        let mut streamed = None;
        let outcome = answered.map(|s| {
            let done = self.rag_done(&s);
            streamed = Some(s);
            done
        });
        (self.journal_outcome(call_id, RAG_QUERY.to_string(), outcome).await, streamed, consumed)
    }

    fn rag_done(&self, s: &Streamed) -> Done {
        let r = &s.result;
        let references: Vec<RagReference> = r.references.iter().map(|x| self.rag_reference(x)).collect();
        for x in &references {
            if let Some(id) = x.evidence_id {
                self.remember(id, &x.citation_markdown);
            }
        }
        let mut docs: Vec<Uuid> = references.iter().map(|x| x.source_id).collect();
        docs.sort();
        docs.dedup();
        let mut summary =
            format!("{} in {}", plural(references.len(), "reference", "references"), plural(docs.len(), "document", "documents"));
        if s.no_context {
            summary.push_str(" (no context)");
        }
        if r.degraded {
            summary.push_str(" (degraded)");
        }
        let evidence_ids: Vec<Uuid> = references.iter().filter_map(|x| x.evidence_id).collect();
        let out = RagQueryOutput { degraded: r.degraded, degraded_reason: r.degraded_reason, references };
        Done { count: Some(out.references.len()), evidence_ids, content: serde_json::to_value(&out).unwrap_or_default(), summary }
    }

    /// Whether a KB of this run's context (every visible KB when it names none) is bound to
    /// LightRAG, whether or not its tools are offered.
    pub async fn knowledge_rag_bound(&self) -> bool {
        Self::rag_bound(&self.state, &self.actor, &self.context).await.unwrap_or(false)
    }
}
