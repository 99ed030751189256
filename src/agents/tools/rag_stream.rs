//! `mnote.knowledge_rag.query` with LightRAG's answer streamed (for the built-in assistant):
//! journaled and recorded like every call of [`ToolBox::call`], its references cited at our
//! evidence, the answer's pieces sent to the caller as they come (`rag::stream`).

use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;
use uuid::Uuid;

use super::{
    RagQuery, RagQueryOutput, RagReference, ToolBox, ToolError, capped_arguments, rag_bound,
    tool::{Done, Tool},
};
use crate::rag::{
    client::QueryMode,
    query::QueryInput,
    stream::{self, Piece, Streamed},
};

impl ToolBox {
    /// Ask the context's bound KBs in `mode`, streaming LightRAG's answer into `out` while
    /// `consumer` reads it (the two run together: the consumer may write into the run's
    /// journal as the pieces come, and `tool.completed` is journaled only after it ended, so
    /// the answer's deltas come before it). Returns the streamed answer (or the call's error:
    /// `unknown_tool` when the knowledge-RAG tools are not offered to this run) and the
    /// consumer's output.
    pub async fn rag_answer<C: Future>(
        &self,
        call_id: &str,
        query: &str,
        mode: QueryMode,
        out: UnboundedSender<Piece>,
        consumer: C,
    ) -> (Result<Streamed, ToolError>, C::Output) {
        let offered = self.offers::<RagQuery>();
        let arguments = capped_arguments(&json!({"query": query, "mode": mode.as_str()}));
        let mut consumed = None;
        let run = async {
            let streaming = async move {
                if !offered {
                    return Err(ToolError::unknown_tool(format!("no tool named {} is offered to this run", RagQuery::NAME)));
                }
                let input = QueryInput {
                    kb_ids: self.env.scope().kb_ids().map(<[Uuid]>::to_vec).unwrap_or_default(),
                    query: query.to_string(),
                    mode,
                    top_k: None,
                    answer: true,
                };
                // `out` is dropped at the end: the consumer then sees the stream end.
                stream::answer(&self.env.state, &self.env.actor, input, &out).await.map_err(ToolError::from)
            };
            let (answered, c) = tokio::join!(streaming, consumer);
            consumed = Some(c);
            let s = answered?;
            Ok((self.rag_done(&s), s))
        };
        let result = self.journaled(call_id, RagQuery::NAME, arguments, run).await;
        let consumed = consumed.expect("the consumer ran to its end");
        (result, consumed)
    }

    /// What the journal and the receipt keep of a streamed query: its references as the model
    /// sees them (as `mnote.knowledge_rag.query` reports them), "no context" said.
    fn rag_done(&self, s: &Streamed) -> Done {
        let r = &s.result;
        let references: Vec<RagReference> = r.references.iter().map(|x| RagReference::of(&self.env, x)).collect();
        let out = RagQueryOutput { degraded: r.degraded, degraded_reason: r.degraded_reason, references };
        let mut done = Done::of::<RagQuery>(&out);
        if s.no_context {
            done.summary.push_str(" (no context)");
        }
        done
    }

    /// Whether a KB of this run's context (every visible KB when it names none) is bound to
    /// LightRAG, whether or not its tools are offered.
    pub async fn knowledge_rag_bound(&self) -> bool {
        rag_bound(&self.env.state, &self.env.actor, &self.env.context).await.unwrap_or(false)
    }
}
