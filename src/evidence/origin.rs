//! Where a viewer link was opened from (`from=`): built into answer citation links by
//! `search::open::with_from`, read by the viewer for its breadcrumb.

use uuid::Uuid;

/// Where a viewer link was opened from, carried as `from=` so the viewer's breadcrumb leads
/// back there: `ai:<run id>`, an assistant answer. Any other value is no origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenedFrom {
    Answer(Uuid),
}

impl OpenedFrom {
    pub fn parse(v: &str) -> Option<OpenedFrom> {
        let id = v.trim().strip_prefix("ai:")?;
        Uuid::parse_str(id).ok().filter(|_| id.len() == 36).map(OpenedFrom::Answer)
    }

    /// The `from=` value.
    pub fn param(self) -> String {
        match self {
            OpenedFrom::Answer(run) => format!("ai:{run}"),
        }
    }

    /// The page the breadcrumb returns to.
    pub fn back_url(self) -> String {
        match self {
            OpenedFrom::Answer(run) => format!("/ai/runs/{run}"),
        }
    }
}
