//! A1 notation, the cell places of spreadsheet evidence: column letters, cell and range
//! references, and a sheet name quoted as a formula writes it (`'Forecast 2027'!A5:C5`).

/// `0` → `A`, `25` → `Z`, `26` → `AA` (0-based column).
pub fn col_letters(col: u32) -> String {
    let mut n = col as u64 + 1;
    let mut out = Vec::new();
    while n > 0 {
        let r = ((n - 1) % 26) as u8;
        out.push(b'A' + r);
        n = (n - 1) / 26;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// `(4, 2)` → `C5` (0-based row and column).
pub fn cell_ref(row: u32, col: u32) -> String {
    format!("{}{}", col_letters(col), row as u64 + 1)
}

/// `A5:C5`, or `C7` for a single cell (0-based, inclusive corners).
pub fn range_ref(first: (u32, u32), last: (u32, u32)) -> String {
    if first == last {
        cell_ref(first.0, first.1)
    } else {
        format!("{}:{}", cell_ref(first.0, first.1), cell_ref(last.0, last.1))
    }
}

/// `C7` → `(6, 2)` (0-based); `None` for anything else.
pub fn parse_cell(s: &str) -> Option<(u32, u32)> {
    let split = s.find(|c: char| c.is_ascii_digit())?;
    let (letters, digits) = s.split_at(split);
    if letters.is_empty() || letters.len() > 3 || !letters.bytes().all(|b| b.is_ascii_uppercase()) {
        return None;
    }
    if digits.is_empty() || digits.len() > 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let col = letters.bytes().fold(0u32, |acc, b| acc * 26 + u32::from(b - b'A' + 1)) - 1;
    let row: u32 = digits.parse().ok()?;
    (row >= 1).then(|| (row - 1, col))
}

/// `A5:C5` or `C7` → inclusive 0-based corners (first ≤ last).
pub fn parse_range(s: &str) -> Option<((u32, u32), (u32, u32))> {
    let (a, b) = match s.split_once(':') {
        Some((a, b)) => (parse_cell(a)?, parse_cell(b)?),
        None => {
            let c = parse_cell(s)?;
            (c, c)
        }
    };
    Some(((a.0.min(b.0), a.1.min(b.1)), (a.0.max(b.0), a.1.max(b.1))))
}

/// A sheet name as a formula would write it: `Sheet1`, `预算`, `'Forecast 2027'`, `'It''s'`.
pub fn quoted_sheet(name: &str) -> String {
    let plain = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        && parse_cell(&name.to_ascii_uppercase()).is_none();
    if plain { name.to_string() } else { format!("'{}'", name.replace('\'', "''")) }
}

/// `'Forecast 2027'!A5:C5`; without a sheet (CSV) just the range.
pub fn citation(sheet: Option<&str>, range: &str) -> String {
    match sheet {
        Some(s) => format!("{}!{range}", quoted_sheet(s)),
        None => range.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1_references_round_trip() {
        assert_eq!(col_letters(0), "A");
        assert_eq!(col_letters(25), "Z");
        assert_eq!(col_letters(26), "AA");
        assert_eq!(col_letters(16_383), "XFD");
        assert_eq!(cell_ref(6, 2), "C7");
        assert_eq!(range_ref((4, 0), (4, 2)), "A5:C5");
        assert_eq!(range_ref((6, 2), (6, 2)), "C7");
        assert_eq!(parse_cell("XFD1048576"), Some((1_048_575, 16_383)));
        assert_eq!(parse_range("C5:A5"), Some(((4, 0), (4, 2))));
        assert_eq!(parse_cell("a1"), None);
        assert_eq!(parse_cell("A0"), None);
        assert_eq!(parse_range("A1:"), None);
    }

    #[test]
    fn sheet_names_are_quoted_as_excel_does() {
        assert_eq!(citation(Some("Forecast 2027"), "A5:C5"), "'Forecast 2027'!A5:C5");
        assert_eq!(citation(Some("Sheet1"), "C7"), "Sheet1!C7");
        assert_eq!(citation(Some("预算"), "B2"), "预算!B2");
        assert_eq!(citation(Some("It's"), "A1"), "'It''s'!A1");
        assert_eq!(citation(Some("A1"), "A1"), "'A1'!A1");
        assert_eq!(citation(Some("2027"), "A1"), "'2027'!A1");
        assert_eq!(citation(None, "A12:D12"), "A12:D12");
    }
}
