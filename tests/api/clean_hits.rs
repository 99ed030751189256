//! Clean hits: blocks too short to be evidence on their own (a title laid out one character
//! per paragraph) stay locatable but out of ranking, their text carried by the next block; a
//! footnote marker glued to a word does not hide the word.

use mnote::db::{Scope, TenantTx};
use serde_json::json;

use crate::{
    helpers::*,
    search::{docx, results, search, team},
};

#[tokio::test]
async fn a_title_of_one_character_per_paragraph_gives_no_single_character_hits_but_finds_its_document() {
    let app = spawn_app().await;
    let ruling =
        docx(&["判", "决", "书", "本院认为，被告应当在三十日内支付全部货款。", "3Rudder authority is limited at low speed."]);
    let t = team(&app, "clean", &[("ruling.docx", &ruling)]).await;

    for q in ["判决书", "判", "决"] {
        let v = search(&t.client, json!({"query": q, "mode": "lexical"})).await;
        for r in results(&v) {
            let quote = r["quote"].as_str().unwrap();
            assert!(quote.chars().filter(|c| c.is_alphanumeric()).count() >= 2, "{q}: a fragment was ranked: {v}");
        }
    }
    // The title's run is carried by the paragraph after it: the document is found by its title.
    let v = search(&t.client, json!({"query": "判决书", "mode": "lexical"})).await;
    assert!(results(&v)[0]["quote"].as_str().unwrap().starts_with("本院认为"), "{v}");

    // The fragments are still blocks (the viewer and the source map locate them), without terms.
    let mut tx = TenantTx::begin(&app.pool, t.tenant, Scope::System).await.unwrap();
    let rows: Vec<(String, i32)> =
        sqlx::query_as("select text, lex_len from evidence_block order by ordinal").fetch_all(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    let texts: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(texts[..3], ["判", "决", "书"], "{rows:?}");
    assert!(rows[..3].iter().all(|r| r.1 == 0), "{rows:?}");
    assert!(rows[3..].iter().all(|r| r.1 > 0), "{rows:?}");

    // «3Rudder»: the footnote marker is split off, the word is found.
    let v = search(&t.client, json!({"query": "rudder authority", "mode": "lexical"})).await;
    assert!(results(&v)[0]["quote"].as_str().unwrap().starts_with("3Rudder"), "{v}");
}
