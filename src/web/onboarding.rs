//! What the getting-started checklist remembers of this session (`home::start` reads it; the
//! search page marks a search).

use tower_sessions::Session;

use crate::error::AppResult;

/// Session keys of the getting-started checklist.
pub const SEARCHED_KEY: &str = "checklist_searched";
pub const CHECKLIST_HIDDEN_KEY: &str = "checklist_hidden";

/// Marks the search step done for this session (the dashboard's box, the search page); once:
/// a session already marked is not written again on every search.
pub async fn mark_searched(session: &Session) -> AppResult<()> {
    if session.get::<bool>(SEARCHED_KEY).await.map_err(crate::auth::session_err)? == Some(true) {
        return Ok(());
    }
    session.insert(SEARCHED_KEY, true).await.map_err(crate::auth::session_err)
}
