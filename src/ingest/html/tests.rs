use super::*;

fn parse(html: &str) -> ParsedArtifact {
    let art = HtmlProvider.parse(&ParseInput { bytes: html.as_bytes(), file_name: "page.html", kind: "html" }).unwrap();
    art.validate().unwrap();
    art
}

fn texts(art: &ParsedArtifact) -> Vec<&str> {
    art.source_map.blocks.iter().map(|b| b.text.as_str()).collect()
}

const WIKI: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Travel policy - Intranet</title>
<script>var tracker = "never text";</script><style>p { color: red }</style></head>
<body>
<header><a href="/">Home</a> <nav><a href="/a">Menu item</a></nav></header>
<main>
  <h1>Travel policy</h1>
  <p>Hotels are booked   through the <a href="https://travel.example.com/book">travel desk</a>.</p>
  <h2>Limits</h2>
  <table>
    <tr><th>City</th><th>Nightly cap</th></tr>
    <tr><td>Beijing</td><td>650 CNY</td></tr>
  </table>
  <ul><li>Economy class<ul><li>Business above 6 h</li></ul></li></ul>
  <blockquote><p>Receipts within 30 days.</p></blockquote>
  <pre>  line 1
    line 2  </pre>
  <div>Loose text in a div <img src="x.png" alt="org chart"></div>
  <form><input value="search"><button>Go</button></form>
  <p hidden>hidden text</p>
</main>
<footer>© footer text</footer>
</body></html>"#;

#[test]
fn the_main_content_becomes_blocks_and_the_chrome_does_not() {
    let art = parse(WIKI);
    assert_eq!(
        texts(&art),
        [
            "Travel policy",
            "Hotels are booked through the travel desk.",
            "Limits",
            "City | Nightly cap",
            "City: Beijing | Nightly cap: 650 CNY",
            "Economy class",
            "Business above 6 h",
            "Receipts within 30 days.",
            "line 1\n  line 2",
            "Loose text in a div org chart",
        ]
    );
    let types: Vec<BlockType> = art.source_map.blocks.iter().map(|b| b.block_type).collect();
    use BlockType::*;
    assert_eq!(types, [Heading, Paragraph, Heading, TableRow, TableRow, ListItem, ListItem, Quote, Code, Paragraph]);
    assert!(!art.text.contains("never text") && !art.text.contains("Menu") && !art.text.contains("footer"));
    assert_eq!(art.source_map.resource_kind, "html");
}

#[test]
fn blocks_are_located_by_heading_path_and_element_index() {
    let art = parse(WIKI);
    let row = &art.source_map.blocks[4];
    let section = art.source_map.sections.iter().find(|s| Some(&s.id) == row.section_id.as_ref()).unwrap();
    assert_eq!(section.path, ["Travel policy", "Limits"]);
    // (//*)[n]: html, head, meta, title, script, style, body, header, a, nav, a, main, h1, p, a,
    // h2, table, tbody (inserted by the parser), tr, th, th, tr ← 22.
    assert_eq!(row.paragraph_ordinal, Some(22));
    assert_eq!(art.source_map.blocks[0].paragraph_ordinal, Some(13));
    let link = &art.source_map.references[0];
    assert_eq!((link.target.as_str(), link.label.as_deref()), ("https://travel.example.com/book", Some("travel desk")));
    assert_eq!(link.source_block_id, "b2");
}

#[test]
fn without_an_h1_the_title_is_the_first_heading() {
    let art = parse("<html><head><title> Q3  review </title></head><body><p>Revenue grew.</p></body></html>");
    assert_eq!(texts(&art), ["Q3 review", "Revenue grew."]);
    assert_eq!(art.source_map.blocks[0].paragraph_ordinal, Some(3));
    assert_eq!(art.source_map.sections[0].path, ["Q3 review"]);
}

#[test]
fn without_main_the_body_minus_its_chrome_is_read_and_a_single_article_wins() {
    let art = parse("<body><nav>Links</nav><p>Body text</p><aside>Ads</aside><footer>F</footer></body>");
    assert_eq!(texts(&art), ["Body text"]);
    let art = parse("<body><p>Teaser</p><article><header><h1>Post</h1></header><p>Story</p></article></body>");
    assert_eq!(texts(&art), ["Post", "Story"]);
}

#[test]
fn nested_tables_flatten_into_their_cell_and_headless_tables_join_cells() {
    let art = parse(
        "<body><table><tr><td>a</td><td><table><tr><td>x</td><td>y</td></tr></table></td></tr>\
         <tr><td>b</td><td>c</td></tr></table></body>",
    );
    assert_eq!(texts(&art), ["a | x y", "b | c"]);
}

#[test]
fn chinese_pages_in_their_own_charset_are_read() {
    let (bytes, _, _) = encoding_rs::GBK.encode(
        "<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=gb2312\"><title>采购</title></head>\
         <body><h1>农贸市场项目</h1><p>预算金额（元）：700000</p></body></html>",
    );
    let art = HtmlProvider.parse(&ParseInput { bytes: &bytes, file_name: "a.htm", kind: "html" }).unwrap();
    assert_eq!(texts(&art), ["农贸市场项目", "预算金额（元）：700000"]);
}

#[test]
fn a_hundred_thousand_nested_elements_parse_without_exhausting_the_stack() {
    let depth = 100_000;
    let html = format!("<body>{}<p>deep needle</p>{}</body>", "<div>".repeat(depth), "</div>".repeat(depth));
    let art = parse(&html);
    assert!(texts(&art).contains(&"deep needle"), "{:?}", texts(&art));
}

#[test]
fn binary_bytes_are_refused_with_a_code() {
    let err = HtmlProvider.parse(&ParseInput { bytes: b"<p>a\0b</p>", file_name: "x.html", kind: "html" }).unwrap_err();
    assert_eq!(err.code, "html_malformed");
}

#[test]
fn parsing_is_deterministic() {
    assert_eq!(parse(WIKI), parse(WIKI));
}
