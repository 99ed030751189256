//! The tools' one error type: [`ToolError`], a stable [`ToolErrorCode`] and a message that
//! never carries server internals; and the argument parsing every tool shares.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{error::AppError, journal::ErrorBody};

/// Why a tool call failed. [`ToolErrorCode::as_str`] is the code the model, the journal and
/// ACP see (`invalid_arguments`); [`ToolErrorCode::public`] the one MCP clients see, as the
/// API says it (`invalid_input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolErrorCode {
    /// Arguments that do not parse or are out of range.
    InvalidArguments,
    /// No tool of that name is offered to this caller.
    UnknownTool,
    /// The evidence or source does not exist or is not visible to the actor.
    NotFound,
    Forbidden,
    RateLimited,
    /// The database or LightRAG is not there for this call.
    UpstreamUnavailable,
    Internal,
    /// Any other code of a service error ([`AppError::code`]), kept as it is.
    Service(&'static str),
}

impl ToolErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorCode::InvalidArguments => "invalid_arguments",
            ToolErrorCode::UnknownTool => "unknown_tool",
            ToolErrorCode::NotFound => "not_found",
            ToolErrorCode::Forbidden => "forbidden",
            ToolErrorCode::RateLimited => "rate_limited",
            ToolErrorCode::UpstreamUnavailable => "upstream_unavailable",
            ToolErrorCode::Internal => "internal",
            ToolErrorCode::Service(code) => code,
        }
    }

    /// The code as the API and MCP clients know it: `invalid_arguments` is `invalid_input`.
    pub fn public(self) -> &'static str {
        match self {
            ToolErrorCode::InvalidArguments => "invalid_input",
            c => c.as_str(),
        }
    }

    /// A code as the journal or a [`super::ToolResult`] carries it, as MCP clients see it
    /// (see [`ToolErrorCode::public`]).
    pub fn public_of(code: &str) -> &str {
        if code == ToolErrorCode::InvalidArguments.as_str() { ToolErrorCode::InvalidArguments.public() } else { code }
    }

    /// The tool code of a service error's code.
    fn of_app(code: &'static str) -> ToolErrorCode {
        match code {
            "invalid_input" => ToolErrorCode::InvalidArguments,
            "not_found" => ToolErrorCode::NotFound,
            "forbidden" => ToolErrorCode::Forbidden,
            "rate_limited" => ToolErrorCode::RateLimited,
            "upstream_unavailable" => ToolErrorCode::UpstreamUnavailable,
            "internal" => ToolErrorCode::Internal,
            other => ToolErrorCode::Service(other),
        }
    }
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: ToolErrorCode,
    pub message: String,
}

impl ToolError {
    pub fn new(code: ToolErrorCode, message: impl Into<String>) -> ToolError {
        ToolError { code, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorCode::InvalidArguments, message)
    }

    pub fn unknown_tool(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorCode::UnknownTool, message)
    }

    /// `{"error": {code, message}}`: a failure as the model and ACP agents get it.
    pub fn content(&self) -> Value {
        json!({"error": {"code": self.code.as_str(), "message": self.message}})
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A service function's error as the agent sees it: its code, and a message that never
/// carries server internals (a server-side failure is logged here).
impl From<AppError> for ToolError {
    fn from(e: AppError) -> ToolError {
        let code = ToolErrorCode::of_app(e.code());
        if e.status().is_server_error() {
            tracing::warn!(code = code.as_str(), "tool call failed: {e:#}");
        }
        ToolError::new(code, e.public_message())
    }
}

impl From<sqlx::Error> for ToolError {
    fn from(e: sqlx::Error) -> ToolError {
        AppError::from(e).into()
    }
}

/// The journal's form (`tool.completed`'s `error`).
impl From<ToolError> for ErrorBody {
    fn from(e: ToolError) -> ErrorBody {
        ErrorBody { code: e.code.as_str().into(), message: e.message }
    }
}

/// A tool's arguments from what a model or agent sent: an object, nothing at all (`null` or
/// `""`: no arguments), or the object as a JSON string (some agents send that).
pub fn parse<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    let arguments = match arguments {
        Value::Null => json!({}),
        Value::String(s) if s.trim().is_empty() => json!({}),
        Value::String(s) => serde_json::from_str(&s).map_err(|e| ToolError::invalid(e.to_string()))?,
        v => v,
    };
    serde_json::from_value(arguments).map_err(|e| ToolError::invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_codes_map_to_tool_codes_and_back_to_the_public_ones() {
        let e = ToolError::from(AppError::NotFound);
        assert_eq!((e.code, e.code.as_str(), e.code.public()), (ToolErrorCode::NotFound, "not_found", "not_found"));
        let e = ToolError::from(AppError::invalid("query", "too long"));
        assert_eq!((e.code.as_str(), e.code.public()), ("invalid_arguments", "invalid_input"));
        let e = ToolError::from(AppError::Internal(anyhow::anyhow!("secret detail")));
        assert_eq!(e.code, ToolErrorCode::Internal);
        assert!(!e.message.contains("secret"), "{}", e.message);
        let e = ToolError::from(AppError::FileMissing("x".into()));
        assert_eq!(e.code, ToolErrorCode::Service("file_missing"));
        assert_eq!(e.content(), json!({"error": {"code": "file_missing", "message": e.message}}));
        assert_eq!(
            (ToolErrorCode::public_of("invalid_arguments"), ToolErrorCode::public_of("not_found")),
            ("invalid_input", "not_found")
        );
        let body = ErrorBody::from(ToolError::unknown_tool("no tool named x"));
        assert_eq!((body.code.as_str(), body.message.as_str()), ("unknown_tool", "no tool named x"));
    }
}
