//! `mnote agents selftest`: the descriptor self-test (see `agents::selftest`). Without
//! `--tenant` it needs no database; with it, the descriptors and preferences of that team's
//! member (the first owner, or `--as`) are also merged from the database and validated
//! against their published JSON Schemas.

use crate::{
    agents::{descriptors, preferences, selftest},
    config::Config,
    context::{act_as, app_pool},
    web::Lang,
};

pub async fn selftest(tenant: Option<&str>, as_email: Option<&str>) -> anyhow::Result<()> {
    let (cfg, live) = match tenant {
        Some(t) => {
            let (cfg, pool) = app_pool().await?;
            let actor = act_as(&pool, t, as_email).await?;
            let facts = descriptors::facts_in(&pool, &cfg, &actor).await.map_err(|e| anyhow::anyhow!("{e}"))?;
            (cfg, Some(facts))
        }
        None => (Config::from_env().unwrap_or_else(|_| Config::for_tests(String::new(), ".".into(), Vec::new())), None),
    };
    let mut report = selftest::run(&cfg);
    if let Some(facts) = live {
        for lang in [Lang::En, Lang::ZhCn] {
            let d = descriptors::build(&cfg, &facts, lang);
            let json = serde_json::to_value(&d)?;
            let code = lang.code();
            selftest::check_schema(&mut report, &format!("live descriptors ({code})"), descriptors::JSON_SCHEMA, &json);
            let prefs = serde_json::to_value(preferences::view_of(&d))?;
            selftest::check_schema(&mut report, &format!("live preferences ({code})"), preferences::JSON_SCHEMA, &prefs);
            selftest::check_descriptor_tools(&mut report, &json, &facts.switches);
        }
    }
    if report.not_run > 0 {
        println!(
            "NOT RUN {} JSON Schema checks: this binary was built without the `jsonschema` feature \
             (cargo build --features jsonschema; every `cargo test` has it)",
            report.not_run
        );
    }
    if report.ok() {
        let what = if report.not_run > 0 { "without JSON Schemas" } else { "JSON Schemas" };
        println!("agents selftest: ok ({} checks: tool registry, function calling, ACP, descriptors, {what})", report.checks);
        Ok(())
    } else {
        for p in &report.problems {
            println!("FAIL {p}");
        }
        anyhow::bail!("agents selftest: {} problem(s) in {} checks", report.problems.len(), report.checks)
    }
}
