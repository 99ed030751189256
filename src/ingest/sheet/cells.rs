//! A cell value as the file shows it (cached formula results,
//! simple number formats, dates as ISO dates). Nothing here evaluates a formula.

use calamine::{DataRef, ExcelDateTime};

/// A cell value as displayed: `None` for an empty cell. `format` is the cell's number format
/// code (XLSX styles), applied as far as [`apply_number_format`] understands it.
pub fn display(value: &DataRef<'_>, format: Option<&str>) -> Option<String> {
    let s = match value {
        DataRef::Empty => return None,
        DataRef::String(s) => s.clone(),
        DataRef::SharedString(s) => s.to_string(),
        DataRef::Int(i) => apply_number_format(*i as f64, format).unwrap_or_else(|| i.to_string()),
        DataRef::Float(f) => apply_number_format(*f, format).unwrap_or_else(|| plain_number(*f)),
        DataRef::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_string(),
        DataRef::DateTime(d) => date_time(d),
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => s.clone(),
        DataRef::Error(e) => e.to_string(),
    };
    let trimmed = s.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// The value of an owned [`calamine::Data`] (ODS, XLS ranges) as displayed.
pub fn display_owned(value: &calamine::Data) -> Option<String> {
    use calamine::Data;
    let r = match value {
        Data::Int(i) => DataRef::Int(*i),
        Data::Float(f) => DataRef::Float(*f),
        Data::String(s) => DataRef::SharedString(s),
        Data::Bool(b) => DataRef::Bool(*b),
        Data::DateTime(d) => DataRef::DateTime(*d),
        Data::DateTimeIso(s) => DataRef::DateTimeIso(s.clone()),
        Data::DurationIso(s) => DataRef::DurationIso(s.clone()),
        Data::Error(e) => DataRef::Error(e.clone()),
        Data::Empty => DataRef::Empty,
    };
    display(&r, None)
}

/// A number without a format: integers without `.0`, others in the shortest form that reads
/// back to the same value.
pub fn plain_number(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 { format!("{}", f as i64) } else { format!("{f}") }
}

/// ISO date (`2027-03-31`), date and time (`2027-03-31 14:05:00`), or a duration (`36:30:00`).
fn date_time(d: &ExcelDateTime) -> String {
    if d.is_duration() {
        let secs = (d.as_f64() * 86_400.0).round() as i64;
        return format!("{}:{:02}:{:02}", secs / 3600, (secs % 3600) / 60, secs % 60);
    }
    let (y, mo, da, h, mi, s, _) = d.to_ymd_hms_milli();
    if d.as_f64() < 1.0 && d.as_f64() > 0.0 {
        return format!("{h:02}:{mi:02}:{s:02}");
    }
    if (h, mi, s) == (0, 0, 0) {
        format!("{y:04}-{mo:02}-{da:02}")
    } else {
        format!("{y:04}-{mo:02}-{da:02} {h:02}:{mi:02}:{s:02}")
    }
}

/// The common number formats: percentages, a fixed number of decimals, thousands separators
/// (`0%`, `0.00%`, `0.0`, `#,##0`, `#,##0.00`; the first section of the code; literal text and
/// currency signs around the number are kept). `None`: `General` or a code not understood.
pub fn apply_number_format(v: f64, format: Option<&str>) -> Option<String> {
    let code = strip_locale(format?.split(';').next()?.trim());
    let code = code.as_str();
    if code.is_empty() || code.eq_ignore_ascii_case("general") || code == "@" {
        return None;
    }
    let start = code.find(['0', '#'])?;
    let end = code.rfind(['0', '#', '%']).map(|e| e + 1)?;
    let pattern = &code[start..end];
    if pattern.chars().any(|c| !matches!(c, '0' | '#' | ',' | '.' | '%')) {
        return None;
    }
    let percent = pattern.ends_with('%');
    let decimals = pattern.split_once('.').map(|(_, d)| d.chars().filter(|c| *c == '0').count()).unwrap_or(0);
    let grouped = pattern.split('.').next().is_some_and(|int| int.contains(','));
    let v = if percent { v * 100.0 } else { v };
    let mut num = format!("{:.*}", decimals, v);
    if grouped {
        num = group_thousands(&num);
    }
    let literal = |s: &str| s.replace(['"', '\\'], "").replace("_)", "").replace("_(", "");
    let prefix = literal(&code[..start]);
    let suffix = literal(&code[end..]);
    Some(format!("{prefix}{num}{}{}", if percent { "%" } else { "" }, suffix.trim_end()))
}

/// `[$¥-804]` → `¥`, `[Red]` → ``.
fn strip_locale(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find(']') else { break };
        let inner = &rest[open + 1..open + close];
        if let Some(sym) = inner.strip_prefix('$') {
            out.push_str(sym.split('-').next().unwrap_or(""));
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

fn group_thousands(num: &str) -> String {
    let (sign, body) = num.strip_prefix('-').map(|b| ("-", b)).unwrap_or(("", num));
    let (int, frac) = body.split_once('.').map(|(i, f)| (i, Some(f))).unwrap_or((body, None));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{out}.{f}"),
        None => format!("{sign}{out}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats_apply_as_displayed() {
        assert_eq!(apply_number_format(0.125, Some("0.00%")).as_deref(), Some("12.50%"));
        assert_eq!(apply_number_format(0.5, Some("0%")).as_deref(), Some("50%"));
        assert_eq!(apply_number_format(700000.0, Some("#,##0")).as_deref(), Some("700,000"));
        assert_eq!(apply_number_format(-1234.5, Some("#,##0.00")).as_deref(), Some("-1,234.50"));
        assert_eq!(apply_number_format(3.26, Some("0.0")).as_deref(), Some("3.3"));
        assert_eq!(apply_number_format(12.0, Some("\"$\"#,##0.00")).as_deref(), Some("$12.00"));
        assert_eq!(apply_number_format(12.0, Some("[$¥-804]#,##0")).as_deref(), Some("¥12"));
        assert_eq!(apply_number_format(12.0, Some("General")), None);
        assert_eq!(apply_number_format(12.0, Some("0.00E+00")), None);
        assert_eq!(plain_number(3.0), "3");
        assert_eq!(plain_number(0.1), "0.1");
    }

    #[test]
    fn dates_display_as_iso() {
        use calamine::ExcelDateTimeType;
        let d = ExcelDateTime::new(46_477.0, ExcelDateTimeType::DateTime, false);
        assert_eq!(display(&DataRef::DateTime(d), None).as_deref(), Some("2027-03-31"));
        let t = ExcelDateTime::new(46_477.5, ExcelDateTimeType::DateTime, false);
        assert_eq!(display(&DataRef::DateTime(t), None).as_deref(), Some("2027-03-31 12:00:00"));
        assert_eq!(display(&DataRef::Bool(true), None).as_deref(), Some("TRUE"));
        assert_eq!(display(&DataRef::String("  ".into()), None), None);
    }
}
