//! What a run freezes of its user's preferences (`mnote.ai_run_preferences.v1`): the values of
//! the user fields of `ai.common` and of the run's agent at creation, with the SHA-256 of their
//! canonical JSON. Stored as `ai_run.preferences` and read back as this type (one that does
//! not parse is an error, never "no preferences"); returned as `RunView.preferences`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The snapshot's `schema`: this version's name, and nothing else reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum RunPreferencesSchema {
    #[serde(rename = "mnote.ai_run_preferences.v1")]
    V1,
}

/// The value of one preference field, by the field's kind: `null` (unset, no default), a
/// boolean, a whole or a decimal number, a string (string, select), a list of strings
/// (multiselect). Secrets are never frozen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PreferenceValue {
    Null,
    Bool(bool),
    Integer(i64),
    Number(f64),
    Text(String),
    List(Vec<String>),
}

impl PreferenceValue {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PreferenceValue::Text(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            PreferenceValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            PreferenceValue::Integer(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }
}

impl From<&str> for PreferenceValue {
    fn from(s: &str) -> Self {
        PreferenceValue::Text(s.to_string())
    }
}

/// `mnote.ai_run_preferences.v1`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunPreferencesSnapshot {
    pub schema: RunPreferencesSchema,
    /// SHA-256 (hex) of the values' canonical JSON.
    pub hash: String,
    /// `ai.common.*` and `ai.agent.<agentId>.*` keys with their values at creation.
    pub values: BTreeMap<String, PreferenceValue>,
}

impl RunPreferencesSnapshot {
    pub fn of(values: BTreeMap<String, PreferenceValue>) -> RunPreferencesSnapshot {
        let canonical = serde_json::to_string(&values).unwrap_or_default();
        let hash = hex::encode(Sha256::digest(canonical.as_bytes()));
        RunPreferencesSnapshot { schema: RunPreferencesSchema::V1, hash, values }
    }

    /// No values (a run created without a user's preferences: benchmarks, tests).
    pub fn empty() -> RunPreferencesSnapshot {
        RunPreferencesSnapshot::of(BTreeMap::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_written_and_a_malformed_snapshot_does_not_read() {
        let v = serde_json::json!({"schema": "mnote.ai_run_preferences.v1", "hash": "h", "values": {
            "a": null, "b": true, "c": 3, "d": 2.5, "e": "x", "f": ["k1", "k2"]}});
        let s: RunPreferencesSnapshot = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.values["c"], PreferenceValue::Integer(3));
        assert_eq!(s.values["c"].as_u64(), Some(3));
        assert_eq!(s.values["e"].as_str(), Some("e").map(|_| "x"));
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"schema": "mnote.ai_run_preferences.v2", "hash": "h", "values": {}}),
            serde_json::json!({"schema": "mnote.ai_run_preferences.v1", "hash": "h", "values": {"o": {"set": true}}}),
        ] {
            assert!(serde_json::from_value::<RunPreferencesSnapshot>(bad.clone()).is_err(), "{bad}");
        }
        let a = RunPreferencesSnapshot::of(BTreeMap::from([("k".to_string(), PreferenceValue::Bool(true))]));
        assert_ne!(a.hash, RunPreferencesSnapshot::empty().hash);
    }
}
