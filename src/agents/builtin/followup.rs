//! When a follow-up depends on the previous turn (no model: a rule on the words).
//!
//! A follow-up is searched on its own — a new topic — unless it
//! 1. refers back with an anaphoric pronoun or demonstrative: English *it, its, this, that,
//!    they, them, their, those, these, he, she, him, his, her, the same*, as whole words;
//!    Chinese 它, 它们, 这个, 那个, 这些, 那些, 他, 她, 其, 该, 上述, 同样 anywhere (not
//!    inside a word where the character means something else: 其他, 其实, 尤其, 应该, …); or
//! 2. starts with a continuation cue: *and, what about, how about, also*; 那, 还有, 那么; or
//!    asks for more of the same: *tell me more, go on, elaborate, more detail*; 多说, 再说,
//!    展开说, 继续; or
//! 3. is elliptical: at most [`MAX_ELLIPTICAL_WORDS`] content word after stop and question
//!    words ("why?", "managers?", "价格呢？").
//!
//! Why one content word: a question with two or more ("Python errors?", "出差 住宿 上限") names
//! a subject and what is asked of it, so it reads on its own; one word names at most a facet
//! ("and for managers?" without the cue is "managers"), whose subject is the previous turn.
//! A wrong "depends" costs what every follow-up cost before (the previous question searched
//! along); a wrong "new topic" loses the context, so the rule errs towards depending.

use super::terms::content_words;

/// A follow-up with at most this many content words is elliptical.
pub const MAX_ELLIPTICAL_WORDS: usize = 1;

const EN_BACK: &[&str] =
    &["it", "its", "this", "that", "they", "them", "their", "those", "these", "he", "she", "him", "his", "her"];
const EN_CUES: &[&[&str]] = &[&["and"], &["what", "about"], &["how", "about"], &["also"]];
const ZH_BACK: &[&str] = &["它", "这个", "那个", "这些", "那些", "他", "她", "其", "该", "上述", "同样"];
const ZH_CUES: &[&str] = &["那", "还有", "那么"];
/// Asking for more of the previous answer (anywhere in the follow-up).
const EN_MORE: &[&[&str]] = &[&["tell", "me", "more"], &["go", "on"], &["elaborate"], &["more", "detail"], &["more", "details"]];
const ZH_MORE: &[&str] = &["多说", "再说", "展开说", "继续"];
/// Words holding a character of [`ZH_BACK`] that is no pronoun there.
const ZH_NOT_BACK: &[&str] =
    &["其他", "其它", "其实", "其次", "尤其", "极其", "与其", "及其", "应该", "不该", "本该", "活该", "该不该"];

/// How a follow-up is searched: `query` is what the built-in agent plans its searches from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub query: String,
    /// The previous question was searched along (the follow-up depends on it).
    pub with_previous: bool,
}

/// Does `question` depend on the turn before it? (The rule above.)
pub fn depends_on_previous(question: &str) -> bool {
    let q = question.trim();
    let lower = q.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let en_back = words.iter().any(|w| EN_BACK.contains(w)) || words.windows(2).any(|w| w == ["the", "same"]);
    let en_cue = EN_CUES.iter().any(|cue| words.starts_with(cue)) && q.chars().next().is_some_and(|c| c.is_ascii());
    let mut zh = q.to_string();
    for w in ZH_NOT_BACK {
        zh = zh.replace(w, "");
    }
    let zh_back = ZH_BACK.iter().any(|w| zh.contains(w));
    let zh_cue = ZH_CUES.iter().any(|c| q.starts_with(c)) && !q.starts_with("那不勒斯");
    let more = EN_MORE.iter().any(|m| words.windows(m.len()).any(|w| w == *m)) || ZH_MORE.iter().any(|m| q.contains(m));
    en_back || en_cue || zh_back || zh_cue || more || content_words(q).len() <= MAX_ELLIPTICAL_WORDS
}

/// The query for `question` after `previous` (the conversation's previous question, if any):
/// the question alone on a new topic, the two together when it depends on the previous turn.
pub fn asked(question: &str, previous: Option<&str>) -> Asked {
    let question = question.trim();
    match previous.map(str::trim).filter(|p| !p.is_empty()) {
        Some(prev) if depends_on_previous(question) => Asked { query: format!("{question} {prev}"), with_previous: true },
        _ => Asked { query: question.to_string(), with_previous: false },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_topic_is_searched_on_its_own() {
        let prev = Some("What is the Zen of Python's rule about errors?");
        for q in [
            "出差住宿每晚的上限是多少？",
            "What is the reimbursement limit for hotel nights?",
            "Python errors?",
            "其他城市的出差补贴标准是什么？",
            "我应该怎么申请报销？",
            "那不勒斯分公司的地址在哪里？",
            "请详细说明报销流程的审批步骤。",
            "Andrew's travel budget for Lyon?",
        ] {
            assert!(!depends_on_previous(q), "{q}");
            assert_eq!(asked(q, prev), Asked { query: q.to_string(), with_previous: false }, "{q}");
        }
        let prev = Some("出差住宿每晚的上限是多少？");
        assert!(!asked("What is the Zen of Python's rule about errors?", prev).with_previous);
    }

    #[test]
    fn a_follow_up_that_refers_back_is_searched_with_the_previous_question() {
        let prev = "出差住宿每晚的上限是多少？";
        for q in [
            "它的上限是多少？",
            "这个标准适用于经理吗？",
            "那经理呢？",
            "还有餐补标准吗？",
            "那么国外出差的标准？",
            "上述规定何时生效？",
            "经理同样适用吗？",
            "该政策何时生效？",
            "为什么？",
            "价格呢？",
            "再多说一点。",
        ] {
            assert!(depends_on_previous(q), "{q}");
            assert_eq!(asked(q, Some(prev)), Asked { query: format!("{q} {prev}"), with_previous: true }, "{q}");
        }
        let prev = "What is the hotel limit per night?";
        for q in [
            "and what about its limit?",
            "And for managers?",
            "What about managers in Lyon?",
            "How about travel abroad?",
            "Also for contractors?",
            "Tell me more about that.",
            "Does this apply to managers?",
            "Who approves them?",
            "Is the same true for contractors?",
            "why?",
            "managers?",
            "Tell me more, please.",
            "Go on.",
        ] {
            assert!(depends_on_previous(q), "{q}");
            assert!(asked(q, Some(prev)).with_previous, "{q}");
            assert_eq!(asked(q, Some(prev)).query, format!("{q} {prev}"));
        }
    }

    #[test]
    fn without_a_previous_question_the_question_is_searched_alone() {
        assert_eq!(asked("  它的上限是多少？ ", None), Asked { query: "它的上限是多少？".into(), with_previous: false });
        assert!(!asked("why?", Some("  ")).with_previous);
    }
}
