//! The terms of a question as the built-in agent weighs them: the search analyzer's terms
//! without the words that ask (question words, and the words the segmenter glued to one), and
//! whether a Chinese term is written in a passage however the segmenter cut it there.

use std::collections::HashSet;

use crate::search::analyze;

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x3040..=0x30FF | 0xAC00..=0xD7AF)
}

/// Words that ask rather than say what is asked about (besides the analyzer's stop words).
const QUESTION_WORDS: &[&str] = &[
    "how",
    "what",
    "why",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "whose",
    "does",
    "do",
    "did",
    "is",
    "are",
    "can",
    "could",
    "should",
    "would",
    "tell",
    "explain",
    "describe",
    "please",
    "say",
    "says",
    "said",
    "mention",
    "mentions",
    "know",
    "give",
    "show",
    "find",
    "list",
    "according",
    "anything",
    "something",
    "如何",
    "怎么",
    "怎样",
    "怎么样",
    "什么",
    "为什么",
    "为何",
    "哪些",
    "哪个",
    "哪里",
    "哪儿",
    "哪",
    "哪一",
    "哪年",
    "哪一年",
    "何时",
    "时候",
    "哪位",
    "哪家",
    "哪种",
    "哪条",
    "哪国",
    "哪座",
    "哪支",
    "啥",
    "是否",
    "能否",
    "可否",
    "请问",
    "请",
    "告诉",
    "我",
    "我们",
    "你",
    "你们",
    "一下",
    "里",
    "用",
    "关于",
    "有没有",
    "有",
    "吗",
    "呢",
    "啊",
    "呀",
    "介绍",
    "解释",
    "讲讲",
    "说说",
    "多少",
    "几",
    "能",
    "会",
    "要",
    "谁",
    "是",
    "的",
    "了",
    "在",
    "被",
];

/// Asking words the segmenter glues to a neighbour (几座, 哪朝, 什么样, 哪几个): a word holding
/// one asks too.
const ASKING_PARTS: &[&str] = &["几", "哪", "什么", "多少", "怎么", "怎样", "为何"];

fn is_question_word(w: &str) -> bool {
    let w = w.to_lowercase();
    QUESTION_WORDS.contains(&w.as_str()) || (w.chars().any(is_cjk) && ASKING_PARTS.iter().any(|p| w.contains(p)))
}

/// The question's content terms (as the search analyses them).
pub fn question_terms(question: &str) -> HashSet<String> {
    analyze::analyze(question)
        .into_iter()
        .filter(|t| !is_question_word(&t.term) && !is_question_word(&question[t.start..t.end]))
        .map(|t| t.term)
        .collect()
}

/// The question's terms that are the segmenter's cut across two words (路沿 of 铁路沿线 beside
/// 铁路 and 沿线): a term whose span in `question` overlaps another term's span without either
/// holding the other. The words it straddles carry the meaning; a passage need not hold it.
pub fn straddling_terms(question: &str) -> HashSet<String> {
    let toks = analyze::analyze(question);
    // `t` begins inside one word and ends inside the next.
    let begins_inside = |t: &analyze::Token| toks.iter().any(|a| a.start < t.start && t.start < a.end && a.end < t.end);
    let ends_inside = |t: &analyze::Token| toks.iter().any(|b| t.start < b.start && b.start < t.end && t.end < b.end);
    toks.iter().filter(|t| begins_inside(t) && ends_inside(t)).map(|t| t.term.clone()).collect()
}

/// The byte ranges of `q`'s outermost content words, in order: the analyzer's terms without
/// stop and question words (jieba's search mode also emits the sub-words of long words; those
/// are inside an outer word and left out).
pub fn content_words(q: &str) -> Vec<(usize, usize)> {
    let mut words: Vec<(usize, usize)> = analyze::analyze(q)
        .into_iter()
        .filter(|t| !is_question_word(&t.term) && !is_question_word(&q[t.start..t.end]))
        .map(|t| (t.start, t.end))
        .collect();
    words.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut outer: Vec<(usize, usize)> = Vec::new();
    for w in words {
        if outer.last().is_none_or(|l| w.0 >= l.1) {
            outer.push(w);
        }
    }
    outer
}

/// The Chinese terms of `q` written in `text` as they are, however the segmenter cut `text`
/// (苏镜宇 in 苏镜宇原名苏博: jieba cuts a name differently in another context).
pub fn written_in<'a>(q: &'a HashSet<String>, text: &str) -> impl Iterator<Item = String> + 'a {
    let text = text.to_string();
    q.iter().filter(move |t| t.chars().any(is_cjk) && written(t, &text)).cloned()
}

/// Characters the segmenter glues to a question's word (潘淑是, 海在, 成苏镜宇).
const GLUED: &str = "是在成的了于和与及为把被将从向对";

/// Whether the Chinese word `t` is written in `text`: as it is, without a function character
/// the question's segmentation glued to it, or as two pieces, the longer of two characters or
/// more (公司总部 in 公司是一家总部位于…, 鱼雌鱼 in …的雌鱼…).
fn written(t: &str, text: &str) -> bool {
    if text.contains(t) {
        return true;
    }
    let chars: Vec<char> = t.chars().collect();
    // Two characters, one of them a particle the segmenter glued on (海在 of 阴阳海在哪里): the
    // other character is what the question wrote.
    if chars.len() == 2 {
        return match (GLUED.contains(chars[0]), GLUED.contains(chars[1])) {
            (true, false) => text.contains(chars[1]),
            (false, true) => text.contains(chars[0]),
            _ => false,
        };
    }
    if chars.len() < 3 {
        return false;
    }
    let core: String = t.trim_matches(|c| GLUED.contains(c)).to_string();
    if core.chars().count() >= 2 && core != t && text.contains(&core) {
        return true;
    }
    // Two pieces, the longer of two characters or more (鱼雌鱼 as 鱼 + 雌鱼).
    (1..chars.len()).any(|i| {
        let (a, b): (String, String) = (chars[..i].iter().collect(), chars[i..].iter().collect());
        i.max(chars.len() - i) >= 2 && text.contains(&a) && text.contains(&b)
    })
}
