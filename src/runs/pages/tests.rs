//! Unit tests of the `/ai` pages (their own file: `pages.rs` stays under 800 lines).

use super::*;
use crate::web::ai_panel::TOOL_ERRORS;

#[test]
fn args_are_one_line() {
    let v = serde_json::json!({"query": "where do robots charge", "limit": 5, "kbIds": ["a", "b"]});
    assert_eq!(args_summary(&v), "limit: 5, query: \"where do robots charge\"", "ids are left out");
    let v = serde_json::json!({"sourceId": "3f2a", "block_id": "b9", "id": 1, "valid": true});
    assert_eq!(args_summary(&v), "valid: true");
    assert_eq!(args_summary(&serde_json::Value::Null), "");
    let long = serde_json::json!({"query": "x".repeat(500)});
    assert!(args_summary(&long).chars().count() <= 201);
}

#[test]
fn panels_name_their_context() {
    use crate::web::ai_panel::{AiPanel, agents};
    let kb = Uuid::new_v4();
    let p = AiPanel::for_kb(Lang::En, kb);
    assert_eq!((p.scope, p.kb_id, p.back), (format!("kb:{kb}"), Some(kb), format!("/kbs/{kb}")));
    let s = Uuid::new_v4();
    let v = AiPanel::for_source(Lang::ZhCn, s);
    assert_eq!((v.source_id, v.kb_id), (Some(s), None));
    assert_ne!(v.request_id, v.session_id);
    // The panel's agent list is the agents' own.
    assert_eq!(p.agents, agents());
    assert_eq!(agents()[0], ("hermes", "Hermes"));
}

#[test]
fn form_pairs_repeat_kbs_and_reject_bad_ids() {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let f = AskForm::from_pairs(vec![
        ("prompt".into(), "hi".into()),
        ("kb_id".into(), a.to_string()),
        ("kb_id".into(), b.to_string()),
        ("csrf_token".into(), "t".into()),
    ])
    .unwrap();
    assert_eq!((f.prompt.as_str(), f.kb_ids), ("hi", vec![a, b]));
    assert!(AskForm::from_pairs(vec![("kb_id".into(), "nope".into())]).is_err());
    let all = AskForm::from_pairs(vec![("kb_id".into(), a.to_string()), ("kb_choices".into(), "1".into())]).unwrap();
    assert_eq!(all.kb_choices, Some(1));
}

#[test]
fn failures_and_counts_read_in_the_readers_language_without_raw_codes() {
    for lang in [Lang::En, Lang::ZhCn] {
        for code in TOOL_ERRORS.iter().chain(&["something_new"]) {
            let w = tool_error_words(lang, code);
            assert!(!w.is_empty() && !w.contains('_') && !w.starts_with("assist."), "{lang:?} {code}: {w}");
        }
        for code in ["tool_failed", "agent_timeout", "llm_unavailable", "acp_failed", "internal", "something_new"] {
            let w = run_error_words(lang, code);
            assert!(!w.is_empty() && !w.contains('_') && !w.starts_with("assist."), "{lang:?} {code}: {w}");
        }
        assert!(!about(lang, AgentId::ChatOnly).starts_with("assist."), "{lang:?}");
    }
    assert_eq!(tool_error_words(Lang::En, "unknown_tool"), "the agent asked for a tool this run does not offer");
    assert_eq!(run_error_words(Lang::ZhCn, "no_such_code"), "智能体未能完成这个回答。");
    assert_eq!(results_words(Lang::En, 1), "1 result");
    assert_eq!(results_words(Lang::En, 3), "3 results");
    assert_eq!(results_words(Lang::ZhCn, 1), "1 条结果");
}

#[test]
fn labels_exist_in_both_languages() {
    for lang in [Lang::En, Lang::ZhCn] {
        let v: serde_json::Value = serde_json::from_str(&labels(lang)).unwrap();
        for (k, w) in v.as_object().unwrap() {
            let w = w.as_str().unwrap();
            assert!(!w.starts_with("ai.") && !w.starts_with("assist.") && !w.is_empty(), "{lang:?}: ai.{k} is missing");
        }
    }
}

#[test]
fn every_tool_has_words_in_both_languages() {
    use crate::web::{Lang, ai_panel::tool_label};
    let mut names: Vec<&str> = crate::agents::tools::registry().iter().map(|t| t.name).collect();
    let mut listed = crate::web::ai_panel::TOOL_LABELS.to_vec();
    names.sort();
    listed.sort();
    assert_eq!(names, listed, "web::ai_panel::TOOL_LABELS names every registered tool");
    for t in crate::agents::tools::registry() {
        for lang in [Lang::En, Lang::ZhCn] {
            let label = tool_label(lang, t.name);
            assert_ne!(label, t.name, "{} has no words in {lang:?}", t.name);
        }
    }
    assert_eq!(tool_label(Lang::En, "acme.unknown"), "acme.unknown");
}
