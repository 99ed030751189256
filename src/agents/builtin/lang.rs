//! The built-in agent's words, in the question's language.

use crate::{agents::verdict::AnswerKind, search::analyze};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

impl Lang {
    /// `en` or `zh`, in this language.
    pub fn pick<'a>(self, en: &'a str, zh: &'a str) -> &'a str {
        match self {
            Lang::En => en,
            Lang::Zh => zh,
        }
    }

    /// Chinese when a good share of the question's letters are CJK.
    pub fn of(question: &str) -> Lang {
        if analyze::query_terms(question).cjk_ratio >= 0.3 { Lang::Zh } else { Lang::En }
    }

    pub(super) fn search_step(self, q: &str) -> String {
        match self {
            Lang::En => format!("Search the knowledge bases: “{q}”"),
            Lang::Zh => format!("检索知识库：“{q}”"),
        }
    }

    /// A follow-up's first plan step: searched with the previous question, or on its own.
    pub(super) fn followup_step(self, with_previous: bool, previous: &str) -> String {
        let previous: String = previous.chars().take(80).collect();
        match (self, with_previous) {
            (Lang::En, true) => format!("Follow-up: searched together with the previous question “{previous}”"),
            (Lang::Zh, true) => format!("追问：与上一个问题“{previous}”一起检索"),
            (Lang::En, false) => "New topic: searched on its own, without the previous question".to_string(),
            (Lang::Zh, false) => "新话题：单独检索，不带上一个问题".to_string(),
        }
    }

    pub(super) fn answer_step(self) -> &'static str {
        match self {
            Lang::En => "Answer from the evidence, with citations",
            Lang::Zh => "根据证据作答并标注引用",
        }
    }

    /// The lead line of an answer: what follows are quotations, not the agent's own words.
    pub fn intro(self) -> &'static str {
        match self {
            Lang::En => "From your documents (quoted word for word):",
            Lang::Zh => "以下摘自你的文档（原文引用）：",
        }
    }

    pub fn nothing_found(self) -> &'static str {
        match self {
            Lang::En => "I found nothing relevant to this question in the knowledge bases.",
            Lang::Zh => "在知识库中没有找到与这个问题相关的内容。",
        }
    }

    /// The searches returned passages, but none answers the question (the verdict
    /// `not_found`): the closest passages, said to be no answer.
    pub fn closest_intro(self) -> &'static str {
        match self {
            Lang::En => {
                "Nothing in these knowledge bases answers this. The closest passages (not an answer, quoted word for word):"
            }
            Lang::Zh => "这些知识库里没有能回答这个问题的内容。以下是最接近的段落（并非答案，原文引用）：",
        }
    }

    /// The passages are on topic but answer only part of the question (the verdict
    /// `partial`): what is missing, then the quotations.
    pub fn partial_intro(self, missing: Option<AnswerKind>, terms: &[String]) -> String {
        let what = match (self, missing) {
            (Lang::En, Some(AnswerKind::Number)) => "none of them states the amount or number asked for".to_string(),
            (Lang::En, Some(AnswerKind::Date)) => "none of them states the date asked for".to_string(),
            (Lang::En, Some(AnswerKind::Person)) => "none of them names the person asked about".to_string(),
            (Lang::Zh, Some(AnswerKind::Number)) => "但都没有给出所问的数量或金额".to_string(),
            (Lang::Zh, Some(AnswerKind::Date)) => "但都没有给出所问的时间".to_string(),
            (Lang::Zh, Some(AnswerKind::Person)) => "但都没有指出所问的人".to_string(),
            (Lang::En, None) if !terms.is_empty() => format!("they do not cover “{}”", terms.join("”, “")),
            (Lang::Zh, None) if !terms.is_empty() => format!("但没有涉及“{}”", terms.join("”“")),
            (Lang::En, None) => "they cover only part of the question".to_string(),
            (Lang::Zh, None) => "但只涉及问题的一部分".to_string(),
        };
        match self {
            Lang::En => format!("Partly answered: these passages are on topic, but {what} (quoted word for word):"),
            Lang::Zh => format!("只能部分回答：以下段落与问题相关，{what}（原文引用）："),
        }
    }

    /// No search tool offered (the "chat only" agent, or the evidence tools switched off):
    /// the built-in agent has no language model to chat with, so it says what it can do.
    pub fn without_tools(self) -> &'static str {
        match self {
            Lang::En => {
                "This agent runs without tools, and with no language model connected it runs on the built-in agent, \
                 which can only answer by searching your knowledge bases: without tools I cannot search, so I cannot \
                 answer this question. Pick an agent with tools (Hermes) for an answer quoted from your documents, or \
                 ask an admin to connect a language model in the agent settings to chat without tools."
            }
            Lang::Zh => {
                "这个智能体不使用工具；未连接语言模型时它由内置智能体运行，而内置智能体只能通过检索知识库作答：\
                 没有工具就无法检索，所以无法回答这个问题。请选择使用工具的智能体（Hermes）以获得引自文档的回答，\
                 或请管理员在智能体设置中连接语言模型，以便不用工具直接对话。"
            }
        }
    }
}
