//! The audit log as CSV (RFC 4180): what the admin page's export button,
//! `GET /api/audit?format=csv` and `mnote audit --format csv` write.

use super::queries::AuditEvent;

/// The CSV header line's columns, in order.
pub const CSV_COLUMNS: &[&str] = &["id", "at", "actor_id", "actor_email", "client_ip", "action", "target", "outcome", "detail"];

/// The rows as CSV with a header line. A cell a spreadsheet would run as a formula (`=`, `+`,
/// `-`, `@`, tab, CR at its start) gets a leading `'`: targets and e-mails are user input.
pub fn csv(rows: &[AuditEvent]) -> String {
    let mut out = CSV_COLUMNS.join(",");
    out.push_str("\r\n");
    for e in rows {
        let cells = [
            e.id.to_string(),
            e.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            e.actor_id.map(|u| u.to_string()).unwrap_or_default(),
            e.actor_email.clone(),
            e.client_ip.clone().unwrap_or_default(),
            e.action.as_str().to_string(),
            e.target.clone(),
            e.outcome.as_str().to_string(),
            e.detail.clone(),
        ];
        let line: Vec<String> = cells.iter().map(|c| cell(c)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

fn cell(raw: &str) -> String {
    let defused = if raw.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{raw}") } else { raw.to_string() };
    if defused.contains([',', '"', '\n', '\r']) { format!("\"{}\"", defused.replace('"', "\"\"")) } else { defused }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Action, Outcome};

    fn row(target: &str) -> AuditEvent {
        AuditEvent {
            id: 7,
            at: chrono::DateTime::parse_from_rfc3339("2026-12-07T10:00:00Z").unwrap().to_utc(),
            actor_id: None,
            actor_email: "a@x.test".into(),
            client_ip: Some("127.0.0.1".into()),
            action: Action::KbCreate,
            target: target.into(),
            outcome: Outcome::Success,
            detail: String::new(),
        }
    }

    #[test]
    fn csv_quotes_and_defuses_formulas() {
        let out = csv(&[row("kb:1 \"Hand,book\""), row("=HYPERLINK(\"x\")")]);
        let lines: Vec<&str> = out.split("\r\n").collect();
        assert_eq!(lines[0], CSV_COLUMNS.join(","));
        assert_eq!(lines[1], "7,2026-12-07T10:00:00.000Z,,a@x.test,127.0.0.1,kb.create,\"kb:1 \"\"Hand,book\"\"\",success,");
        assert!(lines[2].contains(",\"'=HYPERLINK(\"\"x\"\")\","), "{}", lines[2]);
    }
}
