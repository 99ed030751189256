//! `mnote.evidence.open`: the citation link and viewer URL of one passage.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{
    env::{Located, ToolEnv, truncate_chars},
    failure::ToolError,
    read::MAX_BLOCK_CHARS,
    tool::{Capability, Cited, Line, Tool, markdown},
};
use crate::{
    agents::citations,
    error::AppError,
    evidence::tools::{ReadRequest, uuid_schema},
    search::open,
};

/// `mnote.evidence.open` arguments.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenArgs {
    /// The passage to cite (an `evidenceId` from another tool's result).
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
}

/// `mnote.evidence.open` content.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenOutput {
    #[schemars(schema_with = "uuid_schema")]
    pub evidence_id: Uuid,
    pub citation_markdown: String,
    /// The viewer URL, root-relative.
    pub url: String,
    pub block_found: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// The passage's text (outside a run: MCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    #[serde(flatten)]
    pub located: Located,
}

pub struct Open;

impl Tool for Open {
    const NAME: &'static str = "mnote.evidence.open";
    const CAPABILITY: Capability = Capability::Evidence;
    const DESCRIPTION: &'static str = "The citation link (citationMarkdown) and viewer URL of one passage, and whether \
                                       the passage is still indexed.";
    const MCP_DESCRIPTION: &'static str = "The citation of one passage (an evidenceId): its quote, locator, absolute \
                                           citationUrl and citationMarkdown, and whether it is still indexed.";
    type Args = OpenArgs;
    type Output = OpenOutput;

    async fn call(env: &ToolEnv, args: OpenArgs) -> Result<OpenOutput, ToolError> {
        let req = ReadRequest { evidence_id: Some(args.evidence_id), locator: None, window: None };
        let public_url = env.state.config.public_url.as_deref();
        let (r, passage) = async {
            let mut tx = env.actor.read_tx(&env.state).await?;
            let r = open::open(&mut tx, &req, env.scope(), public_url).await?;
            // With absolute citations (MCP) the result also carries the passage's text and locator.
            let passage = if env.absolute() {
                let read = ReadRequest { window: Some(0), ..req.clone() };
                let p = open::read(&mut tx, &read, env.scope(), public_url).await?;
                p.anchor.map(|a| (p.source_title, a))
            } else {
                None
            };
            tx.commit().await?;
            Ok::<_, AppError>((r, passage))
        }
        .await?;
        let (citation_markdown, quote, located) = match passage {
            Some((title, a)) => {
                let (c, l) = env.locate(&title, &a.source, &a.open_action, r.citation_markdown.clone());
                (c, Some(truncate_chars(&a.text, MAX_BLOCK_CHARS)), l)
            }
            None => (r.citation_markdown.clone(), None, Located::default()),
        };
        Ok(OpenOutput {
            evidence_id: args.evidence_id,
            citation_markdown,
            url: r.open_action.url,
            block_found: r.block_found,
            stale: r.stale,
            quote,
            located,
        })
    }

    fn count(_: &OpenOutput) -> usize {
        1
    }

    fn cited(out: &OpenOutput) -> Vec<Cited> {
        vec![Cited::new(out.evidence_id, &out.citation_markdown)]
    }

    /// The link's text: `notes.md · L3`.
    fn summary(out: &OpenOutput) -> String {
        citations::split_link(&out.citation_markdown).map(|(l, _)| l.to_string()).unwrap_or_default()
    }

    fn text(out: &OpenOutput) -> String {
        markdown(None, None, &[Line { citation_markdown: &out.citation_markdown, text: out.quote.as_deref() }])
    }
}
