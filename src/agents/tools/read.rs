//! `mnote.evidence.read`: a passage in context (its neighbours and the rest of its section).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    env::{Located, ToolEnv, plural, truncate_chars},
    failure::ToolError,
    tool::{Capability, Cited, Line, Tool, markdown},
};
use crate::{
    error::AppError,
    evidence::tools::{EvidenceBlock, ReadRequest, uuid_schema},
    search::open,
};

/// Neighbours `read` returns on each side unless asked otherwise, and at most.
const DEFAULT_WINDOW: usize = 2;
const MAX_WINDOW: usize = 10;
/// Text of one block in a `read` result (a long table stays readable, and bounded).
pub(super) const MAX_BLOCK_CHARS: usize = 2000;

/// `mnote.evidence.read` arguments.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadArgs {
    /// The passage to read (an `evidenceId` from another tool's result).
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    /// Passages before and after it (0–10, default 2).
    #[serde(default)]
    #[schemars(range(min = 0, max = 10))]
    pub window: Option<usize>,
}

/// A passage of a `read` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadBlock {
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    pub text: String,
    pub citation_markdown: String,
    /// The passage asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub anchor: bool,
    #[serde(flatten)]
    pub located: Located,
}

/// `mnote.evidence.read` content: the passage with its neighbours and the rest of its
/// section (bounded), in document order.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    #[schemars(schema_with = "uuid_schema")]
    pub source_id: Uuid,
    pub source_title: String,
    pub section_path: Vec<String>,
    pub blocks: Vec<ReadBlock>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub section_truncated: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

pub struct Read;

impl Tool for Read {
    const NAME: &'static str = "mnote.evidence.read";
    const CAPABILITY: Capability = Capability::Evidence;
    const DESCRIPTION: &'static str = "Read a passage in context: the passage, the passages before and after it and the \
                                       rest of its section, in document order, each with its evidenceId and \
                                       citationMarkdown. Use it when a quote is cut short or the surrounding text matters.";
    const MCP_DESCRIPTION: &'static str = "Read a passage in context (an evidenceId from another result): the passage, \
                                           the passages before and after it and the rest of its section, in document \
                                           order, each with its locator, citationUrl and citationMarkdown. Use it when a \
                                           quote is cut short or the surrounding text matters.";
    type Args = ReadArgs;
    type Output = ReadOutput;

    async fn call(env: &ToolEnv, args: ReadArgs) -> Result<ReadOutput, ToolError> {
        let window = args.window.unwrap_or(DEFAULT_WINDOW);
        if window > MAX_WINDOW {
            return Err(ToolError::invalid(format!("window: 0 to {MAX_WINDOW}")));
        }
        let req = ReadRequest { evidence_id: Some(args.evidence_id), locator: None, window: Some(window) };
        let public_url = env.state.config.public_url.as_deref();
        let r = async {
            let mut tx = env.actor.read_tx(&env.state).await?;
            let r = open::read(&mut tx, &req, env.scope(), public_url).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await?;
        let anchor_id = r.anchor.as_ref().map(|a| a.evidence_id);
        let mut all: Vec<&EvidenceBlock> = r.previous.iter().chain(&r.anchor).chain(&r.next).chain(&r.section_blocks).collect();
        all.sort_by_key(|b| b.source.char_range[0]);
        all.dedup_by_key(|b| b.evidence_id);
        let source_id = r.anchor.as_ref().map(|a| a.source.source_id).unwrap_or_default();
        let blocks = all
            .into_iter()
            .map(|b| {
                let citation = open::citation_markdown(&r.source_title, &b.source.place(), &b.open_action.url);
                let (citation_markdown, located) = env.locate(&r.source_title, &b.source, &b.open_action, citation);
                ReadBlock {
                    evidence_id: b.evidence_id,
                    text: truncate_chars(&b.text, MAX_BLOCK_CHARS),
                    citation_markdown,
                    anchor: Some(b.evidence_id) == anchor_id,
                    located,
                }
            })
            .collect();
        Ok(ReadOutput {
            source_id,
            source_title: r.source_title,
            section_path: r.section_path,
            section_truncated: r.section_truncated,
            stale: r.stale,
            blocks,
        })
    }

    fn count(out: &ReadOutput) -> usize {
        out.blocks.len()
    }

    fn cited(out: &ReadOutput) -> Vec<Cited> {
        out.blocks.iter().map(|b| Cited::new(b.evidence_id, &b.citation_markdown)).collect()
    }

    fn summary(out: &ReadOutput) -> String {
        format!("{} of {}", plural(out.blocks.len(), "passage", "passages"), out.source_title)
    }

    fn text(out: &ReadOutput) -> String {
        let lines: Vec<Line> =
            out.blocks.iter().map(|b| Line { citation_markdown: &b.citation_markdown, text: Some(&b.text) }).collect();
        markdown(Some(format!("{} passage(s) of {}:", lines.len(), out.source_title)), None, &lines)
    }
}
