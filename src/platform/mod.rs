//! Process-level plumbing shared by the features: supervised child processes
//! ([`supervise`]), the outbound HTTP client ([`http`]), the secret type ([`SecretString`]) and
//! log flood control ([`log_limit`]).
pub mod crypto;
pub mod http;
pub mod log_limit;
pub mod metrics;
pub mod progress;
pub mod secret;
pub mod supervise;

pub use secret::SecretString;
