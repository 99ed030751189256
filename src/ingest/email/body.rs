//! A plain-text mail body as blocks: paragraphs split at blank lines, quoted replies (`>`
//! lines and the "On … wrote:" / "在…写道：" line that introduces them) as quote blocks.

use crate::ingest::artifact::BlockType;

/// One paragraph of a body and whether it is quoted from an earlier message.
#[derive(Debug, Clone, PartialEq)]
pub struct Para {
    pub block_type: BlockType,
    pub text: String,
}

pub fn paragraphs(body: &str) -> Vec<Para> {
    let body = body.replace("\r\n", "\n");
    let mut out: Vec<Para> = Vec::new();
    let mut cur: Vec<(bool, &str)> = Vec::new();
    let lines: Vec<&str> = body.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let quoted = line.trim_start().starts_with('>');
        let next_quoted = lines.get(i + 1).is_some_and(|n| n.trim_start().starts_with('>'));
        let intro = !quoted && next_quoted && is_attribution(line);
        if line.trim().is_empty() || cur.last().is_some_and(|(q, _)| *q != (quoted || intro)) {
            flush(&mut out, &mut cur);
        }
        if !line.trim().is_empty() {
            cur.push((quoted || intro, line));
        }
    }
    flush(&mut out, &mut cur);
    out
}

/// "On Mon, 1 Dec 2026 at 10:00, Ann <ann@x> wrote:", "在 2026年12月1日，张三 写道：".
fn is_attribution(line: &str) -> bool {
    let l = line.trim();
    l.ends_with("wrote:") || l.ends_with("写道：") || l.ends_with("写道:") || l.ends_with("schrieb:")
}

fn flush(out: &mut Vec<Para>, cur: &mut Vec<(bool, &str)>) {
    if cur.is_empty() {
        return;
    }
    let quoted = cur.iter().all(|(q, _)| *q);
    let text = cur
        .iter()
        .map(|(_, l)| {
            let l = l.trim();
            if quoted { l.trim_start_matches(['>', ' ']) } else { l }
        })
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    cur.clear();
    if !text.is_empty() {
        out.push(Para { block_type: if quoted { BlockType::Quote } else { BlockType::Paragraph }, text });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_and_quoted_replies_are_told_apart() {
        let body = "Hi all,\r\n\r\nThe budget is approved:\r\n700,000 CNY.\r\n\r\nOn Mon, 1 Dec 2026, Ann wrote:\r\n> Is the budget\r\n> approved?\r\n>\r\n> Ann\r\n";
        let p = paragraphs(body);
        assert_eq!(
            p,
            [
                Para { block_type: BlockType::Paragraph, text: "Hi all,".into() },
                Para { block_type: BlockType::Paragraph, text: "The budget is approved:\n700,000 CNY.".into() },
                Para {
                    block_type: BlockType::Quote,
                    text: "On Mon, 1 Dec 2026, Ann wrote:\nIs the budget\napproved?\nAnn".into()
                },
            ]
        );
    }
}
