//! The endpoint and its failures: where requests go (`{base}/v1/chat/completions`), which
//! stable code a failure gets, and messages that are safe to journal (no API key, no URL
//! query or userinfo, bounded length).

use crate::{
    agents::AgentError,
    platform::{
        SecretString,
        http::{self, HttpError, HttpErrorKind},
    },
};

/// The failure codes of this runtime (`run.failed.code`), besides `agent_timeout`.
pub const UNAUTHORIZED: &str = "llm_unauthorized";
pub const UNAVAILABLE: &str = "llm_unavailable";
pub const BAD_RESPONSE: &str = "llm_bad_response";
pub const STREAM_ERROR: &str = "llm_stream_error";

/// Longest upstream detail quoted in a message.
const DETAIL_CHARS: usize = 300;

/// `{endpoint}/chat/completions`, where an endpoint whose path names no API version gets `/v1`
/// appended (admins paste both `http://host:8000` and `http://host:8000/v1`; a versioned path
/// such as `/api/paas/v4` or `/v1beta/openai` is taken as the API root); an endpoint that
/// already names `/chat/completions` is taken as it is.
pub fn chat_url(endpoint: &str) -> Result<reqwest::Url, String> {
    let base = endpoint.trim().trim_end_matches('/');
    if base.ends_with("/chat/completions") {
        return parse_http(base);
    }
    parse_http(&format!("{}/chat/completions", api_root(base)?))
}

/// `{root}/models` of `endpoint` (the provider's model list, `GET`), with the same rules as
/// [`chat_url`].
pub fn models_url(endpoint: &str) -> Result<reqwest::Url, String> {
    let base = endpoint.trim().trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    parse_http(&format!("{}/models", api_root(base)?))
}

/// The API root of `base` (no trailing slash): itself when a path segment names a version
/// (`v1`, `v4`, `v1beta`), else with `/v1`.
fn api_root(base: &str) -> Result<String, String> {
    let url = parse_http(base)?;
    let versioned = url.path_segments().into_iter().flatten().any(|s| {
        let mut c = s.chars();
        c.next() == Some('v') && c.next().is_some_and(|d| d.is_ascii_digit())
    });
    Ok(if versioned { base.to_string() } else { format!("{base}/v1") })
}

fn parse_http(s: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(s).map_err(|_| "the configured endpoint is not a valid URL".to_string())?;
    match url.scheme() {
        "http" | "https" if url.host_str().is_some() => Ok(url),
        _ => Err("the configured endpoint is not an http(s) URL".to_string()),
    }
}

/// The code of a non-success status: 401/403 → `llm_unauthorized`; 408, 429, 5xx →
/// `llm_unavailable`; any other → `llm_bad_response`.
pub fn code_of_status(status: reqwest::StatusCode) -> &'static str {
    match HttpErrorKind::of_status(status) {
        HttpErrorKind::Unauthorized => UNAUTHORIZED,
        HttpErrorKind::Unavailable | HttpErrorKind::Timeout => UNAVAILABLE,
        HttpErrorKind::BadResponse => BAD_RESPONSE,
    }
}

/// The message of a non-success status. A refused key gets no upstream detail: OpenAI's 401
/// quotes part of the key, which scrubbing the whole key would not catch.
pub fn status_message(shown: &str, status: reqwest::StatusCode, body: &[u8], key: Option<&SecretString>) -> String {
    let code = status.as_u16();
    if HttpErrorKind::of_status(status) == HttpErrorKind::Unauthorized {
        return format!("{shown} refused the credentials (HTTP {code}); check the agent's API key");
    }
    clean(&format!("{shown} answered HTTP {code}: {}", upstream_detail(body)), key)
}

/// A failed send: no answer (`llm_unavailable`), or an answer the client refuses, such as a
/// redirect (`llm_bad_response`).
pub fn send_error(shown: &str, e: &HttpError, key: Option<&SecretString>) -> AgentError {
    match e.kind {
        HttpErrorKind::BadResponse => AgentError::upstream(BAD_RESPONSE, clean(&format!("{shown} answered {}", e.message), key)),
        _ => AgentError::upstream(UNAVAILABLE, transport_message(shown, e, key)),
    }
}

/// The message of a request that got no answer.
pub fn transport_message(shown: &str, e: &HttpError, key: Option<&SecretString>) -> String {
    clean(&format!("cannot reach {shown}: {}", e.message), key)
}

/// The error text of an error body: OpenAI's `{"error":{"message"}}`, `{"error":"…"}`, a
/// `{"message"}`, or else the start of the body.
pub fn upstream_detail(body: &[u8]) -> String {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let msg = json
        .as_ref()
        .and_then(|v| v.get("error").or_else(|| v.get("message")))
        .and_then(|e| e.get("message").or(Some(e)))
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let msg = msg.trim();
    if msg.is_empty() { "(empty body)".to_string() } else { msg.to_string() }
}

/// `text` without the key (when set), with every URL cut to `scheme://host[:port]/path`, on
/// one line, at most [`DETAIL_CHARS`] characters.
pub fn clean(text: &str, key: Option<&SecretString>) -> String {
    let scrubbed = match key {
        Some(k) => k.scrub(text),
        None => text.to_string(),
    };
    let mut out = String::with_capacity(scrubbed.len());
    let mut rest = scrubbed.as_str();
    while let Some(start) = find_url(rest) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail.find(|c: char| c.is_whitespace() || "\"'<>`)]},".contains(c)).unwrap_or(tail.len());
        let candidate = &tail[..end];
        match reqwest::Url::parse(candidate) {
            Ok(u) => out.push_str(&http::display_url(&u)),
            // Unparseable: drop it rather than risk showing its query.
            Err(_) => out.push_str("[url]"),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    let one_line: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(DETAIL_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// Byte offset of the next `http://` or `https://` (case-insensitive).
fn find_url(s: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    [lower.find("http://"), lower.find("https://")].into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use reqwest::StatusCode as S;

    use super::*;

    #[test]
    fn endpoints_are_normalised_with_or_without_v1() {
        for (given, want) in [
            ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/chat/completions"),
            ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/chat/completions"),
            ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1/chat/completions"),
            (" https://llm.example/openai/ ", "https://llm.example/openai/v1/chat/completions"),
            ("https://llm.example/v1/chat/completions", "https://llm.example/v1/chat/completions"),
            // Versioned API roots of the providers are taken as they are.
            ("https://open.bigmodel.cn/api/paas/v4", "https://open.bigmodel.cn/api/paas/v4/chat/completions"),
            (
                "https://generativelanguage.googleapis.com/v1beta/openai/",
                "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
            ),
            ("https://api.deepseek.com", "https://api.deepseek.com/v1/chat/completions"),
            ("https://api.groq.com/openai/v1", "https://api.groq.com/openai/v1/chat/completions"),
            // A word that starts with v is no version.
            ("https://llm.example/vllm", "https://llm.example/vllm/v1/chat/completions"),
        ] {
            assert_eq!(chat_url(given).unwrap().as_str(), want, "{given}");
        }
        for (given, want) in [
            ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1/models"),
            ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/models"),
            ("https://llm.example/v1/chat/completions", "https://llm.example/v1/models"),
            ("https://open.bigmodel.cn/api/paas/v4", "https://open.bigmodel.cn/api/paas/v4/models"),
        ] {
            assert_eq!(models_url(given).unwrap().as_str(), want, "{given}");
        }
        assert!(chat_url("ftp://x/v1").is_err());
        assert!(chat_url("not a url").is_err());
    }

    #[test]
    fn statuses_get_stable_codes() {
        assert_eq!(code_of_status(S::UNAUTHORIZED), UNAUTHORIZED);
        assert_eq!(code_of_status(S::FORBIDDEN), UNAUTHORIZED);
        assert_eq!(code_of_status(S::REQUEST_TIMEOUT), UNAVAILABLE);
        assert_eq!(code_of_status(S::TOO_MANY_REQUESTS), UNAVAILABLE);
        assert_eq!(code_of_status(S::INTERNAL_SERVER_ERROR), UNAVAILABLE);
        assert_eq!(code_of_status(S::BAD_GATEWAY), UNAVAILABLE);
        assert_eq!(code_of_status(S::BAD_REQUEST), BAD_RESPONSE);
        assert_eq!(code_of_status(S::NOT_FOUND), BAD_RESPONSE);
        assert_eq!(code_of_status(S::UNPROCESSABLE_ENTITY), BAD_RESPONSE);
    }

    #[test]
    fn messages_carry_no_key_no_query_and_no_userinfo() {
        let key = SecretString::new("sk-live-123456");
        let body = br#"{"error":{"message":"model sk-live-123456 not found, see https://u:p@docs.example/x?sig=abc#f and http://h:9/y?q=1."}}"#;
        let m = status_message("http://h/v1/chat/completions", S::NOT_FOUND, body, Some(&key));
        assert!(!m.contains("sk-live-123456") && !m.contains("sig=") && !m.contains("u:p") && !m.contains("q=1"), "{m}");
        assert!(m.contains("https://docs.example/x") && m.contains("http://h:9/y") && m.contains("HTTP 404"), "{m}");
        // A refused key: no upstream detail at all (it may quote part of the key).
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-liv***456"}}"#;
        let m = status_message("http://h/v1/chat/completions", S::UNAUTHORIZED, body, Some(&key));
        assert!(!m.contains("sk-liv") && m.contains("HTTP 401"), "{m}");
        // Long bodies are cut; plain text bodies are quoted.
        let long = "x".repeat(2000);
        assert!(clean(&long, None).chars().count() <= DETAIL_CHARS + 1);
        assert_eq!(upstream_detail(b"  Bad Gateway\n"), "Bad Gateway");
        assert_eq!(upstream_detail(br#"{"error":"overloaded"}"#), "overloaded");
        assert_eq!(upstream_detail(b""), "(empty body)");
    }
}
