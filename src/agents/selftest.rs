//! The descriptor self-test (`mnote agents selftest`, and a test of the suite): fails when the
//! tool registry, the function-calling mapping (what an OpenAI-compatible model is offered),
//! the ACP mapping (`_meta.mnote.tools` of `session/new`) and the tools the descriptors show
//! disagree on names, descriptions, capabilities or schemas, when a tool's schema is not a
//! valid JSON Schema, or when the descriptors (and preferences) JSON does not validate against
//! its published schema in `docs/schemas/`.
//!
//! The JSON Schema checks need the `jsonschema` feature (every `cargo test` builds with it; the
//! server never validates, and the crate was the slowest of the build): without it they are
//! counted as not run ([`Report::not_run`]) and the command says so.

use serde_json::Value;

use super::{
    AgentId, Capability, acp,
    capabilities::{self, Switches},
    descriptors::{self, Facts},
    openai, preferences,
    tools::{self, ToolDef},
};
use crate::{config::Config, web::Lang};

/// What the self-test found.
#[derive(Debug, Default)]
pub struct Report {
    /// How many comparisons were made.
    pub checks: usize,
    pub problems: Vec<String>,
    /// JSON Schema checks this build cannot make (no `jsonschema` feature): not passed, not run.
    pub not_run: usize,
}

/// Whether this build validates JSON Schemas (the `jsonschema` feature).
pub const SCHEMA_CHECKS: bool = cfg!(feature = "jsonschema");

impl Report {
    fn check(&mut self, ok: bool, problem: impl FnOnce() -> String) {
        self.checks += 1;
        if !ok {
            self.problems.push(problem());
        }
    }

    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// `instance` checked against the JSON Schema text `schema`: the validation errors.
#[cfg(feature = "jsonschema")]
pub fn validate(schema: &str, instance: &Value) -> Vec<String> {
    let schema: Value = match serde_json::from_str(schema) {
        Ok(s) => s,
        Err(e) => return vec![format!("the schema is not JSON: {e}")],
    };
    let validator = match jsonschema::options().should_validate_formats(true).build(&schema) {
        Ok(v) => v,
        Err(e) => return vec![format!("the schema does not compile: {e}")],
    };
    validator.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

/// `instance` against the JSON Schema text `schema`, each error prefixed with `what`; without
/// the `jsonschema` feature, one check not run.
#[cfg(feature = "jsonschema")]
pub fn check_schema(r: &mut Report, what: &str, schema: &str, instance: &Value) {
    r.problems.extend(validate(schema, instance).into_iter().map(|e| format!("{what}: {e}")));
    r.checks += 1;
}

#[cfg(not(feature = "jsonschema"))]
pub fn check_schema(r: &mut Report, _what: &str, _schema: &str, _instance: &Value) {
    r.not_run += 1;
}

/// Whether `schema` compiles as a JSON Schema; `None` without the `jsonschema` feature.
#[cfg(feature = "jsonschema")]
fn compiles(schema: &Value) -> Option<Result<(), String>> {
    Some(jsonschema::validator_for(schema).map(drop).map_err(|e| e.to_string()))
}

#[cfg(not(feature = "jsonschema"))]
fn compiles(_schema: &Value) -> Option<Result<(), String>> {
    None
}

fn registry_checks(r: &mut Report) {
    let reg = tools::registry();
    let caps = capabilities::all();
    for (i, d) in reg.iter().enumerate() {
        r.check(
            reg.iter().skip(i + 1).all(|o| o.name != d.name && o.function_name != d.function_name && o.mcp_name != d.mcp_name),
            || format!("registry: {} is defined twice", d.name),
        );
        r.check(d.function_name == tools::function_name(d.name), || {
            format!("registry: {}'s function name {} is not its dotted name with underscores", d.name, d.function_name)
        });
        r.check(d.mcp_name == tools::mcp_name(d.name), || {
            format!("registry: {}'s MCP name {} is not derived from its dotted name", d.name, d.mcp_name)
        });
        r.check(tools::lookup(&d.function_name).map(|x| x.name) == Some(d.name), || {
            format!("registry: {} is not found by its function name", d.name)
        });
        r.check(tools::lookup_mcp(&d.mcp_name).map(|x| x.name) == Some(d.name), || {
            format!("registry: {} is not found by its MCP name", d.name)
        });
        r.check(caps.contains(&d.capability), || format!("registry: {} has an unknown capability {}", d.name, d.capability));
        for (what, schema) in [("parameters", &d.parameters), ("output", &d.output)] {
            r.check(schema.get("type") == Some(&Value::String("object".into())), || {
                format!("registry: {}'s {what} are not an object schema", d.name)
            });
            match compiles(schema) {
                Some(compiled) => r.check(compiled.is_ok(), || {
                    format!("registry: {}'s {what} are not a valid JSON Schema: {:?}", d.name, compiled.err())
                }),
                None => r.not_run += 1,
            }
        }
    }
}

fn function_calling_checks(r: &mut Report, reg: &[&'static ToolDef]) {
    let specs = serde_json::to_value(openai::tool_specs(reg)).unwrap_or(Value::Null);
    let specs = specs.as_array().cloned().unwrap_or_default();
    r.check(specs.len() == reg.len(), || format!("function calling: {} tools for {} in the registry", specs.len(), reg.len()));
    for (d, s) in reg.iter().zip(&specs) {
        let f = &s["function"];
        r.check(s["type"] == "function", || format!("function calling: {} is not a function tool", d.name));
        r.check(f["name"] == d.function_name, || format!("function calling: {} is offered as {}", d.name, f["name"]));
        r.check(f["description"] == d.description, || format!("function calling: {}'s description differs", d.name));
        r.check(f["parameters"] == d.parameters, || format!("function calling: {}'s parameters differ", d.name));
        let back = f["name"].as_str().and_then(tools::lookup).map(|x| x.name);
        r.check(back == Some(d.name), || format!("function calling: a call of {} would not reach {}", f["name"], d.name));
    }
}

fn acp_checks(r: &mut Report, reg: &[&'static ToolDef]) {
    let meta = Value::Object(acp::ext::session_meta(reg));
    let offer = &meta["mnote"];
    r.check(offer["callMethod"] == acp::ext::TOOLS_CALL, || format!("ACP: the call method is {}", offer["callMethod"]));
    let offered = offer["tools"].as_array().cloned().unwrap_or_default();
    r.check(offered.len() == reg.len(), || format!("ACP: {} tools offered for {} in the registry", offered.len(), reg.len()));
    for (d, t) in reg.iter().zip(&offered) {
        r.check(t["name"] == d.name, || format!("ACP: {} is offered as {}", d.name, t["name"]));
        r.check(t["description"] == d.description, || format!("ACP: {}'s description differs", d.name));
        r.check(t["inputSchema"] == d.parameters, || format!("ACP: {}'s input schema differs", d.name));
        let back = t["name"].as_str().and_then(tools::lookup).map(|x| x.name);
        r.check(back == Some(d.name), || format!("ACP: a _mnote/tools/call of {} would not reach {}", t["name"], d.name));
    }
}

fn descriptor_checks(r: &mut Report, cfg: &Config, switches: Switches) {
    let facts = Facts { switches: switches.clone(), ..Facts::sample(true) };
    for lang in [Lang::En, Lang::ZhCn] {
        let d = descriptors::build(cfg, &facts, lang);
        let json = serde_json::to_value(&d).unwrap_or(Value::Null);
        check_schema(r, &format!("descriptors ({})", lang.code()), descriptors::JSON_SCHEMA, &json);
        let prefs = serde_json::to_value(preferences::view_of(&d)).unwrap_or(Value::Null);
        check_schema(r, &format!("preferences ({})", lang.code()), preferences::JSON_SCHEMA, &prefs);
        check_descriptor_tools(r, &json, &switches);
    }
}

/// The tools of the descriptors JSON against the registry and the switches.
pub fn check_descriptor_tools(r: &mut Report, json: &Value, switches: &Switches) {
    for agent in AgentId::ALL {
        let who = agent.as_str();
        let Some(desc) = json["items"].as_array().and_then(|a| a.iter().find(|x| x["agentId"] == who)) else {
            r.problems.push(format!("descriptors: no descriptor for {who}"));
            continue;
        };
        let shown = desc["tools"].as_array().cloned().unwrap_or_default();
        let expected: Vec<&ToolDef> = if agent.uses_tools() {
            tools::registry().iter().filter(|t| descriptors::agent_capabilities(agent).contains(&t.capability)).collect()
        } else {
            Vec::new()
        };
        r.check(shown.len() == expected.len(), || {
            format!("descriptors: {who} shows {} tools, the registry has {}", shown.len(), expected.len())
        });
        for (t, d) in shown.iter().zip(&expected) {
            r.check(t["name"] == d.name, || format!("descriptors: {who} shows {} where the registry has {}", t["name"], d.name));
            r.check(t["functionName"] == d.function_name, || format!("descriptors: {who}: {}'s function name differs", d.name));
            r.check(t["description"] == d.description, || format!("descriptors: {who}: {}'s description differs", d.name));
            r.check(t["inputSchema"] == d.parameters, || format!("descriptors: {who}: {}'s schema differs", d.name));
            r.check(t["capabilityIds"] == serde_json::json!([d.capability]), || {
                format!("descriptors: {who}: {}'s capabilities differ", d.name)
            });
            r.check(t["enabled"] == switches.enabled(d.capability), || {
                format!(
                    "descriptors: {who}: {} is enabled={} but {} is switched {}",
                    d.name,
                    t["enabled"],
                    d.capability,
                    switches.enabled(d.capability)
                )
            });
        }
        for c in desc["capabilities"].as_array().into_iter().flatten() {
            r.check(c.as_str().and_then(Capability::parse).is_some_and(|c| switches.enabled(c)), || {
                format!("descriptors: {who} lists the switched-off capability {c}")
            });
        }
    }
}

/// Run every check (no database needed: the descriptors are merged from sample facts, once
/// with everything on and once with each capability switched off).
pub fn run(cfg: &Config) -> Report {
    let mut r = Report::default();
    if let Err(e) = descriptors::extra_fields(cfg) {
        r.problems.push(e);
    }
    registry_checks(&mut r);
    let reg: Vec<&'static ToolDef> = tools::registry().iter().collect();
    function_calling_checks(&mut r, &reg);
    acp_checks(&mut r, &reg);
    descriptor_checks(&mut r, cfg, Switches::all_on());
    for c in capabilities::all() {
        let mut s = Switches::all_on();
        s.0.insert(c, false);
        descriptor_checks(&mut r, cfg, s);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selftest_passes() {
        let cfg = Config::for_tests("postgres://x".into(), "/tmp".into(), vec![]);
        let r = run(&cfg);
        assert!(r.ok(), "{:#?}", r.problems);
        assert!(r.checks > 100, "{}", r.checks);
        assert!(SCHEMA_CHECKS && r.not_run == 0, "the tests build with the jsonschema feature: {} not run", r.not_run);
    }

    #[test]
    fn the_selftest_catches_drift() {
        // A descriptor tool that disagrees with the registry is reported.
        let cfg = Config::for_tests("postgres://x".into(), "/tmp".into(), vec![]);
        let d = descriptors::build(&cfg, &Facts::sample(true), Lang::En);
        let mut json = serde_json::to_value(&d).unwrap();
        let mut clean = Report::default();
        check_descriptor_tools(&mut clean, &json, &Switches::all_on());
        assert!(clean.ok(), "{:?}", clean.problems);
        json["items"][0]["tools"][0]["name"] = Value::String("mnote.evidence.serch".into());
        json["items"][1]["tools"][4]["enabled"] = Value::Bool(false);
        assert!(validate(descriptors::JSON_SCHEMA, &json).is_empty(), "a drifted name is still valid JSON");
        let mut drift = Report::default();
        check_descriptor_tools(&mut drift, &json, &Switches::all_on());
        assert_eq!(drift.problems.len(), 2, "{:?}", drift.problems);
        assert!(drift.problems[0].contains("mnote.evidence.serch"), "{:?}", drift.problems);
        json["items"][0]["tools"][0]["enabled"] = Value::String("yes".into());
        assert!(!validate(descriptors::JSON_SCHEMA, &json).is_empty(), "the schema catches a wrong type");
        // A schema-invalid preferences body is caught.
        let bad = serde_json::json!({"schema": "mnote.ai_preferences.v1", "values": {"ai.agent.hermes.api_key": "sk-plain"}});
        assert!(!validate(preferences::JSON_SCHEMA, &bad).is_empty(), "a secret in clear must not validate");
    }
}
