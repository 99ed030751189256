//! Citation links of a run: what each evidence id its tools returned is cited as, and the
//! `[evidence:<uuid>]` markers of an answer turned into those links.

use uuid::Uuid;

use super::{Cited, ToolBox};
use crate::{
    agents::citations::{self, Found},
    error::AppError,
    evidence::tools::ReadRequest,
    search::open,
};

/// A `[label](url)` citation with `from=ai:<run>` on its viewer URL, so the viewer opened
/// from the answer leads back to it (markdown that is not a link stays as it is).
pub fn from_answer(markdown: &str, run: Uuid) -> String {
    match citations::split_link(markdown) {
        Some((label, url)) => format!("[{label}]({})", open::with_from(url, open::OpenedFrom::Answer(run))),
        None => markdown.to_string(),
    }
}

impl ToolBox {
    /// Remember the citation links of `cited` (what [`ToolBox::citation`] answers first).
    pub(super) fn remember(&self, cited: &[Cited]) {
        let mut map = self.cited.lock().unwrap_or_else(|e| e.into_inner());
        for c in cited {
            map.insert(c.evidence_id, c.citation_markdown.clone());
        }
    }

    /// `citationMarkdown` of an evidence id the actor may see within the run's KBs (from this
    /// run's results, else looked up); `None` when it does not exist, is not visible or lies
    /// outside the run's KBs.
    pub async fn citation(&self, evidence_id: Uuid) -> Option<String> {
        if let Some(c) = self.cited.lock().unwrap_or_else(|e| e.into_inner()).get(&evidence_id) {
            return Some(c.clone());
        }
        let req = ReadRequest { evidence_id: Some(evidence_id), locator: None, window: None };
        let public_url = self.env.state.config.public_url.as_deref();
        let found = async {
            let mut tx = self.env.actor.tx(&self.env.state).await?;
            let r = crate::search::open::open(&mut tx, &req, self.env.scope(), public_url).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await;
        match found {
            Ok(r) => {
                self.remember(&[Cited::new(evidence_id, &r.citation_markdown)]);
                Some(r.citation_markdown)
            }
            Err(AppError::NotFound) => None,
            Err(e) => {
                tracing::warn!("citation lookup failed: {e}");
                None
            }
        }
    }

    /// `markdown` (a `[label](url)` citation) with `from=ai:<run>` on its viewer URL, so the
    /// viewer opened from the answer leads back to it; as it was outside a run.
    fn marked_as_answers(&self, markdown: &str) -> String {
        match self.events.as_ref().and_then(|e| e.run_id()) {
            Some(run) => from_answer(markdown, run),
            None => markdown.to_string(),
        }
    }

    /// `text` with every `[evidence:<uuid>]` marker a model or agent wrote replaced by that
    /// evidence's `citationMarkdown` link (markers naming evidence the actor cannot see stay
    /// as they are, so verification flags them).
    pub async fn link_citations(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for found in citations::scan(text) {
            let Found::Marker { span, ids, parts } = found else { continue };
            let mut linked = Vec::with_capacity(ids.len());
            for (id, part) in ids.iter().zip(&parts) {
                let link = match id {
                    Some(id) => self.citation(*id).await.map(|c| self.marked_as_answers(&c)),
                    None => None,
                };
                linked.push(link.ok_or_else(|| format!("[evidence:{part}]")));
            }
            out.push_str(&text[last..span.start]);
            out.push_str(&render_marker(&text[span.clone()], &linked));
            last = span.end;
        }
        out.push_str(&text[last..]);
        out
    }
}

/// A marker's replacement: the links of the ids that resolved; one that did not stays a
/// marker of its own (`Err` holds it); the whole marker as written when nothing resolved.
fn render_marker(raw: &str, parts: &[Result<String, String>]) -> String {
    if parts.iter().all(Result::is_err) {
        return raw.to_string();
    }
    let mut out: Vec<&str> = parts.iter().map(|p| p.as_deref().unwrap_or_else(|m| m.as_str())).collect();
    out.dedup();
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_become_links_except_for_unknown_evidence() {
        let a = Uuid::from_u128(1);
        let raw = format!("[evidence:{a}, {}]", Uuid::from_u128(2));
        let kept = format!("[evidence:{}]", Uuid::from_u128(2));
        let parts = vec![Ok("[a.md · L1](/u)".to_string()), Err(kept.clone()), Err("[evidence:junk]".to_string())];
        assert_eq!(render_marker(&raw, &parts), format!("[a.md · L1](/u) {kept} [evidence:junk]"));
        assert_eq!(render_marker(&raw, &[Err(format!("[evidence:{a}]")), Err(kept)]), raw);
    }
}
