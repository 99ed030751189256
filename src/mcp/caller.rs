//! Who calls `/mcp`: what the bearer-token guard (`http.rs`) learns and the handlers read.

use super::run_token::RunScope;
use crate::auth::Auth;

/// Who calls, put in the request's extensions by the guard of `http.rs` and read by the
/// handler (rmcp passes the request's `http::request::Parts` to it).
#[derive(Clone, Debug)]
pub struct Caller {
    pub auth: Auth,
    /// The key of the rate limit: the member (tenant and user), so all of one person's tokens
    /// share one budget.
    pub limit_key: String,
    /// What citation URLs start with: `MNOTE_PUBLIC_URL`, else the address the server listens on.
    pub citation_base: String,
    /// A run-scoped token's run (`run_token`): the run's tools only, journaled into it.
    pub run: Option<RunScope>,
}
