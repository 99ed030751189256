//! The tools' implementations: a second `impl` block of [`ToolBox`], one method per tool of
//! the registry (and the check that decides whether the knowledge-RAG tools are offered).

use uuid::Uuid;

use super::{
    Done, ToolBox, failure, from_app, plural,
    registry::{
        EvidenceHit, OpenArgs, OpenOutput, OutlineArgs, RagOpenArgs, RagQueryArgs, RagQueryOutput, RagReference, ReadArgs,
        ReadBlock, ReadOutput, SearchArgs, SearchOutput,
    },
    truncate_chars,
};
use crate::{
    agents::citations,
    auth::Auth,
    error::AppError,
    evidence::tools::{ReadRequest, SearchRequest},
    journal::{ContextRefs, ErrorBody},
    rag::{self, client::QueryMode, query::QueryInput},
    search::{open, outline, query},
    state::AppState,
};

/// Passages a search returns unless asked otherwise, and at most.
const DEFAULT_TOP_K: usize = 8;
const MAX_TOP_K: usize = 20;
/// Neighbours `read` returns on each side unless asked otherwise, and at most.
const DEFAULT_WINDOW: usize = 2;
const MAX_WINDOW: usize = 10;
const MAX_QUERY_CHARS: usize = 4000;
/// Text of one block in a `read` result (a long table stays readable, and bounded).
const MAX_BLOCK_CHARS: usize = 2000;

impl ToolBox {
    /// Search the context's KBs (every KB the actor can read when it names none); hits from
    /// the context's sources rank first.
    pub(super) async fn search(&self, args: SearchArgs) -> Result<Done, ErrorBody> {
        let q = args.query.trim();
        if q.is_empty() || q.chars().count() > MAX_QUERY_CHARS {
            return Err(failure("invalid_arguments", format!("query: 1 to {MAX_QUERY_CHARS} characters")));
        }
        let top_k = args.top_k.unwrap_or(DEFAULT_TOP_K);
        if !(1..=MAX_TOP_K).contains(&top_k) {
            return Err(failure("invalid_arguments", format!("topK: 1 to {MAX_TOP_K}")));
        }
        let mut req = SearchRequest::new(q, args.mode.unwrap_or_default());
        let prefer = &self.context.source_ids;
        req.top_k = Some(if prefer.is_empty() { top_k } else { (top_k * 3).min(query::MAX_TOP_K) });
        req.kb_ids = (!self.context.kb_ids.is_empty()).then(|| self.context.kb_ids.clone());
        let resp = query::search_retrying(|| self.actor.read_tx(&self.state), &self.state.search_engine(), &req)
            .await
            .map_err(|e| from_app(e.into()))?;
        let mut hits = resp.results;
        hits.sort_by_key(|h| !prefer.contains(&h.source_id));
        hits.truncate(top_k);
        let results: Vec<EvidenceHit> = hits
            .into_iter()
            .map(|h| {
                let (citation_markdown, located) =
                    self.locate(&h.source_title, &h.source, &h.open_action, h.citation_markdown.clone());
                EvidenceHit {
                    evidence_id: h.evidence_id,
                    quote: h.quote.clone(),
                    citation_markdown,
                    source_title: h.source_title.clone(),
                    source_id: h.source_id,
                    score: (h.score * 10_000.0).round() / 10_000.0,
                    section: h.source.section_path.last().cloned(),
                    located,
                }
            })
            .collect();
        for r in &results {
            self.remember(r.evidence_id, &r.citation_markdown);
        }
        let mut docs: Vec<Uuid> = results.iter().map(|r| r.source_id).collect();
        docs.sort();
        docs.dedup();
        let summary = if results.is_empty() {
            "no results".to_string()
        } else {
            format!("{} in {}", plural(results.len(), "result", "results"), plural(docs.len(), "document", "documents"))
        };
        let out = SearchOutput { degraded: resp.degraded, degraded_reason: resp.degraded_reason, results };
        Ok(Done {
            count: Some(out.results.len()),
            evidence_ids: out.results.iter().map(|r| r.evidence_id).collect(),
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    pub(super) async fn read(&self, args: ReadArgs) -> Result<Done, ErrorBody> {
        let window = args.window.unwrap_or(DEFAULT_WINDOW);
        if window > MAX_WINDOW {
            return Err(failure("invalid_arguments", format!("window: 0 to {MAX_WINDOW}")));
        }
        let req = ReadRequest { evidence_id: Some(args.evidence_id), locator: None, window: Some(window) };
        let public_url = self.state.config.public_url.as_deref();
        let r = async {
            let mut tx = self.actor.read_tx(&self.state).await?;
            let r = open::read(&mut tx, &req, public_url).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await
        .map_err(from_app)?;
        let anchor_id = r.anchor.as_ref().map(|a| a.evidence_id);
        let mut all: Vec<&crate::evidence::tools::EvidenceBlock> =
            r.previous.iter().chain(&r.anchor).chain(&r.next).chain(&r.section_blocks).collect();
        all.sort_by_key(|b| b.source.char_range[0]);
        all.dedup_by_key(|b| b.evidence_id);
        let source_id = r.anchor.as_ref().map(|a| a.source.source_id).unwrap_or_default();
        let blocks: Vec<ReadBlock> = all
            .into_iter()
            .map(|b| {
                let citation = open::citation_markdown(&r.source_title, &b.source.place(), &b.open_action.url);
                let (citation_markdown, located) = self.locate(&r.source_title, &b.source, &b.open_action, citation);
                ReadBlock {
                    evidence_id: b.evidence_id,
                    text: truncate_chars(&b.text, MAX_BLOCK_CHARS),
                    citation_markdown,
                    anchor: Some(b.evidence_id) == anchor_id,
                    located,
                }
            })
            .collect();
        for b in &blocks {
            self.remember(b.evidence_id, &b.citation_markdown);
        }
        let summary = format!("{} of {}", plural(blocks.len(), "passage", "passages"), r.source_title);
        let out = ReadOutput {
            source_id,
            source_title: r.source_title,
            section_path: r.section_path,
            section_truncated: r.section_truncated,
            stale: r.stale,
            blocks,
        };
        Ok(Done {
            count: Some(out.blocks.len()),
            evidence_ids: out.blocks.iter().map(|b| b.evidence_id).collect(),
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    pub(super) async fn open(&self, args: OpenArgs) -> Result<Done, ErrorBody> {
        let req = ReadRequest { evidence_id: Some(args.evidence_id), locator: None, window: None };
        let public_url = self.state.config.public_url.as_deref();
        let detached = self.citation_base.is_some();
        let (r, passage) = async {
            let mut tx = self.actor.read_tx(&self.state).await?;
            let r = open::open(&mut tx, &req, public_url).await?;
            // Outside a run the result also carries the passage's text and locator.
            let passage = if detached {
                let read = ReadRequest { window: Some(0), ..req.clone() };
                let p = open::read(&mut tx, &read, public_url).await?;
                p.anchor.map(|a| (p.source_title, a))
            } else {
                None
            };
            tx.commit().await?;
            Ok::<_, AppError>((r, passage))
        }
        .await
        .map_err(from_app)?;
        let (citation_markdown, quote, located) = match passage {
            Some((title, a)) => {
                let (c, l) = self.locate(&title, &a.source, &a.open_action, r.citation_markdown.clone());
                (c, Some(truncate_chars(&a.text, MAX_BLOCK_CHARS)), l)
            }
            None => (r.citation_markdown.clone(), None, Default::default()),
        };
        self.remember(args.evidence_id, &citation_markdown);
        let summary = citations::split_link(&citation_markdown).map(|(l, _)| l.to_string()).unwrap_or_default();
        let out = OpenOutput {
            evidence_id: args.evidence_id,
            citation_markdown,
            url: r.open_action.url,
            block_found: r.block_found,
            stale: r.stale,
            quote,
            located,
        };
        Ok(Done {
            count: Some(1),
            evidence_ids: vec![args.evidence_id],
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    pub(super) async fn outline(&self, args: OutlineArgs) -> Result<Done, ErrorBody> {
        let r = async {
            let mut tx = self.actor.read_tx(&self.state).await?;
            let r = outline::outline(&mut tx, &args).await?;
            tx.commit().await?;
            Ok::<_, AppError>(r)
        }
        .await
        .map_err(from_app)?;
        fn count(s: &[crate::evidence::tools::OutlineSection]) -> usize {
            s.iter().map(|s| 1 + count(&s.children)).sum()
        }
        let n = count(&r.sections);
        Ok(Done {
            count: Some(n),
            evidence_ids: Vec::new(),
            summary: format!("{} in {}", plural(n, "section", "sections"), r.title),
            content: serde_json::to_value(&r).unwrap_or_default(),
        })
    }

    pub(super) async fn rag_query(&self, args: RagQueryArgs) -> Result<Done, ErrorBody> {
        let input = QueryInput {
            kb_ids: self.context.kb_ids.clone(),
            query: args.query,
            mode: args.mode.map(QueryMode::from).unwrap_or_default(),
            top_k: None,
            answer: false,
        };
        let r = rag::query::run(&self.state, &self.actor, input).await.map_err(from_app)?;
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
        if r.degraded {
            summary.push_str(" (degraded)");
        }
        let evidence_ids: Vec<Uuid> = references.iter().filter_map(|x| x.evidence_id).collect();
        let out = RagQueryOutput { degraded: r.degraded, degraded_reason: r.degraded_reason, references };
        Ok(Done {
            count: Some(out.references.len()),
            evidence_ids,
            content: serde_json::to_value(&out).unwrap_or_default(),
            summary,
        })
    }

    pub(super) async fn rag_open(&self, args: RagOpenArgs) -> Result<Done, ErrorBody> {
        if args.file_path.trim().is_empty() || args.file_path.len() > 1024 {
            return Err(failure("invalid_arguments", "filePath: LightRAG's file_path of a reference"));
        }
        let r = rag::query::open_reference(&self.state, &self.actor, &args.file_path, args.quote.as_deref())
            .await
            .map_err(from_app)?;
        let x = self.rag_reference(&r);
        if let Some(id) = x.evidence_id {
            self.remember(id, &x.citation_markdown);
        }
        Ok(Done {
            count: Some(1),
            evidence_ids: x.evidence_id.into_iter().collect(),
            summary: x.source_title.clone(),
            content: serde_json::to_value(&x).unwrap_or_default(),
        })
    }

    /// A reference as the model sees it (detached: with its absolute URL and locator).
    pub(super) fn rag_reference(&self, r: &rag::query::Reference) -> RagReference {
        let mut x = RagReference::from(r);
        let (citation, located) = self.locate(&x.source_title, &r.locator, &r.open_action, x.citation_markdown.clone());
        x.citation_markdown = citation;
        x.located = located;
        x
    }

    /// Whether a KB of the context (every visible KB when it names none) is bound to LightRAG.
    pub(super) async fn rag_bound(state: &AppState, actor: &Auth, context: &ContextRefs) -> sqlx::Result<bool> {
        let mut tx = actor.tx(state).await?;
        let kbs: Vec<Uuid> = if context.kb_ids.is_empty() {
            crate::kbs::queries::list(&mut tx, actor.user_id, actor.role.is_admin()).await?.into_iter().map(|k| k.id).collect()
        } else {
            context.kb_ids.clone()
        };
        let bound = !rag::binding::active_for(&mut tx, &kbs).await?.is_empty();
        tx.commit().await?;
        Ok(bound)
    }
}
