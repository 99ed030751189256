//! `mnote.knowledge_rag.open_reference`: one LightRAG reference (e.g. from a LightRAG MCP
//! server) mapped to the passage it came from.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    env::ToolEnv,
    failure::ToolError,
    rag_query::RagReference,
    tool::{Capability, Cited, Tool, markdown},
};
use crate::rag;

/// `mnote.knowledge_rag.open_reference` arguments.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RagOpenArgs {
    /// LightRAG's `file_path` of the reference.
    pub file_path: String,
    /// The chunk text LightRAG gave for it, if any (locates the passage).
    #[serde(default)]
    pub quote: Option<String>,
}

pub struct RagOpenReference;

impl Tool for RagOpenReference {
    const NAME: &'static str = "mnote.knowledge_rag.open_reference";
    const CAPABILITY: Capability = Capability::KnowledgeRag;
    const DESCRIPTION: &'static str = "Map one LightRAG reference (its file_path, and the chunk text if known) to the \
                                       passage it came from, with its evidenceId and citationMarkdown.";
    const MCP_DESCRIPTION: &'static str = "Map one LightRAG reference (its file_path, and the chunk text if known), e.g. \
                                           from a LightRAG MCP server, to the passage it came from: quote, locator, \
                                           citationUrl and citationMarkdown.";
    type Args = RagOpenArgs;
    type Output = RagReference;

    async fn call(env: &ToolEnv, args: RagOpenArgs) -> Result<RagReference, ToolError> {
        if args.file_path.trim().is_empty() || args.file_path.len() > 1024 {
            return Err(ToolError::invalid("filePath: LightRAG's file_path of a reference"));
        }
        let r = rag::query::open_reference(&env.state, &env.actor, env.scope(), &args.file_path, args.quote.as_deref()).await?;
        Ok(RagReference::of(env, &r))
    }

    fn count(_: &RagReference) -> usize {
        1
    }

    fn cited(out: &RagReference) -> Vec<Cited> {
        out.cited().into_iter().collect()
    }

    fn summary(out: &RagReference) -> String {
        out.source_title.clone()
    }

    fn text(out: &RagReference) -> String {
        markdown(None, None, &[out.line()])
    }
}
