//! E-mail (EML) as located evidence through the HTTP API, the files written by Python's own
//! `email` package: a Chinese body in GB2312 (quoted-printable) with a quoted reply, a PDF
//! and a Markdown attachment, a forwarded message; the attachment's needle found at its page
//! inside the message and opened there; hostile messages ending with their codes.

use std::process::Command;

use reqwest::StatusCode;
use scraper::{Html, Selector};
use serde_json::{Value, json};

use crate::{fixtures::*, helpers::*};

/// Writes `team/mail/decision.eml` with the standard library's `email` package.
const WRITE_EML: &str = r##"
import sys
from email.message import EmailMessage
from email import policy
from email.utils import formatdate
out, pdf = sys.argv[1], sys.argv[2]
inner = EmailMessage()
inner["From"] = "carol@example.com"
inner["Subject"] = "Forwarded: venue options"
inner.set_content("The harbour hall seats 300 people.")
m = EmailMessage(policy=policy.SMTP)
m["From"] = "张三 <zhang@example.com>"
m["To"] = "Ann <ann@example.com>"
m["Cc"] = "finance@example.com"
m["Date"] = formatdate(1764554400, localtime=False)
m["Subject"] = "农贸市场项目决定"
m.set_content("各位好，\n\n农贸市场经营管理权项目的预算金额为七十万元，已批准。\n\nOn Mon, Ann wrote:\n> 预算批了吗？\n", charset="gb2312", cte="quoted-printable")
m.add_attachment(open(pdf, "rb").read(), maintype="application", subtype="pdf", filename="known_words.pdf")
m.add_attachment("# Plan\n\nShip the quartz feature in Q3.\n", subtype="markdown", filename="plan.md")
m.add_attachment(inner, filename="venue.eml")
open(out, "wb").write(bytes(m))
"##;

async fn search(c: &Client, q: &str) -> Vec<Value> {
    let (st, v) = c.post_json("/api/evidence/search", json!({"query": q, "mode": "lexical", "topK": 5})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v["results"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_message_its_body_and_its_attachments_are_located_evidence_that_opens_in_place() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let dir = app.docs.join("team/mail");
    std::fs::create_dir_all(&dir).unwrap();
    let pdf =
        std::path::PathBuf::from(std::env::var_os("MNOTE_FIXTURES_DIR").expect("run through ./dev test")).join("known_words.pdf");
    let st = Command::new("python3").arg("-c").arg(WRITE_EML).arg(dir.join("decision.eml")).arg(&pdf).status().unwrap();
    assert!(st.success());
    let smime = "From: a@example.com\r\nSubject: secret\r\nContent-Type: application/pkcs7-mime; smime-type=enveloped-data\r\n\r\nMIAGCSqG\r\n";
    std::fs::write(dir.join("secret.eml"), smime).unwrap();
    std::fs::write(dir.join("noise.eml"), b"\x00\x01\x02 not mail").unwrap();
    register(&k, &app, "team/mail").await;
    app.run_jobs().await;
    let sources = sources_by_path(&k).await;
    assert_eq!(sources["mail/decision.eml"]["status"], "indexed", "{}", sources["mail/decision.eml"]);
    assert_eq!(sources["mail/decision.eml"]["kind"], "email");
    assert_eq!(sources["mail/secret.eml"]["error"]["code"], "encrypted");
    assert_eq!(sources["mail/noise.eml"]["error"]["code"], "email_malformed");

    // The body, decoded from GB2312 quoted-printable, under the subject.
    let hits = search(&k.client, "预算金额").await;
    assert_eq!(hits[0]["quote"], "农贸市场经营管理权项目的预算金额为七十万元，已批准。");
    assert_eq!(hits[0]["source"]["resourceKind"], "email");
    assert_eq!(hits[0]["source"]["sectionPath"], json!(["农贸市场项目决定"]));
    // The header block names the people.
    let hits = search(&k.client, "finance@example.com").await;
    assert!(hits[0]["quote"].as_str().unwrap().starts_with("From: 张三 <zhang@example.com>\nTo: Ann <ann@example.com>"));
    // A word on page 2 of the PDF attachment: its page and box, under the attachment's name.
    let hits = search(&k.client, "Zephyr").await;
    let loc = &hits[0]["source"];
    assert_eq!(loc["page"], 2, "{loc}");
    assert!(loc["bbox"].is_array());
    assert_eq!(loc["sectionPath"][0], "农贸市场项目决定");
    assert_eq!(loc["sectionPath"][1], "known_words.pdf");
    assert!(loc["blockId"].as_str().unwrap().starts_with("a1_p2_"), "{loc}");
    assert_eq!(
        loc["attachment"],
        json!({"name": "known_words.pdf", "kind": "pdf", "position": 1, "path": ["known_words.pdf"]}),
        "{loc}"
    );
    // The Markdown attachment keeps its lines; the forwarded message its subject.
    let hits = search(&k.client, "quartz feature").await;
    assert_eq!(hits[0]["source"]["lineRange"], json!([3, 3]));
    assert_eq!(hits[0]["source"]["sectionPath"], json!(["农贸市场项目决定", "plan.md", "Plan"]));
    let hits = search(&k.client, "harbour hall").await;
    assert_eq!(hits[0]["source"]["sectionPath"], json!(["农贸市场项目决定", "venue.eml", "Forwarded: venue options"]));
    assert_eq!(hits[0]["source"]["attachment"]["kind"], "email");
    // The message's own blocks come from no attachment.
    assert_eq!(search(&k.client, "finance@example.com").await[0]["source"]["attachment"], Value::Null);

    // The citation of the PDF attachment's word opens the message there, highlighted, and the
    // message lists its attachments.
    let url = search(&k.client, "Zephyr").await[0]["openAction"]["url"].as_str().unwrap().to_string();
    let mut browser = app.login("owner@acme.test").await;
    let (st, html) = browser.page(url.split('#').next().unwrap()).await;
    assert_eq!(st, StatusCode::OK);
    let doc = Html::parse_document(&html);
    let hl = doc.select(&Selector::parse("#hl").unwrap()).next().expect("a highlighted block");
    assert!(hl.text().collect::<String>().contains("Zephyr"));
    let headings: Vec<String> =
        doc.select(&Selector::parse("[data-type=heading]").unwrap()).map(|h| h.text().collect()).collect();
    for name in ["known_words.pdf", "plan.md", "venue.eml"] {
        assert!(headings.iter().any(|h| h.trim().starts_with(name)), "{name} not listed: {headings:?}");
    }

    // Each attachment downloads under its own name, byte for byte, never rendered.
    let link = |part: &str| {
        let sel = Selector::parse(&format!("a.attachment-download[href$=\"/attachments/{part}\"]")).unwrap();
        doc.select(&sel).next().unwrap_or_else(|| panic!("no download link for {part}")).value().attr("href").unwrap().to_string()
    };
    let r = k.client.get(&link("a1")).await;
    assert_eq!(r.status(), StatusCode::OK);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "application/octet-stream");
    assert!(h["content-disposition"].to_str().unwrap().starts_with("attachment; filename=\"known_words.pdf\""), "{h:?}");
    assert_eq!(
        (h["x-content-type-options"].to_str().unwrap(), h["content-security-policy"].to_str().unwrap()),
        ("nosniff", "default-src 'none'; sandbox")
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), std::fs::read(&pdf).unwrap().as_slice(), "the PDF as attached");
    let plan = k.client.get(&link("a2")).await.text().await.unwrap();
    assert_eq!(plan.replace("\r\n", "\n"), "# Plan\n\nShip the quartz feature in Q3.\n");
    let fwd = k.client.get(&link("a3")).await.text().await.unwrap();
    assert!(fwd.contains("Subject: Forwarded: venue options") && fwd.contains("harbour hall"), "{fwd}");
    // Each is a download of an original: one audit row apiece.
    app.audit_rows(k.tenant, "source.download", 3).await;
    let mut tx = mnote::db::TenantTx::begin(&app.pool, k.tenant, mnote::db::Scope::System).await.unwrap();
    let (target, detail): (String, String) =
        sqlx::query_as("select target, detail from audit_event where action = 'source.download' order by at, id limit 1")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(detail, "attachment");
    assert!(target.ends_with("decision.eml › known_words.pdf"), "{target}");
    // No such attachment, not a message, or another kind: not found.
    let id = sources["mail/decision.eml"]["id"].as_str().unwrap();
    for part in ["a9", "a3_a1", "b1", "a0", "a1_x"] {
        assert_eq!(k.client.get(&format!("/sources/{id}/attachments/{part}")).await.status(), StatusCode::NOT_FOUND, "{part}");
    }
    // A message that cannot be read (encrypted) says why.
    let other = sources["mail/secret.eml"]["id"].as_str().unwrap();
    let r = k.client.get(&format!("/sources/{other}/attachments/a1")).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("encrypted"));
}
