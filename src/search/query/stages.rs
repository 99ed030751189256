//! Where a search's time goes, stage by stage, for `mnote bench search` (its regression
//! guard). Process-wide counters: a stage adds its elapsed time when it ends (two
//! `Instant::now()` and one relaxed atomic add, tens of nanoseconds per stage). The benchmark
//! reads them around each query it runs alone; under concurrent load they mix requests.

use std::{
    sync::atomic::{AtomicU64, Ordering::Relaxed},
    time::Instant,
};

/// The stages inside the search core (the benchmark times begin, commit and JSON itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The query text into terms (`analyze::query_terms`).
    Analysis,
    /// The KB statistics read (SQL) and the mirror snapshot.
    MirrorLookup,
    /// BM25 over the mirror's postings, the best candidates.
    Ranking,
    /// The candidates' rows, every filter re-checked (SQL).
    HydrationSql,
    /// Quotes, highlights, open links and citations of the returned hits.
    Quotes,
}

pub const STAGES: [Stage; 5] = [Stage::Analysis, Stage::MirrorLookup, Stage::Ranking, Stage::HydrationSql, Stage::Quotes];

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Analysis => "analysis",
            Stage::MirrorLookup => "mirror lookup",
            Stage::Ranking => "ranking",
            Stage::HydrationSql => "hydration SQL",
            Stage::Quotes => "quotes",
        }
    }
}

static NANOS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// Add the time since `started` to `stage`.
pub fn record(stage: Stage, started: Instant) {
    NANOS[stage as usize].fetch_add(started.elapsed().as_nanos() as u64, Relaxed);
}

/// Nanoseconds spent in each stage (in [`STAGES`] order) since the process started.
pub fn totals() -> [u64; 5] {
    std::array::from_fn(|i| NANOS[i].load(Relaxed))
}
