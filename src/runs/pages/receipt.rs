//! The receipt of an ended run as its result block shows it: the citations' checks, what was
//! checked in words ("2 of 2 quotes found in their passages"), and the verdict — `not_found`
//! says nothing answers and folds the closest passages below, `partial` says what is missing,
//! and only `answered` gets the green check.

use crate::{
    journal::{
        Receipt, Verdict,
        receipt::{AnswerKind, Basis, VerdictReason},
    },
    web::PageCtx,
};

/// The verdict as the result block shows it.
pub struct VerdictView {
    /// `answered`, `partial`, `not_found`, or `none` (no verdict: a chat without evidence
    /// tools, or a receipt from before verdicts).
    pub state: &'static str,
    /// `not_found`: "Nothing in these knowledge bases answers this."; `partial`: "Partly
    /// answered"; else empty.
    pub headline: String,
    /// `partial`: what is missing.
    pub detail: String,
    /// `not_found` with citations: the answer (the closest passages) folded under
    /// "Closest passages (not an answer)".
    pub fold: bool,
    /// The receipt line: what was checked, in words.
    pub checked: String,
    /// The receipt line's class: `all` (the green check: answered, every quote found), `plain`
    /// (every quote found, but they do not answer), `some` (not every quote found), `none`
    /// (no citations).
    pub checked_class: &'static str,
}

fn missing_words(ctx: &PageCtx, r: &Receipt) -> String {
    if let Some(k) = r.missing {
        let key = match k {
            AnswerKind::Number => "number",
            AnswerKind::Date => "date",
            AnswerKind::Person => "person",
        };
        return ctx.tk("ai.verdict.missing", key);
    }
    match r.verdict_reason {
        Some(VerdictReason::ModelSaidPartial) => ctx.t("ai.verdict.model_partial"),
        Some(VerdictReason::SomeQuotesUnverified) => ctx.t("ai.verdict.some_unverified"),
        _ if !r.missing_terms.is_empty() => {
            let sep = ctx.t("ai.verdict.term_sep");
            ctx.t("ai.verdict.missing_terms").replace("{terms}", &r.missing_terms.join(&sep))
        }
        _ => ctx.t("ai.verdict.part_only"),
    }
}

/// What was checked, in words: "2 of 2 quotes found in their passages", and who judged.
fn checked_words(ctx: &PageCtx, r: &Receipt) -> String {
    if r.total == 0 {
        return ctx.t("ai.no_citations");
    }
    let n = |k: &str, v: usize| k.replace(&format!("{{{}}}", "n"), &v.to_string());
    let mut s = n(&ctx.t("ai.checked"), r.verified).replace("{m}", &r.total.to_string());
    if let Some(found) = Some(r.quotes_found).filter(|f| *f < r.verified) {
        s.push_str(
            &ctx.t("ai.checked_by_terms").replace("{k}", &found.to_string()).replace("{j}", &(r.verified - found).to_string()),
        );
    }
    if let Some(b) = r.verdict_basis {
        let key = match b {
            Basis::Evidence => "evidence",
            Basis::Model => "model",
            Basis::Quotes => "quotes",
        };
        s.push_str(&ctx.t("ai.sep"));
        s.push_str(&ctx.tk("ai.judged_by", key));
    }
    s
}

pub(super) fn verdict_view(ctx: &PageCtx, r: Option<&Receipt>) -> VerdictView {
    let empty = Receipt::empty();
    let r = r.unwrap_or(&empty);
    let checked = checked_words(ctx, r);
    let all = r.total > 0 && r.verified == r.total;
    let checked_class = match (r.total, r.verdict) {
        (0, _) => "none",
        (_, Some(Verdict::Answered) | None) if all => "all",
        _ if all => "plain",
        _ => "some",
    };
    let (state, headline, detail) = match r.verdict {
        Some(Verdict::NotFound) => ("not_found", ctx.t("ai.verdict.not_found"), String::new()),
        Some(Verdict::Partial) => ("partial", ctx.t("ai.verdict.partial"), missing_words(ctx, r)),
        Some(Verdict::Answered) => ("answered", String::new(), String::new()),
        None => ("none", String::new(), String::new()),
    };
    VerdictView { state, headline, detail, fold: state == "not_found" && r.total > 0, checked, checked_class }
}
