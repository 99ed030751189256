//! `mnote.knowledge_rag.query`: ask the LightRAG server bound to the context's KBs; its
//! references mapped back to our passages.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    env::{Located, ToolEnv, plural},
    failure::ToolError,
    tool::{Capability, Cited, Line, Tool, found, markdown},
};
use crate::{
    evidence::tools::{optional_uuid_schema, uuid_schema},
    rag::{self, client::QueryMode, query::QueryInput, query::Reference},
    search::open,
};

/// LightRAG's retrieval modes. (Not `Serialize`: the schema of `mode` would gain a `default`.)
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RagMode {
    Mix,
    Hybrid,
    Local,
    Global,
    Naive,
}

impl From<RagMode> for QueryMode {
    fn from(m: RagMode) -> QueryMode {
        match m {
            RagMode::Mix => QueryMode::Mix,
            RagMode::Hybrid => QueryMode::Hybrid,
            RagMode::Local => QueryMode::Local,
            RagMode::Global => QueryMode::Global,
            RagMode::Naive => QueryMode::Naive,
        }
    }
}

/// `mnote.knowledge_rag.query` arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RagQueryArgs {
    /// The question, in any language.
    pub query: String,
    /// `mix` (default: knowledge graph and vectors), `hybrid`, `local` (entities), `global`
    /// (relations) or `naive` (vectors only).
    #[serde(default)]
    pub mode: Option<RagMode>,
}

/// A knowledge-RAG reference mapped to our evidence, as the model sees it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RagReference {
    /// `null` when only the document could be cited.
    #[schemars(schema_with = "optional_uuid_schema")]
    pub evidence_id: Option<Uuid>,
    pub quote: String,
    pub citation_markdown: String,
    pub source_title: String,
    #[schemars(schema_with = "uuid_schema")]
    pub source_id: Uuid,
    pub file_path: String,
    /// `exact`, `fuzzy`, `evidence` or `resource_only` (how the chunk was mapped to a passage).
    #[schemars(with = "String")]
    pub match_quality: rag::mapping::MatchQuality,
    #[serde(flatten)]
    pub located: Located,
}

impl RagReference {
    /// A reference as `env`'s caller sees it (with absolute citations: its URL and locator).
    pub fn of(env: &ToolEnv, r: &Reference) -> RagReference {
        let source_title = open::source_title(&r.source_path);
        let (citation_markdown, located) = env.locate(&source_title, &r.locator, &r.open_action, r.citation_markdown.clone());
        RagReference {
            evidence_id: r.evidence_id,
            quote: r.quote.clone(),
            citation_markdown,
            source_title,
            source_id: r.source_id,
            file_path: r.file_path.clone(),
            match_quality: r.match_quality,
            located,
        }
    }

    pub(super) fn cited(&self) -> Option<Cited> {
        self.evidence_id.map(|id| Cited::new(id, &self.citation_markdown))
    }

    pub(super) fn line(&self) -> Line<'_> {
        Line { citation_markdown: &self.citation_markdown, text: Some(&self.quote) }
    }
}

/// `mnote.knowledge_rag.query` content.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RagQueryOutput {
    pub references: Vec<RagReference>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<&'static str>,
}

pub struct RagQuery;

impl Tool for RagQuery {
    const NAME: &'static str = "mnote.knowledge_rag.query";
    const CAPABILITY: Capability = Capability::KnowledgeRag;
    const DESCRIPTION: &'static str = "Ask the knowledge graph (LightRAG) bound to these knowledge bases, for broad \
                                       questions that span many documents. Returns references mapped to passages \
                                       (evidenceId, quote, citationMarkdown); cite them like search results.";
    const MCP_DESCRIPTION: &'static str = "Ask the knowledge graph (LightRAG) bound to the team's knowledge bases, for \
                                           broad questions that span many documents. Returns LightRAG's references \
                                           mapped back to passages: quote, locator, citationUrl and citationMarkdown \
                                           (evidenceId is null when only the document could be cited).";
    type Args = RagQueryArgs;
    type Output = RagQueryOutput;

    async fn call(env: &ToolEnv, args: RagQueryArgs) -> Result<RagQueryOutput, ToolError> {
        let input = QueryInput {
            kb_ids: env.scope().kb_ids().map(<[Uuid]>::to_vec).unwrap_or_default(),
            query: args.query,
            mode: args.mode.map(QueryMode::from).unwrap_or_default(),
            top_k: None,
            answer: false,
        };
        let r = rag::query::run(&env.state, &env.actor, input).await?;
        let references = r.references.iter().map(|x| RagReference::of(env, x)).collect();
        Ok(RagQueryOutput { degraded: r.degraded, degraded_reason: r.degraded_reason, references })
    }

    fn count(out: &RagQueryOutput) -> usize {
        out.references.len()
    }

    fn cited(out: &RagQueryOutput) -> Vec<Cited> {
        out.references.iter().filter_map(RagReference::cited).collect()
    }

    fn summary(out: &RagQueryOutput) -> String {
        let mut docs: Vec<Uuid> = out.references.iter().map(|x| x.source_id).collect();
        docs.sort();
        docs.dedup();
        let mut summary = format!(
            "{} in {}",
            plural(out.references.len(), "reference", "references"),
            plural(docs.len(), "document", "documents")
        );
        if out.degraded {
            summary.push_str(" (degraded)");
        }
        summary
    }

    fn text(out: &RagQueryOutput) -> String {
        let lines: Vec<Line> = out.references.iter().map(RagReference::line).collect();
        let degraded = out.degraded.then(|| out.degraded_reason.unwrap_or("degraded"));
        markdown(Some(found(lines.len())), degraded, &lines)
    }
}
