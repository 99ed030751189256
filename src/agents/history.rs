//! A conversation's earlier turns as a run gets them: the session's completed runs before it
//! (question + final answer, read from their rows; nothing new in the journal), bounded by
//! turns and characters. The OpenAI-compatible runtime sends them as earlier user/assistant
//! messages, the ACP runtime writes them into the prompt, the built-in agent searches the
//! previous question along with a follow-up that depends on it (`builtin::followup`).

use super::{Turn, TurnRole};

/// At most this many earlier question/answer pairs.
pub const MAX_TURNS: usize = 6;
/// At most this many characters of earlier turns in all.
pub const MAX_CHARS: usize = 12_000;
/// One earlier answer is cut to this many characters.
pub const ANSWER_CHARS: usize = 3_000;
/// One earlier question is cut to this many characters.
const QUESTION_CHARS: usize = 1_000;
/// How many completed runs are read to choose from (a regenerated answer repeats a question).
pub const READ_LIMIT: i64 = 24;

fn cut(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max { s.to_string() } else { format!("{}…", s.chars().take(max).collect::<String>()) }
}

/// The earlier turns (oldest first) from `(question, answer)` pairs given newest first; an
/// answer regenerated for the same question counts once (the newest). The budget keeps the
/// newest turns.
pub fn prior_turns(newest_first: &[(String, String)]) -> Vec<Turn> {
    let mut kept: Vec<(String, String)> = Vec::new();
    let mut used = 0;
    for (q, a) in newest_first {
        if kept.iter().any(|(k, _)| k.trim() == q.trim()) {
            continue;
        }
        let (q, a) = (cut(q, QUESTION_CHARS), cut(a, ANSWER_CHARS));
        let size = q.chars().count() + a.chars().count();
        if kept.len() >= MAX_TURNS || used + size > MAX_CHARS {
            break;
        }
        used += size;
        kept.push((q, a));
    }
    kept.into_iter()
        .rev()
        .flat_map(|(q, a)| [Turn { role: TurnRole::User, text: q }, Turn { role: TurnRole::Assistant, text: a }])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(q: &str, a: &str) -> (String, String) {
        (q.to_string(), a.to_string())
    }

    #[test]
    fn turns_come_oldest_first_bounded_and_without_regenerated_repeats() {
        let t = prior_turns(&[pair("second?", "two"), pair("first?", "one (regenerated)"), pair("first?", "one")]);
        let texts: Vec<&str> = t.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["first?", "one (regenerated)", "second?", "two"]);
        assert_eq!(t[0].role, TurnRole::User);
        assert_eq!(t[1].role, TurnRole::Assistant);
        let many: Vec<(String, String)> = (0..20).map(|i| pair(&format!("q{i}"), "a")).collect();
        let t = prior_turns(&many);
        assert_eq!(t.len(), 2 * MAX_TURNS);
        assert_eq!(t[0].text, format!("q{}", MAX_TURNS - 1), "the newest turns are kept");
        let long = "x".repeat(10 * ANSWER_CHARS);
        let t = prior_turns(&[pair("a", &long), pair("b", &long), pair("c", &long), pair("d", &long), pair("e", &long)]);
        let chars: usize = t.iter().map(|t| t.text.chars().count()).sum();
        assert!(chars <= MAX_CHARS + 10, "{chars}");
        assert!(t.iter().all(|t| t.text.chars().count() <= ANSWER_CHARS + 1));
        assert!(prior_turns(&[]).is_empty());
    }
}
