use super::*;
const EMAIL: EmailProvider = EmailProvider { attachments: crate::ingest::providers::for_kind };

fn parse(raw: &[u8]) -> ParsedArtifact {
    let art = EMAIL.parse(&ParseInput { bytes: raw, file_name: "m.eml", kind: "email" }).unwrap();
    art.validate().unwrap();
    art
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn message(gbk_body: &[u8], attachments: &str) -> Vec<u8> {
    format!(
        "From: =?UTF-8?B?5byg5LiJ?= <zhang@example.com>\r\nTo: Ann <ann@example.com>, bob@example.com\r\n\
         Cc: finance@example.com\r\nDate: Mon, 1 Dec 2026 10:00:00 +0800\r\n\
         Subject: =?GB2312?B?1MvTqrncwO3IqM/uxL8=?=\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n--XX\r\n\
         Content-Type: text/plain; charset=gb2312\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n{attachments}--XX--\r\n",
        b64(gbk_body)
    )
    .into_bytes()
}

fn gbk(s: &str) -> Vec<u8> {
    encoding_rs::GBK.encode(s).0.into_owned()
}

#[test]
fn headers_body_and_quoted_reply_become_blocks_in_their_charsets() {
    let body = gbk("各位好，\r\n\r\n预算金额（元）：700000，已批准。\r\n\r\n在 2026年11月30日，Ann 写道：\r\n> 预算批了吗？\r\n");
    let art = parse(&message(&body, ""));
    let texts: Vec<&str> = art.source_map.blocks.iter().map(|b| b.text.as_str()).collect();
    assert_eq!(texts[0], "运营管理权项目");
    assert_eq!(
        texts[1],
        "From: 张三 <zhang@example.com>\nTo: Ann <ann@example.com>, bob@example.com\nCc: finance@example.com\n\
         Date: 2026-12-01T10:00:00+08:00\nSubject: 运营管理权项目"
    );
    assert_eq!(&texts[2..], ["各位好，", "预算金额（元）：700000，已批准。", "在 2026年11月30日，Ann 写道：\n预算批了吗？"]);
    let types: Vec<BlockType> = art.source_map.blocks.iter().map(|b| b.block_type).collect();
    assert_eq!(types[4], BlockType::Quote);
    assert_eq!(art.source_map.sections[0].path, ["运营管理权项目"]);
    assert_eq!(art.source_map.resource_kind, "email");
}

#[test]
fn attachments_are_read_by_their_own_providers_and_listed_when_not() {
    let md = "# Plan\n\nShip the needle feature in Q3.\n";
    let attachments = format!(
        "--XX\r\nContent-Type: text/markdown; name=\"plan.md\"\r\nContent-Disposition: attachment; filename=\"plan.md\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n\
         --XX\r\nContent-Type: application/zip\r\nContent-Disposition: attachment; filename=\"data.zip\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\nUEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==\r\n\
         --XX\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment; filename=\"fwd.eml\"\r\n\r\n\
         From: carol@example.com\r\nSubject: Forwarded note\r\nContent-Type: text/plain\r\n\r\nInner needle text.\r\n",
        b64(md.as_bytes())
    );
    let art = parse(&message(&gbk("正文"), &attachments));
    let blocks = &art.source_map.blocks;
    let by_text = |t: &str| blocks.iter().find(|b| b.text == t).unwrap_or_else(|| panic!("no block {t:?}: {blocks:#?}"));
    let plan = by_text("Ship the needle feature in Q3.");
    assert_eq!(plan.id, "a1_b2");
    assert_eq!(plan.line_range, Some([3, 3]), "the attachment's own locator is kept");
    let section = art.source_map.sections.iter().find(|s| Some(&s.id) == plan.section_id.as_ref()).unwrap();
    assert_eq!(section.path, ["运营管理权项目", "plan.md", "Plan"]);
    assert_eq!(by_text("data.zip (unsupported_kind)").block_type, BlockType::Heading);
    let inner = by_text("Inner needle text.");
    let section = art.source_map.sections.iter().find(|s| Some(&s.id) == inner.section_id.as_ref()).unwrap();
    assert_eq!(section.path, ["运营管理权项目", "fwd.eml", "Forwarded note"]);

    // Each block names the attachment it comes from; the message's own blocks none.
    let place = |t: &str| by_text(t).attachment.clone();
    let at = |name: &str, kind: Option<SourceKind>, position: u32| AttachmentPlace {
        name: name.into(),
        kind,
        position,
        path: vec![name.into()],
    };
    assert_eq!(place("Ship the needle feature in Q3."), Some(at("plan.md", Some(SourceKind::Markdown), 1)));
    assert_eq!(place("data.zip (unsupported_kind)"), Some(at("data.zip", None, 2)));
    assert_eq!(place("Inner needle text."), Some(at("fwd.eml", Some(SourceKind::Email), 3)));
    assert_eq!(place("正文"), None);
}

#[test]
fn an_html_only_body_is_read_as_a_web_page() {
    let raw = "From: a@example.com\r\nSubject: Notice\r\nContent-Type: text/html; charset=utf-8\r\n\r\n\
               <html><body><nav>menu</nav><h1>Office move</h1><p>We move on <b>1 March</b>.</p></body></html>\r\n";
    let art = parse(raw.as_bytes());
    let texts: Vec<&str> = art.source_map.blocks.iter().map(|b| b.text.as_str()).collect();
    assert_eq!(texts[2..], ["Office move", "We move on 1 March."]);
    let last = art.source_map.blocks.last().unwrap();
    let section = art.source_map.sections.iter().find(|s| Some(&s.id) == last.section_id.as_ref()).unwrap();
    assert_eq!(section.path, ["Notice", "Office move"]);
}

#[test]
fn encrypted_deeply_nested_and_non_mail_bytes_end_with_their_codes() {
    let smime = "From: a@example.com\r\nContent-Type: application/pkcs7-mime; smime-type=enveloped-data\r\n\r\nMIAGCSqG\r\n";
    let code = |raw: &[u8]| match EMAIL.parse(&ParseInput { bytes: raw, file_name: "x.eml", kind: "email" }) {
        Ok(a) => panic!("parsed: {:?}", a.source_map.blocks.iter().map(|b| &b.text).collect::<Vec<_>>()),
        Err(e) => e.code,
    };
    assert_eq!(code(smime.as_bytes()), "encrypted");
    assert_eq!(code(b"\x00\x01\x02 binary"), "email_malformed");
    let mut raw = "From: z@example.com\r\nSubject: innermost\r\n\r\nbottom\r\n".to_string();
    for depth in 0..=MAX_DEPTH + 1 {
        raw = format!(
            "From: x{depth}@example.com\r\nSubject: level {depth}\r\nContent-Type: multipart/mixed; boundary=\"B{depth}\"\r\n\r\n\
             --B{depth}\r\nContent-Type: text/plain\r\n\r\nhi\r\n--B{depth}\r\nContent-Type: application/octet-stream\r\n\
             Content-Disposition: attachment; filename=\"m{depth}.eml\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n--B{depth}--\r\n",
            b64(raw.as_bytes())
        );
    }
    assert_eq!(code(raw.as_bytes()), "email_too_deep");
}

#[test]
fn an_mbox_is_its_messages_in_order_each_under_its_subject() {
    let mbox = "From ann@example.com Mon Dec  1 10:00:00 2026\nFrom: ann@example.com\nSubject: First\n\nAlpha needle.\n\n\
                From bob@example.com Mon Dec  1 11:00:00 2026\nFrom: bob@example.com\nSubject: Second\n\n>From the start.\n";
    let art = EMAIL.parse(&ParseInput { bytes: mbox.as_bytes(), file_name: "team.mbox", kind: "email" }).unwrap();
    art.validate().unwrap();
    let blocks = &art.source_map.blocks;
    let alpha = blocks.iter().find(|b| b.text == "Alpha needle.").unwrap();
    assert_eq!(alpha.id, "m1_b3");
    let second = art.source_map.sections.iter().find(|s| s.title == "Second").unwrap();
    assert_eq!(second.path, ["Second"]);
    assert!(blocks.iter().any(|b| b.id.starts_with("m2_")));
    let err = EMAIL.parse(&ParseInput { bytes: b"no messages", file_name: "x.mbox", kind: "email" }).unwrap_err();
    assert_eq!(err.code, "email_malformed");
}
