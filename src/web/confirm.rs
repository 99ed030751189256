//! The confirmation page: the question a no-JavaScript click on a destructive button leads to
//! (the dialog of `static/ui.js` shows the same text). Posting it sends `confirm=yes`.

use askama::Template;
use serde::Deserialize;

use super::PageCtx;

/// `templates/confirm.html`: a title, the consequences (one paragraph each), the button that
/// does it and the way back.
#[derive(Template)]
#[template(path = "confirm.html")]
pub struct ConfirmPage {
    pub ctx: PageCtx,
    pub title: String,
    pub lines: Vec<String>,
    pub action: String,
    pub ok_label: String,
    pub cancel_url: String,
}

/// A form action that asks first: `confirm=yes` when the question was answered.
#[derive(Debug, Default, Deserialize)]
pub struct ConfirmForm {
    #[serde(default)]
    confirm: Option<String>,
}

impl ConfirmForm {
    pub fn confirmed(&self) -> bool {
        self.confirm.as_deref() == Some("yes")
    }
}
