//! Unit tests of the Markdown and plain-text provider.

use super::*;

fn parse_kind(src: &str, kind: &str) -> ParsedArtifact {
    let input = ParseInput { bytes: src.as_bytes(), file_name: "t.md", kind };
    let a = MarkdownProvider.parse(&input).expect("parse");
    a.validate().expect("valid artifact");
    a
}

fn parse(src: &str) -> ParsedArtifact {
    parse_kind(src, "markdown")
}

/// (type, text, lineRange) of every block.
fn blocks(a: &ParsedArtifact) -> Vec<(BlockType, &str, [u32; 2])> {
    a.source_map.blocks.iter().map(|b| (b.block_type, b.text.as_str(), b.line_range.unwrap())).collect()
}

fn refs(a: &ParsedArtifact) -> Vec<(ReferenceKind, &str, &str, Option<&str>)> {
    let r = &a.source_map.references;
    r.iter().map(|r| (r.kind, r.source_block_id.as_str(), r.target.as_str(), r.label.as_deref())).collect()
}

const DOC: &str = "# 第一章\n\n在 Rust 里，使用线程作用域可以借用栈上的数据，见 [文档](https://doc.rust-lang.org/std/thread/fn.scope.html)。\n\n## 解除条件\n\n- 第一项 @Alice\n- 第二项 [[合同#解除条件|解除]]\n\n| 条件 | 期限 |\n|------|------|\n| 违约 | 30天 |\n\n```rust\nfn main() {}\n```\n\n![架构图](img/arch.png) 和 [[附件]]\n";

#[test]
fn full_document() {
    use BlockType::*;
    let a = parse(DOC);
    assert_eq!(a.text, DOC);
    assert_eq!(a.source_hash, artifact::source_hash(DOC.as_bytes()));
    assert_eq!(a.source_map.schema, artifact::SOURCE_MAP_SCHEMA);
    assert_eq!(a.source_map.resource_kind, "markdown");
    let para = "在 Rust 里，使用线程作用域可以借用栈上的数据，见 [文档](https://doc.rust-lang.org/std/thread/fn.scope.html)。";
    assert_eq!(
        blocks(&a),
        vec![
            (Heading, "第一章", [1, 1]),
            (Paragraph, para, [3, 3]),
            (Heading, "解除条件", [5, 5]),
            (ListItem, "第一项 @Alice", [7, 7]),
            (ListItem, "第二项 [[合同#解除条件|解除]]", [8, 8]),
            (Table, "| 条件 | 期限 |\n|------|------|\n| 违约 | 30天 |", [10, 12]),
            (Code, "```rust\nfn main() {}\n```", [14, 16]),
            (Paragraph, "![架构图](img/arch.png) 和 [[附件]]", [18, 18]),
        ]
    );
    let b = &a.source_map.blocks;
    assert_eq!(b[0].char_range, [2, 5]);
    assert_eq!(b[1].char_range, [7, 7 + para.chars().count() as u32]);
    assert!(
        b.iter().enumerate().all(|(i, b)| b.id == format!("b{}", i + 1) && b.quality == crate::ingest::artifact::Quality::Exact)
    );
    assert_eq!(b[1].text_fingerprint, artifact::fingerprint(para));
    assert_eq!(b[1].section_id.as_deref(), Some("sec_1"));
    assert_eq!(b[3].section_id.as_deref(), Some("sec_2"));

    let s = &a.source_map.sections;
    assert_eq!(s.len(), 2);
    assert_eq!((s[0].id.as_str(), s[0].level, s[0].parent_id.as_deref()), ("sec_1", 1, None));
    assert_eq!(s[0].path, ["第一章"]);
    assert_eq!(s[0].line_range, Some([1, 18]));
    assert_eq!(s[0].block_ids, ["b1", "b2"]);
    assert_eq!((s[1].title.as_str(), s[1].level, s[1].parent_id.as_deref()), ("解除条件", 2, Some("sec_1")));
    assert_eq!(s[1].path, ["第一章", "解除条件"]);
    assert_eq!(s[1].line_range, Some([5, 18]));
    assert_eq!(s[1].block_ids, ["b3", "b4", "b5", "b6", "b7", "b8"]);

    use ReferenceKind::*;
    assert_eq!(
        refs(&a),
        vec![
            (Link, "b2", "https://doc.rust-lang.org/std/thread/fn.scope.html", Some("文档")),
            (Mention, "b4", "Alice", None),
            (Wikilink, "b5", "合同#解除条件", Some("解除")),
            (Image, "b8", "img/arch.png", Some("架构图")),
            (Wikilink, "b8", "附件", None),
        ]
    );
}

#[test]
fn deterministic() {
    assert_eq!(parse(DOC), parse(DOC));
    let json = |a: &ParsedArtifact| serde_json::to_string(a).unwrap();
    assert_eq!(json(&parse(DOC)), json(&parse(DOC)));
}

#[test]
fn nested_lists_split_at_the_inner_list() {
    use BlockType::*;
    let a = parse("- outer *one*\n  - inner\n    - deepest\n- [ ] task\n\n  second para\n\n  1. numbered\n\n  after\n");
    assert_eq!(
        blocks(&a),
        vec![
            (ListItem, "outer *one*", [1, 1]),
            (ListItem, "inner", [2, 2]),
            (ListItem, "deepest", [3, 3]),
            (ListItem, "[ ] task\n\n  second para", [4, 6]),
            (ListItem, "numbered", [8, 8]),
            (Paragraph, "after", [10, 10]),
        ]
    );
    // An item that is only a nested list has no block of its own.
    assert_eq!(blocks(&parse("- - a\n")), vec![(ListItem, "a", [1, 1])]);
}

#[test]
fn quotes_html_and_containers() {
    use BlockType::*;
    let src = "> quoted @Bob\n> more\n\n> # not a section\n\n<div>\nraw <b>html</b>\n</div>\n\n<!-- hidden -->\n\n---\n\n> - item in quote\n";
    let a = parse(src);
    assert_eq!(
        blocks(&a),
        vec![
            (Quote, "quoted @Bob\n> more", [1, 2]),
            (Quote, "not a section", [4, 4]),
            (Paragraph, "<div>\nraw <b>html</b>\n</div>", [6, 8]),
            (ListItem, "item in quote", [14, 14]),
        ]
    );
    assert!(a.source_map.sections.is_empty());
    assert_eq!(refs(&a), vec![(ReferenceKind::Mention, "b1", "Bob", None)]);
}

#[test]
fn mention_rules() {
    let a = parse(
        "mail a@b.com or @Alice, (@Bob) 联系@张三。`@code` and `x`@y @host.com @scope/pkg @Alice again @ alone\n\n```\n@InCode\n```\n",
    );
    let targets: Vec<_> = refs(&a).into_iter().map(|r| r.2).collect();
    assert_eq!(targets, ["Alice", "Bob", "张三"]);
}

#[test]
fn crlf_input() {
    let src = "# Title\r\n\r\npara one\r\nline two\r\n\r\n- item\r\n";
    let a = parse(src);
    assert_eq!(a.text, src);
    assert_eq!(
        blocks(&a),
        vec![
            (BlockType::Heading, "Title", [1, 1]),
            (BlockType::Paragraph, "para one\r\nline two", [3, 4]),
            (BlockType::ListItem, "item", [6, 6])
        ]
    );
    assert_eq!(a.source_map.sections[0].line_range, Some([1, 6]));
}

#[test]
fn char_ranges_count_scalar_values() {
    let a = parse("😀 emoji 你好\n\n第二段 🎉 end\n");
    let b = &a.source_map.blocks;
    assert_eq!(b[0].char_range, [0, 10]);
    assert_eq!(b[1].char_range, [12, 21]);
    assert_eq!(artifact::char_slice(&a.text, b[1].char_range), "第二段 🎉 end");
}

#[test]
fn front_matter_is_skipped_but_counted() {
    let a = parse("---\ntitle: x\ntags: [a]\n---\n# Heading\n\ntext\n\n---\nnot metadata\n---\n");
    assert_eq!(
        blocks(&a),
        vec![
            (BlockType::Heading, "Heading", [5, 5]),
            (BlockType::Paragraph, "text", [7, 7]),
            // A mid-document `---` pair is a thematic break plus a setext heading, not metadata.
            (BlockType::Heading, "not metadata", [10, 10]),
        ]
    );
    assert!(parse("---\ntitle: only\n---\n").source_map.blocks.is_empty());
    // An unclosed front matter block is ordinary Markdown.
    assert_eq!(blocks(&parse("---\ntitle: x\n")).len(), 1);
}

#[test]
fn headings_sections_and_edge_cases() {
    let a = parse("intro\n\n# A\n## B\n### C\n## D\n#\n");
    let s = &a.source_map.sections;
    let summary: Vec<_> = s.iter().map(|s| (s.path.join("/"), s.line_range.unwrap(), s.parent_id.clone())).collect();
    assert_eq!(
        summary,
        vec![
            ("A".into(), [3, 6], None),
            ("A/B".into(), [4, 5], Some("sec_1".into())),
            ("A/B/C".into(), [5, 5], Some("sec_2".into())),
            ("A/D".into(), [6, 6], Some("sec_1".into())),
            ("".into(), [7, 7], None),
        ]
    );
    assert_eq!(a.source_map.blocks[0].section_id, None);
    assert!(s[4].block_ids.is_empty());

    assert!(parse("").source_map.blocks.is_empty());
    let unclosed = parse("text\n\n```py\nprint(1)\n");
    assert_eq!(blocks(&unclosed)[1], (BlockType::Code, "```py\nprint(1)", [3, 4]));
    let deep = format!("{}x\n\n{}y\n", "- ".repeat(300), ">".repeat(300));
    assert_eq!(parse(&deep).source_map.blocks.len(), 2);
    let huge = format!("{} @Long\n", "字".repeat(200_000));
    assert_eq!(parse(&huge).source_map.blocks[0].char_range, [0, 200_006]);
}

#[test]
fn encoding_and_plain_text() {
    let input = ParseInput { bytes: b"ok \xff\xfe", file_name: "bad.md", kind: "markdown" };
    assert_eq!(MarkdownProvider.parse(&input).unwrap_err().code, "text_encoding_invalid");
    let bom = "\u{FEFF}# T\n";
    let a = MarkdownProvider.parse(&ParseInput { bytes: bom.as_bytes(), file_name: "t.md", kind: "markdown" }).unwrap();
    assert_eq!((a.text.as_str(), a.source_hash), ("# T\n", artifact::source_hash(bom.as_bytes())));

    let t = parse_kind("# not heading\n<tag> kept *as is*\n\n\n  second @Ann\n", "text");
    assert_eq!(t.source_map.resource_kind, "text");
    assert_eq!(
        blocks(&t),
        vec![(BlockType::Paragraph, "# not heading\n<tag> kept *as is*", [1, 2]), (BlockType::Paragraph, "second @Ann", [5, 5])]
    );
    assert!(t.source_map.sections.is_empty());
    assert_eq!(refs(&t), vec![(ReferenceKind::Mention, "b2", "Ann", None)]);
}

/// Pseudo-random edits of Markdown-heavy seeds: never panic, always a valid artifact whose
/// line ranges agree with the char ranges, and identical on re-parse.
#[test]
fn nul_is_replaced_one_char_for_one() {
    for kind in ["markdown", "text"] {
        let a = parse_kind("# T\0\n\nbefore\0after\n", kind);
        a.validate().unwrap();
        assert!(!a.text.contains('\0'));
        let b = a.source_map.blocks.iter().find(|b| b.text.starts_with("before")).unwrap();
        assert_eq!((b.text.as_str(), b.char_range, b.line_range), ("before\u{FFFD}after", [6, 18], Some([3, 3])));
    }
}

#[test]
fn fuzz_mutations_never_panic() {
    const PIECES: &[&str] = &[
        "#", "## ", "\n", "\r\n", "\r", "- ", "  ", "\t", "> ", "```", "~~~", "|", "---", "[[", "]]", "](", "![", "@", "`", "*",
        "_", "<div>", "<!--", "-->", "[^1]", "中文", "😀", "1. ", "[ ] ", "{#id}", "\\",
    ];
    let seeds = [DOC, "- a\n  - b\n> q\n\n| x |\n|---|\n", "---\nk: v\n---\n# t\n"];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut parsed = 0;
    for round in 0..400 {
        let mut bytes = seeds[round % seeds.len()].as_bytes().to_vec();
        for _ in 0..1 + next(12) {
            let at = next(bytes.len() + 1);
            match next(4) {
                0 => bytes.splice(at..at, PIECES[next(PIECES.len())].bytes()).for_each(drop),
                1 if at < bytes.len() => drop(bytes.drain(at..(at + next(8)).min(bytes.len()))),
                2 if at < bytes.len() => bytes[at] = next(if round % 8 == 0 { 256 } else { 128 }) as u8,
                _ => bytes.splice(at..at, [b'\n', b' ', b'@']).for_each(drop),
            }
        }
        for kind in ["markdown", "text"] {
            let input = ParseInput { bytes: &bytes, file_name: "f.md", kind };
            let Ok(a) = MarkdownProvider.parse(&input) else { continue };
            parsed += 1;
            a.validate().unwrap_or_else(|e| panic!("{e} for {:?}", String::from_utf8_lossy(&bytes)));
            assert_eq!(Ok(&a), MarkdownProvider.parse(&input).as_ref());
            let lines = LineIndex::new(&a.text);
            for b in &a.source_map.blocks {
                let start: usize = a.text.chars().take(b.char_range[0] as usize).map(char::len_utf8).sum();
                assert_eq!(lines.line_of(start), b.line_range.unwrap()[0], "{b:?}");
                assert!(b.line_range.unwrap()[0] <= b.line_range.unwrap()[1]);
            }
        }
    }
    assert!(parsed > 400, "most mutations stay valid UTF-8, got {parsed}");
}
