//! Where a block of an e-mail sits when it comes from an attachment: the attachment's name and
//! kind, and the names from the top message down to it (attachments of forwarded messages). The
//! block's other locator fields (page and box, lines, cells, slide) are the attachment's own.

use serde::{Deserialize, Serialize};

use super::SourceKind;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentPlace {
    /// The attachment's file name (the innermost one when attachments nest).
    pub name: String,
    /// Its kind as its name says (`null`: a kind the service does not read; the attachment is
    /// only listed).
    pub kind: Option<SourceKind>,
    /// 1-based position among its message's attachments.
    pub position: u32,
    /// The attachment names from the top message down to this one (`["fwd.eml", "plan.md"]`).
    pub path: Vec<String>,
}
