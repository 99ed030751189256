//! [`SecretString`]: a token or key that must never appear in a log line or an error.

/// A secret from the environment: `Debug` and `Display` print `[redacted]`; the value is
/// only reachable through [`SecretString::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(s: impl Into<String>) -> Self {
        SecretString(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replace every occurrence of the secret in `text` with `[redacted]` (a no-op for an empty
    /// secret): the last line of defence when an upstream server echoes it back.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() { text.to_string() } else { text.replace(self.0.as_str(), "[redacted]") }
    }
}

/// Equal bytes, compared in time that depends only on the lengths (tokens, keys).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::fmt::Display for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_scrubbed() {
        let s = SecretString::new("sk-123");
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
        assert_eq!(s.expose(), "sk-123");
        assert_eq!(s.scrub("key sk-123 rejected"), "key [redacted] rejected");
        assert_eq!(SecretString::new("").scrub("abc"), "abc");
    }
}
