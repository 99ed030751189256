//! Unit tests of the descriptors.

use super::*;

pub fn facts(admin: bool) -> Facts {
    Facts::sample(admin)
}

fn cfg() -> Config {
    Config::for_tests("postgres://x".into(), "/tmp".into(), vec![])
}

#[test]
fn three_agents_with_their_tools_and_admin_fields_only_for_admins() {
    let cfg = cfg();
    let member = build(&cfg, &facts(false), Lang::En);
    let ids: Vec<&str> = member.items.iter().map(|d| d.agent_id).collect();
    assert_eq!(ids, ["hermes", "reasonix", "chat_only"]);
    let hermes = member.get(AgentId::Hermes).unwrap();
    assert_eq!(hermes.tools.len(), tools::registry().len());
    assert!(hermes.fields.iter().all(|f| f.auth == FieldAuth::User), "{:?}", hermes.fields);
    assert!(member.get(AgentId::ChatOnly).unwrap().tools.is_empty());
    assert!(member.get(AgentId::ChatOnly).unwrap().allowed_roots.is_empty());
    assert_eq!(hermes.allowed_roots[0].path, "/data/team");
    let admin = build(&cfg, &facts(true), Lang::En);
    let key = admin.get(AgentId::Hermes).unwrap().field("ai.agent.hermes.api_key").unwrap();
    assert_eq!(key.value, json!({"set": false}));
    assert!(key.secret);
    let kbs = admin.common.fields.iter().find(|f| f.key == "ai.common.default_kbs").unwrap();
    assert_eq!(kbs.options.as_ref().unwrap()[0].label, "Handbook");
}

#[test]
fn a_switched_off_capability_is_disabled_with_its_tools() {
    let mut f = facts(false);
    f.switches.0.insert(Capability::KnowledgeRag, false);
    let d = build(&cfg(), &f, Lang::En);
    let r = d.get(AgentId::Reasonix).unwrap();
    assert_eq!(r.capability_states[&Capability::KnowledgeRag], "disabled");
    assert!(!r.capabilities.contains(&Capability::KnowledgeRag));
    assert_eq!(r.disabled_capabilities, [Capability::KnowledgeRag]);
    for t in &r.tools {
        assert_eq!(t.enabled, !t.name.starts_with("mnote.knowledge_rag."), "{}", t.name);
    }
}

#[test]
fn stored_values_that_no_longer_fit_fall_back_to_the_default() {
    let mut f = facts(false);
    f.stored.insert("ai.common.default_agent".into(), Stored::Value(json!("gone")));
    f.stored.insert("ai.common.default_kbs".into(), Stored::Value(json!([Uuid::from_u128(7), Uuid::from_u128(8)])));
    let d = build(&cfg(), &f, Lang::En);
    assert_eq!(d.default_agent(), AgentId::Hermes);
    assert_eq!(d.default_kbs(), [Uuid::from_u128(7)]);
}

#[test]
fn extra_fields_are_checked() {
    let mut c = cfg();
    c.agents.extra_fields = Some(r#"[{"key": "ai.agent.reasonix.tone", "label": {"en": "Tone", "zh-CN": "语气"}, "kind": "select", "default": "plain", "options": [{"value": "plain", "label": {"en": "Plain"}}]}]"#.into());
    let f = extra_fields(&c).unwrap();
    assert_eq!(f[0].scope(), "ai.agent.reasonix");
    let d = build(&c, &facts(false), Lang::ZhCn);
    assert_eq!(d.get(AgentId::Reasonix).unwrap().field("ai.agent.reasonix.tone").unwrap().label, "语气");
    c.agents.extra_fields = Some(r#"[{"key": "ai.agent.nobody.x", "label": {"en": "X"}, "kind": "string"}]"#.into());
    assert!(extra_fields(&c).is_err());
    c.agents.extra_fields = Some(r#"[{"key": "ai.common.default_agent", "label": {"en": "X"}, "kind": "string"}]"#.into());
    assert!(extra_fields(&c).unwrap_err().contains("twice"));
}
