//! The built-in assistant's use of LightRAG: for a run whose knowledge bases include ones bound
//! to a LightRAG server (and the `knowledge_rag` capability on for it), it asks LightRAG
//! (`mnote.knowledge_rag.query`, journaled like every tool call) and streams LightRAG's answer
//! into the run as it is written, its `[n]` markers turned into citation links at our evidence
//! (`rag::mapping`, through the tool box); the references also become passages the built-in
//! extractive answer may quote. The mode is chosen automatically (`mix`: graph and passages,
//! then `naive`: passages only, when `mix` finds nothing) unless the user picked one in the
//! agent's advanced options (`ai.agent.<id>.knowledge_rag_mode`).
//!
//! Never shown raw: LightRAG's "no context" reply (`[no-context]`) and its failures become a
//! sentence in the question's language. A user who asked for a LightRAG mode on knowledge bases
//! bound to none is told so, with the way to fix it (the KB's LightRAG page for admins, "ask an
//! admin" for members).

use tokio::sync::mpsc;
use uuid::Uuid;

use super::{
    super::{
        AgentError, RunEnv, RunInput, citations,
        tools::{self, EvidenceHit},
    },
    Lang, publish,
};
use crate::rag::{client::QueryMode, query::Reference, stream::Piece};

/// What asking LightRAG added to a run.
#[derive(Debug, Default)]
pub struct Consulted {
    /// The references, as passages the extractive answer may quote.
    pub hits: Vec<EvidenceHit>,
    /// The answer text already streamed into the run (the start of its final answer).
    pub text: String,
}

/// The mode in the reader's words.
fn mode_words(lang: Lang, mode: QueryMode) -> &'static str {
    match mode {
        QueryMode::Mix => lang.pick("graph and passages", "图谱与段落"),
        QueryMode::Hybrid => lang.pick("entities and relations", "实体与关系"),
        QueryMode::Local => lang.pick("entities", "实体"),
        QueryMode::Global => lang.pick("relations", "关系"),
        QueryMode::Naive => lang.pick("passages only", "仅段落"),
    }
}

/// The modes to try: the user's choice, or automatically `mix`, then `naive`.
pub fn modes_of(input: &RunInput) -> (Vec<QueryMode>, bool) {
    let key = format!("ai.agent.{}.knowledge_rag_mode", input.agent.as_str());
    match input.preferences.get(&key).and_then(|v| v.as_str()).and_then(|s| s.parse::<QueryMode>().ok()) {
        Some(m) => (vec![m], true),
        None => (vec![QueryMode::Mix, QueryMode::Naive], false),
    }
}

/// A `[n]` marker as a citation link: `[n · title · place](url)`.
fn marker_link(n: usize, r: &Reference) -> String {
    match citations::split_link(&r.citation_markdown) {
        Some((label, url)) => format!("[{n} · {label}]({url})"),
        None => format!("[{n}]"),
    }
}

fn hit_of(r: &Reference) -> Option<EvidenceHit> {
    let id = r.evidence_id?;
    (!r.quote.trim().is_empty()).then(|| EvidenceHit {
        evidence_id: id,
        quote: r.quote.clone(),
        citation_markdown: r.citation_markdown.clone(),
        source_title: crate::search::open::source_title(&r.source_path),
        source_id: r.source_id,
        score: 0.0,
        section: r.locator.section_path.last().cloned(),
        located: Default::default(),
    })
}

/// Ask LightRAG for `input` when this run may (see the module docs), streaming its answer;
/// `plan` gets a step for it before the answer step. Nothing when the run's knowledge bases
/// are bound to no LightRAG server or the capability is off for it.
pub async fn consult(input: &RunInput, env: &RunEnv, plan: &mut Vec<(String, &'static str)>) -> Result<Consulted, AgentError> {
    let question = input.prompt.trim();
    let lang = Lang::of(question);
    let (modes, explicit) = modes_of(input);
    if !env.tools.offers::<tools::RagQuery>() {
        return not_offered(env, lang, explicit).await;
    }
    if crate::rag::query::validate(question).is_err() {
        return Ok(Consulted::default());
    }
    let at = plan.len().saturating_sub(1);
    let step = |m: QueryMode| {
        format!(
            "{}{}{}",
            lang.pick("Ask the LightRAG knowledge graph (", "询问 LightRAG 知识图谱（"),
            mode_words(lang, m),
            lang.pick(")", "）")
        )
    };
    plan.insert(at, (step(modes[0]), "in_progress"));
    publish(env, plan).await?;

    let mut out = Consulted::default();
    let mut refs: Vec<Reference> = Vec::new();
    let mut failed: Option<String> = None;
    let mut answered = false;
    for (k, mode) in modes.iter().copied().enumerate() {
        if k > 0 {
            plan[at].0 = step(mode);
            publish(env, plan).await?;
        }
        // Markers number the references of this attempt.
        refs.clear();
        let (tx, mut rx) = mpsc::unbounded_channel::<Piece>();
        let call_id = format!("builtin-rag-{}", k + 1);
        let mut opened = false;
        // Each piece goes into the run as it comes (the tool box runs this beside the stream).
        let consumer = async {
            while let Some(p) = rx.recv().await {
                emit(env, lang, p, &mut refs, &mut out, &mut opened).await?;
            }
            Ok::<(), AgentError>(())
        };
        let (result, consumed) = tokio::select! {
            r = env.tools.rag_answer(&call_id, question, mode, tx, consumer) => r,
            _ = env.cancel.cancelled() => return Err(AgentError::Cancelled),
        };
        consumed?;
        match result {
            Ok(s) if s.result.answer.is_some() => {
                answered = true;
                out.hits.extend(s.result.references.iter().filter_map(hit_of));
                break;
            }
            Ok(s) => {
                out.hits.extend(s.result.references.iter().filter_map(hit_of));
                if s.result.degraded && !s.no_context {
                    failed = s.result.errors.first().map(|e| e.error.code.clone());
                    break;
                }
            }
            Err(e) => {
                failed = Some(e.code.as_str().to_string());
                break;
            }
        }
    }
    if !answered {
        let note = match failed {
            Some(_) => lang.pick(
                "The LightRAG knowledge graph could not be reached just now, so this answer uses the documents' passages only.",
                "暂时无法连接 LightRAG 知识图谱，因此这个回答只依据文档中的段落。",
            ),
            None => lang.pick(
                "The LightRAG knowledge graph found nothing on this question, so this answer uses the documents' passages only.",
                "LightRAG 知识图谱中没有与这个问题相关的内容，因此这个回答只依据文档中的段落。",
            ),
        };
        let text = format!("_{note}_\n\n");
        env.events.delta(&text).await?;
        out.text.push_str(&text);
    }
    plan[at].1 = "completed";
    publish(env, plan).await?;
    Ok(out)
}

/// One piece of LightRAG's streamed answer into the run (a heading before the first text).
async fn emit(
    env: &RunEnv,
    lang: Lang,
    p: Piece,
    refs: &mut Vec<Reference>,
    out: &mut Consulted,
    opened: &mut bool,
) -> Result<(), AgentError> {
    let text = match p {
        Piece::References(r) => {
            refs.extend(r);
            return Ok(());
        }
        Piece::Text(t) => t,
        Piece::Marker(i) => refs.get(i).map(|r| marker_link(i + 1, r)).unwrap_or_default(),
    };
    if text.is_empty() {
        return Ok(());
    }
    let mut text = text;
    if !*opened {
        *opened = true;
        text = format!(
            "{}\n\n{}",
            lang.pick("#### From the LightRAG knowledge graph", "#### 来自 LightRAG 知识图谱"),
            text.trim_start()
        );
    }
    env.events.delta(&text).await?;
    out.text.push_str(&text);
    Ok(())
}

/// LightRAG is not offered to this run: nothing, unless the user asked for a LightRAG mode,
/// then why not and how to fix it.
async fn not_offered(env: &RunEnv, lang: Lang, explicit: bool) -> Result<Consulted, AgentError> {
    if !explicit {
        return Ok(Consulted::default());
    }
    let text = if env.tools.knowledge_rag_bound().await {
        lang.pick(
            "LightRAG is switched off for this assistant (agent settings), so this answer uses the documents' passages only.",
            "这个助手的 LightRAG 已关闭（智能体设置），因此这个回答只依据文档中的段落。",
        )
        .to_string()
    } else if env.tools.actor().role.is_admin() {
        let kb: Option<Uuid> = env.tools.context().kb_ids.first().copied();
        let href = kb.map(|k| format!("/kbs/{k}/knowledge-rag")).unwrap_or_else(|| "/".into());
        match lang {
            Lang::En => format!(
                "These knowledge bases are not connected to a LightRAG server, so this answer uses the documents' passages only. [Connect LightRAG]({href})"
            ),
            Lang::Zh => format!("这些知识库没有连接 LightRAG 服务器，因此这个回答只依据文档中的段落。[连接 LightRAG]({href})"),
        }
    } else {
        lang.pick(
            "These knowledge bases are not connected to a LightRAG server, so this answer uses the documents' passages only. Ask an admin of your team to connect one.",
            "这些知识库没有连接 LightRAG 服务器，因此这个回答只依据文档中的段落。请联系团队管理员连接。",
        )
        .to_string()
    };
    let text = format!("_{text}_\n\n");
    env.events.delta(&text).await?;
    Ok(Consulted { hits: Vec::new(), text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_automatic_unless_picked_and_worded_in_both_languages() {
        let mut input = RunInput {
            host_run_id: Uuid::nil(),
            agent: crate::agents::AgentId::Hermes,
            prompt: "q".into(),
            context: Default::default(),
            transcript: Vec::new(),
            history: Vec::new(),
            preferences: Default::default(),
        };
        assert_eq!(modes_of(&input), (vec![QueryMode::Mix, QueryMode::Naive], false));
        input.preferences.insert("ai.agent.hermes.knowledge_rag_mode".into(), "auto".into());
        assert!(!modes_of(&input).1, "auto is the automatic choice");
        input.preferences.insert("ai.agent.hermes.knowledge_rag_mode".into(), "local".into());
        assert_eq!(modes_of(&input), (vec![QueryMode::Local], true));
        for m in QueryMode::ALL {
            assert!(!mode_words(Lang::Zh, m).is_ascii(), "{m:?} in Chinese");
            assert_ne!(mode_words(Lang::En, m), m.as_str(), "{m:?} explained, not named");
        }
        assert_eq!(Lang::of("LightRAG 里的线程作用域是什么？"), Lang::Zh);
    }
}
