//! Small formatting helpers for templates.

pub fn human_size(bytes: &i64) -> String {
    let b = *bytes as f64;
    match *bytes {
        n if n < 1024 => format!("{n} B"),
        n if n < 1024 * 1024 => format!("{:.1} KB", b / 1024.0),
        n if n < 1024 * 1024 * 1024 => format!("{:.1} MB", b / 1024.0 / 1024.0),
        _ => format!("{:.2} GB", b / 1024.0 / 1024.0 / 1024.0),
    }
}

pub fn short_hash(h: &str) -> String {
    let hex = h.trim_start_matches("sha256:");
    hex.chars().take(12).collect()
}
