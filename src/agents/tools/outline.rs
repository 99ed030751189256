//! `mnote.evidence.outline`: the section tree of one document (`search::outline`).

use super::{
    env::{ToolEnv, plural},
    failure::ToolError,
    tool::{Capability, Cited, Tool},
};
use crate::{
    error::AppError,
    evidence::tools::{OutlineRequest, OutlineResponse, OutlineSection},
    search::outline,
};

/// `mnote.evidence.outline` arguments: the source (the search API's request).
pub type OutlineArgs = OutlineRequest;

pub struct Outline;

impl Tool for Outline {
    const NAME: &'static str = "mnote.evidence.outline";
    const CAPABILITY: Capability = Capability::Evidence;
    const DESCRIPTION: &'static str = "The section tree of one document (its sourceId, e.g. from a search result): \
                                       headings with their page or line ranges, how many passages each holds and the \
                                       evidenceId of its first passage. Use it to pick the sections of a long document \
                                       worth reading.";
    const MCP_DESCRIPTION: &'static str = "The section tree of one document (its sourceId, e.g. from a search result): \
                                           headings with their page or line ranges, how many passages each holds and \
                                           the evidenceId of its first passage (read it with evidence_read). Use it to \
                                           pick the sections of a long document worth reading.";
    type Args = OutlineArgs;
    type Output = OutlineResponse;

    async fn call(env: &ToolEnv, args: OutlineArgs) -> Result<OutlineResponse, ToolError> {
        let r = async {
            let mut tx = env.actor.read_tx(&env.state).await?;
            let r = outline::outline(&mut tx, &args, env.scope()).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await?;
        Ok(r)
    }

    /// The sections, subsections included.
    fn count(out: &OutlineResponse) -> usize {
        fn count(s: &[OutlineSection]) -> usize {
            s.iter().map(|s| 1 + count(&s.children)).sum()
        }
        count(&out.sections)
    }

    /// An outline cites no passage.
    fn cited(_: &OutlineResponse) -> Vec<Cited> {
        Vec::new()
    }

    fn summary(out: &OutlineResponse) -> String {
        format!("{} in {}", plural(Self::count(out), "section", "sections"), out.title)
    }

    /// One indented line per heading: its place, its passages and its first passage's id.
    fn text(out: &OutlineResponse) -> String {
        fn lines(out: &mut String, sections: &[OutlineSection]) {
            for s in sections {
                let indent = "  ".repeat(usize::from(s.level.saturating_sub(1)));
                let place = match (s.page_range, s.line_range) {
                    (Some([a, b]), _) if a == b => format!("p.{a}, "),
                    (Some([a, b]), _) => format!("p.{a}–{b}, "),
                    (None, Some([a, b])) if a == b => format!("L{a}, "),
                    (None, Some([a, b])) => format!("L{a}–{b}, "),
                    (None, None) => String::new(),
                };
                let first = s.first_evidence_id.map(|id| format!("; first passage {id}")).unwrap_or_default();
                let passages = plural(s.block_count, "passage", "passages");
                out.push_str(&format!("{indent}- {} ({place}{passages}{first})\n", s.title));
                lines(out, &s.children);
            }
        }
        let mut text = format!("Outline of {} ({}):\n", out.title, plural(Self::count(out), "section", "sections"));
        if out.sections.is_empty() {
            text.push_str("No headings: read the document's passages from a search result.\n");
        }
        lines(&mut text, &out.sections);
        if out.truncated {
            text.push_str("(more sections than shown)\n");
        }
        if out.stale {
            text.push_str("(the document changed since it was indexed)\n");
        }
        text.trim_end().to_string()
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::evidence::SourceKind;

    fn section(title: &str, level: u8, lines: [u32; 2], children: Vec<OutlineSection>) -> OutlineSection {
        OutlineSection {
            title: title.into(),
            level,
            path: vec![title.into()],
            page_range: None,
            line_range: Some(lines),
            block_count: 3,
            first_evidence_id: Some(Uuid::from_u128(level.into())),
            children,
        }
    }

    #[test]
    fn the_outline_counts_and_renders_nested_sections() {
        let out = OutlineResponse {
            schema: outline::SCHEMA.into(),
            source_id: Uuid::nil(),
            title: "plan.md".into(),
            kind: SourceKind::Markdown,
            stale: false,
            block_count: 7,
            unsectioned_block_count: 1,
            sections: vec![section("Plan", 1, [1, 20], vec![section("Budget", 2, [4, 4], vec![])])],
            truncated: false,
        };
        assert_eq!(Outline::count(&out), 2);
        assert_eq!(Outline::summary(&out), "2 sections in plan.md");
        assert!(Outline::cited(&out).is_empty());
        assert_eq!(
            Outline::text(&out),
            format!(
                "Outline of plan.md (2 sections):\n- Plan (L1–20, 3 passages; first passage {})\n  - Budget (L4, 3 passages; \
                 first passage {})",
                Uuid::from_u128(1),
                Uuid::from_u128(2)
            )
        );
    }
}
