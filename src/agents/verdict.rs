//! Answerability: the receipt's `verdict` — whether the evidence answers the question
//! (`answered`), only partly (`partial`), or not at all (`not_found`).
//!
//! Who judges ([`Basis`]):
//! - the built-in agent, from its passages (`builtin::answerable`): the question's key terms in
//!   the passage quoted, the kind of thing asked for (an amount, a date, a name) in the
//!   sentence, the search's own scores;
//! - a language model, which is told to start its answer with a marker
//!   ([`NOT_FOUND_MARKER`], [`PARTIAL_MARKER`]) when the evidence does not (fully) answer;
//! - nobody (an ACP agent): the quote check alone.
//!
//! Whatever the agent claims, the quote check caps it ([`decide`]): no verified citation is
//! never `answered`, some unverified ones make it at best `partial`.

/// What a model writes first when the evidence does not answer the question.
pub const NOT_FOUND_MARKER: &str = "[not-found]";
/// What a model writes first when the evidence answers only part of the question.
pub const PARTIAL_MARKER: &str = "[partial]";

/// Whether the evidence answers the question: the run's own value type (the journal's
/// `run.completed` carries it), decided here.
pub use crate::journal::Verdict;
/// The receipt's value types (the journal stores the receipt as its type).
pub use crate::journal::receipt::{AnswerKind, Basis, VerdictReason};

/// What an agent says of its own answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The built-in agent's judgement from its passages.
    Judged(Assessment),
    /// A model's answer, with what it said about the evidence.
    Model(ModelSaid),
    /// No claim (an ACP agent, a cancelled or failed run).
    None,
}

/// What a model said about the evidence (its answer's marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelSaid {
    Answer,
    Partial,
    NotFound,
}

/// A judgement of the evidence (the built-in agent's, or the final one).
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub verdict: Verdict,
    pub reason: VerdictReason,
    /// `partial`: the kind of thing asked for that no passage states.
    pub missing: Option<AnswerKind>,
    /// Key terms of the question in no quoted passage.
    pub missing_terms: Vec<String>,
}

impl Assessment {
    pub fn new(verdict: Verdict, reason: VerdictReason) -> Self {
        Assessment { verdict, reason, missing: None, missing_terms: Vec::new() }
    }
}

/// The final verdict and who judged it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub basis: Basis,
    pub assessment: Assessment,
}

/// The verdict the quote check allows: every citation verified → `answered`, some →
/// `partial`, none (or no citation) → `not_found`.
fn quote_cap(total: usize, verified: usize) -> Assessment {
    let (v, r) = match (total, verified) {
        (0, _) => (Verdict::NotFound, VerdictReason::NoCitation),
        (t, v) if v >= t => (Verdict::Answered, VerdictReason::QuotesVerified),
        (_, 0) => (Verdict::NotFound, VerdictReason::NoVerifiedQuote),
        _ => (Verdict::Partial, VerdictReason::SomeQuotesUnverified),
    };
    Assessment::new(v, r)
}

/// The verdict of an answer with `total` citations of which `verified` held, given what its
/// agent claimed: the claim, capped by the quote check.
pub fn decide(claim: Claim, total: usize, verified: usize) -> Decision {
    let cap = quote_cap(total, verified);
    let (basis, own) = match claim {
        Claim::None => return Decision { basis: Basis::Quotes, assessment: cap },
        Claim::Judged(a) => (Basis::Evidence, a),
        Claim::Model(said) => {
            let own = match said {
                ModelSaid::NotFound => Assessment::new(Verdict::NotFound, VerdictReason::ModelSaidNotFound),
                ModelSaid::Partial => Assessment::new(Verdict::Partial, VerdictReason::ModelSaidPartial),
                ModelSaid::Answer => Assessment::new(Verdict::Answered, VerdictReason::QuotesVerified),
            };
            (Basis::Model, own)
        }
    };
    let assessment = if own.verdict <= cap.verdict { own } else { cap };
    Decision { basis, assessment }
}

/// A model's answer without its marker, and what the marker said. A marker counts at the
/// start of a line (case, spaces, `_` for `-` forgiven); `[not-found]` wins over `[partial]`.
pub fn model_marker(answer: &str) -> (String, ModelSaid) {
    let mut said = ModelSaid::Answer;
    let mut kept = String::with_capacity(answer.len());
    for line in answer.split_inclusive('\n') {
        let start = line.trim_start();
        match MARKERS.iter().find_map(|(m, what)| strip_marker(start, m).map(|after| (after, *what))) {
            Some((after, what)) => {
                if said != ModelSaid::NotFound {
                    said = what;
                }
                kept.push_str(after);
            }
            None => kept.push_str(line),
        }
    }
    if said == ModelSaid::Answer { (answer.to_string(), said) } else { (kept.trim_start().to_string(), said) }
}

/// The markers a model may start its answer with, and what each says.
pub const MARKERS: [(&str, ModelSaid); 2] = [(NOT_FOUND_MARKER, ModelSaid::NotFound), (PARTIAL_MARKER, ModelSaid::Partial)];

fn fold(c: char) -> char {
    match c {
        '_' | ' ' => '-',
        c => c.to_ascii_lowercase(),
    }
}

/// `text` after `marker` when it starts with it (case, `_`/space for `-` forgiven).
pub fn strip_marker<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let mut chars = text.char_indices();
    for m in marker.chars() {
        let (_, c) = chars.next()?;
        if fold(c) != m {
            return None;
        }
    }
    let end = chars.next().map(|(i, _)| i).unwrap_or(text.len());
    Some(text[end..].trim_start_matches([' ', ':', '：']))
}

/// Whether `text` (shorter than `marker`) may still grow into it.
pub fn may_become(text: &str, marker: &str) -> bool {
    text.chars().count() < marker.chars().count() && text.chars().zip(marker.chars()).all(|(c, m)| fold(c) == m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quote_check_caps_every_claim() {
        let judged = |v| Claim::Judged(Assessment::new(v, VerdictReason::AnswerInPassages));
        assert_eq!(decide(judged(Verdict::Answered), 2, 2).assessment.verdict, Verdict::Answered);
        assert_eq!(decide(judged(Verdict::Answered), 2, 1).assessment.verdict, Verdict::Partial);
        assert_eq!(decide(judged(Verdict::NotFound), 3, 3).assessment.verdict, Verdict::NotFound, "closest passages");
        assert_eq!(decide(judged(Verdict::Partial), 3, 3).basis, Basis::Evidence);

        let m = decide(Claim::Model(ModelSaid::Answer), 2, 0);
        assert_eq!(
            (m.basis, m.assessment.verdict, m.assessment.reason),
            (Basis::Model, Verdict::NotFound, VerdictReason::NoVerifiedQuote)
        );
        let m = decide(Claim::Model(ModelSaid::Answer), 0, 0);
        assert_eq!((m.assessment.verdict, m.assessment.reason), (Verdict::NotFound, VerdictReason::NoCitation));
        let m = decide(Claim::Model(ModelSaid::NotFound), 2, 2);
        assert_eq!((m.assessment.verdict, m.assessment.reason), (Verdict::NotFound, VerdictReason::ModelSaidNotFound));
        assert_eq!(decide(Claim::Model(ModelSaid::Partial), 1, 1).assessment.verdict, Verdict::Partial);

        let q = decide(Claim::None, 2, 2);
        assert_eq!((q.basis, q.assessment.verdict), (Basis::Quotes, Verdict::Answered));
        assert_eq!(decide(Claim::None, 3, 1).assessment.verdict, Verdict::Partial);
        assert_eq!(decide(Claim::None, 3, 0).assessment.verdict, Verdict::NotFound);
    }

    #[test]
    fn a_models_marker_is_read_and_left_out_of_the_answer() {
        assert_eq!(
            model_marker("[not-found] The documents do not say."),
            ("The documents do not say.".into(), ModelSaid::NotFound)
        );
        assert_eq!(model_marker("  [NOT_FOUND]\n\nNothing here."), ("Nothing here.".into(), ModelSaid::NotFound));
        assert_eq!(
            model_marker("[Partial]: Only the price is given [evidence:x]."),
            ("Only the price is given [evidence:x].".into(), ModelSaid::Partial)
        );
        assert_eq!(
            model_marker("The rotation is weekly [evidence:x]."),
            ("The rotation is weekly [evidence:x].".into(), ModelSaid::Answer)
        );
        // Alone on a later line it still counts; inside a sentence it is text.
        assert_eq!(model_marker("I searched.\n[not-found]\n").1, ModelSaid::NotFound);
        assert_eq!(model_marker("The tag [not-found] appears in logs.").1, ModelSaid::Answer);
    }
}
