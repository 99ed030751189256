//! Process-level plumbing shared by the features: supervised child processes
//! ([`supervise`]), the outbound HTTP client ([`http`]) and the secret type ([`SecretString`]).
pub mod crypto;
pub mod http;
pub mod metrics;
pub mod progress;
pub mod secret;
pub mod supervise;

pub use secret::SecretString;
