//! Downloads under the compression layer (issue 31 item 3): every kind, with every
//! `Accept-Encoding` a browser sends, returns the original bytes once decoded.

use std::io::Read;

use reqwest::{StatusCode, header};

use crate::{fixtures::*, helpers::*};

/// `body` decoded as `encoding` says (`None`: identity).
pub fn decode(encoding: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match encoding {
        None | Some("identity") => out.extend_from_slice(body),
        Some("gzip") => {
            flate2::read::GzDecoder::new(body).read_to_end(&mut out).expect("gzip body");
        }
        Some("br") => {
            brotli_decompressor::Decompressor::new(body, 4096).read_to_end(&mut out).expect("brotli body");
        }
        Some(other) => panic!("unexpected content-encoding {other}"),
    }
    out
}

#[tokio::test]
async fn downloads_of_every_kind_return_the_original_bytes_with_every_accept_encoding() {
    let app = spawn_app().await;
    let k = kb_with_grant(&app).await;
    let (dir, _) = fixtures();
    copy_fixtures(&app, &dir, "dl", &["plain.docx", "known_words.pdf", "scope_zh.png"]);
    // Big enough to be compressed, several read chunks long.
    let md: String = (0..6000).map(|i| format!("Line {i} of the notes, with words to compress.\n")).collect();
    app.write_doc("team/dl/notes.md", &md);
    register(&k, &app, "team/dl").await;
    let sources = sources_by_path(&k).await;
    let owner = app.login("owner@acme.test").await;
    for name in ["notes.md", "plain.docx", "known_words.pdf", "scope_zh.png"] {
        let original = std::fs::read(app.docs.join("team/dl").join(name)).unwrap();
        let sid = sources[&format!("dl/{name}")]["id"].as_str().unwrap_or_else(|| panic!("{name} not registered: {sources:?}"));
        for accept in [None, Some("gzip"), Some("br"), Some("gzip, deflate, br, zstd")] {
            for client in [&k.client, &owner] {
                let mut r = client.req(reqwest::Method::GET, &format!("/sources/{sid}/download"));
                r = match accept {
                    Some(a) => r.header(header::ACCEPT_ENCODING, a),
                    None => r.header(header::ACCEPT_ENCODING, "identity"),
                };
                let r = r.send().await.unwrap();
                assert_eq!(r.status(), StatusCode::OK, "{name} {accept:?}");
                let enc = r.headers().get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap().to_string());
                if let Some(len) = r.headers().get(header::CONTENT_LENGTH) {
                    assert!(enc.is_none(), "{name} {accept:?}: a compressed body with a content-length");
                    assert_eq!(len.to_str().unwrap(), original.len().to_string(), "{name} {accept:?}");
                }
                if name != "notes.md" {
                    // Already compressed formats are sent as they are.
                    assert_eq!(enc, None, "{name} {accept:?}");
                }
                let body = r.bytes().await.unwrap_or_else(|e| panic!("{name} {accept:?}: {e}"));
                let got = decode(enc.as_deref(), &body);
                assert!(got == original, "{name} {accept:?} ({enc:?}): {} bytes, expected {}", got.len(), original.len());
            }
        }
        // A range is served from the original bytes too.
        let r = k
            .client
            .req(reqwest::Method::GET, &format!("/sources/{sid}/download"))
            .header(header::ACCEPT_ENCODING, "br")
            .header(header::RANGE, "bytes=10-99")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT, "{name}");
        let enc = r.headers().get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(enc, None, "{name}: a range is never compressed");
        assert_eq!(&r.bytes().await.unwrap()[..], &original[10..100], "{name}");
    }
}
