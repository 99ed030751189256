//! `mnote search`: the API's search core as a member of the tenant, printed for a terminal.

use anyhow::Context;

use super::{TenantActor, app_err};
use crate::{
    context::{act_as, app_pool},
    db::{Scope, TenantTx},
    evidence::tools::{Mode, SearchHit, SearchRequest},
    evidence::{Locator, PlacePart, Quality},
    kbs,
    search::query as sq,
    state::load_embedder,
};

/// `mnote search`: numbered results (title, place, score, quote, open URL) or the API JSON.
pub async fn search(
    who: &TenantActor,
    query: &str,
    mode: &str,
    top_k: usize,
    kb: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let (cfg, pool) = app_pool().await?;
    let actor = act_as(&pool, &who.tenant, who.as_email.as_deref()).await?;
    let mode = Mode::parse(mode).with_context(|| format!("unknown mode {mode:?}"))?;
    // Only vector and hybrid need the embedder (loading it takes a moment).
    let embedder = if matches!(mode, Mode::Vector | Mode::Hybrid) { load_embedder(&pool).await } else { None };
    let engine = sq::Engine::new(embedder, cfg.public_url.clone());
    let mut tx = TenantTx::begin(&pool, actor.tenant_id, Scope::User(actor.user_id)).await?;
    let mut req = SearchRequest::new(query, mode);
    req.top_k = Some(top_k);
    if let Some(name) = kb {
        let k = kbs::queries::get_by_name(&mut tx, actor.user_id, actor.role.is_admin(), name)
            .await?
            .with_context(|| format!("no knowledge base named {name:?} visible to {}", actor.email))?;
        req.kb_ids = Some(vec![k.id]);
    }
    let resp = sq::search(&mut tx, &engine, &req).await.map_err(|e| app_err(e.into()))?;
    tx.commit().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&resp.map_results(SearchHit::from))?);
        return Ok(());
    }
    if resp.degraded {
        eprintln!(
            "note: vector search unavailable ({}); showing keyword results",
            resp.degraded_reason.as_deref().unwrap_or("degraded")
        );
    } else if resp.fusion.as_ref().is_some_and(|f| f.vector_weight == 0.0) {
        eprintln!("note: the embedder does not cover this query's language; keyword results only");
    }
    if resp.results.is_empty() {
        println!("no results for {query:?}");
        return Ok(());
    }
    let width = resp.results.len().to_string().len();
    for (i, h) in resp.results.iter().enumerate() {
        let place = cli_locator(&h.source);
        let mut flags = String::new();
        if h.source.quality != Quality::Exact {
            flags.push_str(&format!(" [{}]", h.source.quality.as_str()));
        }
        if h.is_ocr {
            flags.push_str(" [ocr]");
        }
        if h.stale {
            flags.push_str(" [stale]");
        }
        let sep = if place.is_empty() { "" } else { " · " };
        println!("{:>width$}. {}{sep}{place}  (score {:.4}){flags}", i + 1, h.source_title, h.score);
        let pad = " ".repeat(width + 2);
        println!("{pad}{}", trim_quote(&h.quote, 240));
        println!("{pad}{}", h.open_action.absolute_url.as_deref().unwrap_or(&h.open_action.url));
    }
    println!("{} results in {:.0} ms ({})", resp.results.len(), resp.took_ms, resp.mode);
    Ok(())
}

/// "p.3 · A › B · L4–6" (or "¶7") from a locator.
fn cli_locator(loc: &Locator) -> String {
    let parts: Vec<String> = loc
        .place()
        .parts()
        .into_iter()
        .map(|part| match part {
            PlacePart::Page(p) => format!("p.{p}"),
            PlacePart::Slide(p) => format!("slide {p}"),
            PlacePart::Sections(names) => names.join(" › "),
            PlacePart::Lines(a, b) => format!("L{a}–{b}"),
            PlacePart::Line(a) => format!("L{a}"),
            PlacePart::Paragraph(o) => format!("¶{o}"),
            PlacePart::Cells(c) => c,
        })
        .collect();
    parts.join(" · ")
}

/// One line of at most `max` characters, whitespace collapsed (a line break between two
/// CJK characters disappears, like in the rendered text).
fn trim_quote(q: &str, max: usize) -> String {
    let cjk = |c: char| matches!(c, '\u{2E80}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{FF00}'..='\u{FFEF}');
    let mut flat = String::new();
    let mut gap: Option<bool> = None; // pending whitespace: did it contain a line break?
    for c in q.chars() {
        if c.is_whitespace() {
            gap = Some(gap.unwrap_or(false) || c == '\n');
            continue;
        }
        if let Some(newline) = gap.take() {
            let joined = newline && flat.chars().last().is_some_and(cjk) && cjk(c);
            if !flat.is_empty() && !joined {
                flat.push(' ');
            }
        }
        flat.push(c);
    }
    if flat.chars().count() <= max {
        return flat;
    }
    let mut s: String = flat.chars().take(max).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_become_one_line() {
        assert_eq!(trim_quote("  a\n   b\tc ", 100), "a b c");
        assert_eq!(trim_quote("借用栈上的数据，\n因为作用域", 100), "借用栈上的数据，因为作用域");
        assert_eq!(trim_quote("数据 data\n中文", 100), "数据 data 中文");
        assert_eq!(trim_quote("abcdef", 3), "abc…");
    }
}
