//! What a LightRAG really holds, and the drift from what we track: a server restarted
//! without its storage (or a new one behind the same URL) answers `/health` like before but
//! holds none of our documents. The listing is bounded ([`MAX_PAGES`] pages of 200 of
//! `/documents/paginated`) and cached per binding for `MNOTE_RAG_DRIFT_TTL_SECS`, so status
//! pages and sync passes do not list a large server on every call.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::client::{LightRag, RagError};

/// At most this many pages of 200 documents are listed (10,000 documents); past it the
/// drift is reported as not checked rather than guessed.
pub const MAX_PAGES: usize = 50;

/// One listing of a server's documents.
#[derive(Debug)]
pub struct Held {
    pub ids: HashSet<String>,
    /// When the listing started: a document seen processed before this and absent is lost.
    pub listed_at: DateTime<Utc>,
    /// Every page was read (false past [`MAX_PAGES`]).
    pub complete: bool,
}

impl Held {
    /// Whether a document we recorded (as held) at `recorded_at` is known lost: the listing
    /// is complete, began after we recorded it, and does not have it.
    pub fn lost(&self, doc_id: &str, recorded_at: DateTime<Utc>) -> bool {
        self.complete && recorded_at < self.listed_at && !self.ids.contains(doc_id)
    }
}

type Cache = HashMap<(Uuid, String), Arc<Held>>;

fn cache() -> &'static Mutex<Cache> {
    static C: OnceLock<Mutex<Cache>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// The documents `client` (binding `binding` at `url`) holds: the cached listing if it is
/// younger than `max_age`, else a new one (which replaces it).
pub async fn of(binding: Uuid, url: &str, client: &LightRag, max_age: Duration) -> Result<Arc<Held>, RagError> {
    let key = (binding, url.to_string());
    let fresh_after = Utc::now() - chrono::Duration::from_std(max_age).unwrap_or(chrono::Duration::zero());
    if let Some(h) = cache().lock().expect("held cache").get(&key).filter(|h| h.listed_at > fresh_after) {
        return Ok(h.clone());
    }
    let listed_at = Utc::now();
    let (docs, complete) = client.documents(MAX_PAGES).await?;
    let held = Arc::new(Held { ids: docs.into_iter().map(|d| d.id).collect(), listed_at, complete });
    let mut c = cache().lock().expect("held cache");
    // Bindings come and go: drop listings nobody refreshed for an hour.
    let stale = Utc::now() - chrono::Duration::hours(1);
    c.retain(|_, h| h.listed_at > stale);
    c.insert(key, held.clone());
    Ok(held)
}

/// At most this many documents absent from a listing are confirmed one by one.
pub const CONFIRM: usize = 10;

/// Of the documents a listing lacks (`(doc_id, track_id)`), those LightRAG really lost. A
/// listing paged by offset while documents come and go can skip one, so each is confirmed by
/// its track (`/documents/track_status/{id}`, which a wiped storage no longer knows), at most
/// [`CONFIRM`] of them: when every one of those is lost, the rest are taken as lost too (a
/// wiped storage); otherwise only the confirmed ones are.
pub async fn confirm_lost(client: &LightRag, candidates: &[(&str, &str)]) -> Result<HashSet<String>, RagError> {
    let mut lost = HashSet::new();
    for (doc, track) in candidates.iter().take(CONFIRM) {
        let t = client.track_status(track).await?;
        if !t.documents.iter().any(|d| d.id == *doc) {
            lost.insert(doc.to_string());
        }
    }
    if lost.len() == candidates.len().min(CONFIRM) {
        lost.extend(candidates.iter().skip(CONFIRM).map(|(d, _)| d.to_string()));
    }
    Ok(lost)
}

/// The drift of a binding, as the status API and the KB page show it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    /// Documents we sent (and saw LightRAG process) that it no longer holds.
    pub missing: usize,
    /// How many documents the server holds (every KB's and client's on it).
    pub held: usize,
    pub checked_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_documents_recorded_before_a_complete_listing_are_lost() {
        let t = Utc::now();
        let h = Held { ids: ["doc-a".to_string()].into(), listed_at: t, complete: true };
        let before = t - chrono::Duration::seconds(5);
        assert!(!h.lost("doc-a", before));
        assert!(h.lost("doc-b", before));
        assert!(!h.lost("doc-b", t + chrono::Duration::seconds(1)), "processed after the listing began: unknown");
        let partial = Held { complete: false, ..h };
        assert!(!partial.lost("doc-b", before), "a truncated listing proves nothing");
    }
}
