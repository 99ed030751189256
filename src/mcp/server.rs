//! The MCP server handler: one per request (stateless), sharing the app state and the rate
//! limit. It reads the caller the guard authenticated from the request's parts.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, Implementation, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
        ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
};
use serde_json::json;

use super::{caller::Caller, limits::RateLimit, resources, tools};
use crate::state::AppState;

/// What every request's handler shares.
pub struct Shared {
    pub state: AppState,
    pub limit: RateLimit,
}

impl Shared {
    pub fn new(state: AppState) -> Self {
        let limit = RateLimit::new(state.config.mcp_rate_limit_per_minute);
        Shared { state, limit }
    }
}

#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

impl McpServer {
    pub fn new(shared: Arc<Shared>) -> Self {
        McpServer { shared }
    }
}

const INSTRUCTIONS: &str = "MNote searches the team's documents (PDF, DOCX, Markdown, images) and returns located \
    evidence. Answer from the passages the tools return and cite each one with its citationMarkdown link exactly as \
    given: the link opens the document at the passage, highlighted. Never invent a page, line or URL.";

fn caller(ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", Some(json!({"code": "unauthorized"}))))
}

/// A protocol error carrying our stable code (for requests that have no tool result).
pub fn protocol_error(code: &str, message: String) -> ErrorData {
    let data = Some(json!({"code": code}));
    match code {
        "not_found" => ErrorData::resource_not_found(message, data),
        "invalid_input" => ErrorData::invalid_params(message, data),
        _ => ErrorData::internal_error(message, data),
    }
}

impl McpServer {
    /// One request from the caller's budget (every list, call and read counts); a refusal
    /// that is not a tool call is a protocol error carrying `rate_limited`.
    fn take(&self, caller: &Caller) -> Result<(), ErrorData> {
        self.shared.limit.take(&caller.limit_key).map_err(|wait| {
            ErrorData::internal_error(
                format!("too many MCP requests; try again in {wait} seconds"),
                Some(json!({"code": "rate_limited", "retryAfterSecs": wait})),
            )
        })
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("mnote", env!("CARGO_PKG_VERSION")).with_title("MNote Evidence Server"))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&ctx)?;
        self.take(&caller)?;
        Ok(ListToolsResult::with_all_items(tools::list(&self.shared.state, &caller).await))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&ctx)?;
        if let Err(wait) = self.shared.limit.take(&caller.limit_key) {
            let mut r = tools::error_result("rate_limited", &format!("too many MCP requests; try again in {wait} seconds"));
            if let Some(s) = r.structured_content.as_mut() {
                s["error"]["retryAfterSecs"] = json!(wait);
            }
            return Ok(r.into());
        }
        Ok(tools::call(&self.shared.state, &caller, &request.name, request.arguments).await.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = caller(&ctx)?;
        self.take(&caller)?;
        if caller.run.is_some() {
            // A run's token reaches the run's tools only.
            return Ok(ListResourcesResult::with_all_items(Vec::new()));
        }
        let items =
            resources::list(&self.shared.state, &caller).await.map_err(|e| protocol_error(e.code(), e.public_message()))?;
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = caller(&ctx)?;
        self.take(&caller)?;
        if caller.run.is_some() {
            return Err(protocol_error("not_found", "a run's token reads no resources".into()));
        }
        let r = resources::read(&self.shared.state, &caller, &request.uri)
            .await
            .map_err(|e| protocol_error(e.code(), e.public_message()))?;
        Ok(r.into())
    }
}
