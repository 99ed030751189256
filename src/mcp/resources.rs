//! MCP resources: each knowledge base the caller can read is a resource (`mnote://kb/<id>`)
//! whose content lists its sources (title, path, kind, status, the viewer URL), as JSON.

use rmcp::model::{ReadResourceResult, Resource, ResourceContents};
use serde::Serialize;
use uuid::Uuid;

use super::{caller::Caller, tools};
use crate::{error::AppError, search::open, state::AppState};

/// The content of a KB's resource.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KbResource {
    pub schema: &'static str,
    pub kb: tools::KbSummary,
    pub sources: Vec<SourceEntry>,
}

/// One source of a KB's resource.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceEntry {
    pub id: Uuid,
    pub title: String,
    pub resource_path: String,
    pub kind: String,
    /// `pending|parsing|indexed|failed|stale`; only indexed, non-stale sources are searched.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The viewer of the whole document (absolute).
    pub url: String,
}

pub const SCHEMA: &str = "mnote.mcp_kb_resource.v1";

pub async fn list(state: &AppState, caller: &Caller) -> Result<Vec<Resource>, AppError> {
    let kbs = tools::knowledge_bases(state, caller).await?;
    Ok(kbs
        .knowledge_bases
        .into_iter()
        .map(|k| {
            let about = if k.description.is_empty() { String::new() } else { format!("{} — ", k.description) };
            Resource::new(k.resource_uri, k.name.clone())
                .with_title(k.name)
                .with_description(format!("{about}knowledge base, {} sources", k.source_count))
                .with_mime_type("application/json")
        })
        .collect())
}

/// `mnote://kb/<id>` of a KB the caller can read; anything else is `not_found`.
pub async fn read(state: &AppState, caller: &Caller, uri: &str) -> Result<ReadResourceResult, AppError> {
    let id = uri.strip_prefix("mnote://kb/").and_then(|s| Uuid::try_parse(s).ok()).ok_or(AppError::NotFound)?;
    let auth = &caller.auth;
    let mut tx = auth.tx(state).await?;
    let kb = crate::kbs::readable(&mut tx, auth, id).await?;
    let sources = crate::sources::queries::list(&mut tx, id).await?;
    let bound = crate::rag::binding::active(&mut tx, id).await?.is_some();
    tx.commit().await?;
    let base = caller.citation_base.trim_end_matches('/');
    let sources = sources
        .into_iter()
        .map(|s| {
            let action = open::open_resource(s.id, state.config.public_url.as_deref());
            SourceEntry {
                url: action.absolute_url.unwrap_or_else(|| format!("{base}{}", action.url)),
                title: s.file_name().to_string(),
                id: s.id,
                resource_path: s.resource_path,
                kind: s.kind.to_string(),
                status: s.status.to_string(),
                error_code: s.error_code,
            }
        })
        .collect();
    let body = KbResource {
        schema: SCHEMA,
        kb: tools::KbSummary {
            id: kb.id,
            resource_uri: tools::kb_uri(kb.id),
            name: kb.name,
            description: kb.description,
            visibility: kb.visibility,
            source_count: kb.source_count,
            knowledge_rag: bound,
        },
        sources,
    };
    let text = serde_json::to_string_pretty(&body).map_err(|e| AppError::Internal(e.into()))?;
    Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type("application/json")]))
}
