//! The run's vocabulary, on the ground floor of the AI half: the closed lists every layer
//! names — which agent (`AgentId`), what executes it (`Provider`), which group of tools a run
//! may be offered (`Capability`). Each is spelled once, here; the journal, the agents, the
//! run pages, the API and the database (text columns read and bound as these enums) use them.
//! A name outside a list does not parse: an error, never a default.

use serde::{Deserialize, Serialize};

pub mod preferences;
pub use preferences::{PreferenceValue, RunPreferencesSnapshot};

/// The agents a user picks from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentId {
    Hermes,
    Reasonix,
    ChatOnly,
}

impl AgentId {
    pub const ALL: [AgentId; 3] = [AgentId::Hermes, AgentId::Reasonix, AgentId::ChatOnly];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentId::Hermes => "hermes",
            AgentId::Reasonix => "reasonix",
            AgentId::ChatOnly => "chat_only",
        }
    }

    pub fn parse(s: &str) -> Option<AgentId> {
        AgentId::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// `hermes, reasonix or chat_only`: what a refusal of an unknown id says is expected.
    pub fn expected() -> String {
        let ids: Vec<&str> = AgentId::ALL.iter().map(|a| a.as_str()).collect();
        match ids.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => ids.concat(),
        }
    }

    /// `hermes|reasonix|chat_only`: the list as a regex alternation.
    pub fn alternation() -> String {
        AgentId::ALL.iter().map(|a| a.as_str()).collect::<Vec<_>>().join("|")
    }

    pub fn display_name(self) -> &'static str {
        match self {
            AgentId::Hermes => "Hermes",
            AgentId::Reasonix => "Reasonix",
            AgentId::ChatOnly => "Chat only",
        }
    }

    /// The provider the agent runs on once configured.
    pub fn configured_provider(self) -> Provider {
        match self {
            AgentId::Hermes | AgentId::ChatOnly => Provider::OpenAi,
            AgentId::Reasonix => Provider::Acp,
        }
    }

    /// Whether runs of this agent get the MNote tools (`chat_only` does not).
    pub fn uses_tools(self) -> bool {
        !matches!(self, AgentId::ChatOnly)
    }
}

impl std::fmt::Display for AgentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AgentId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        AgentId::parse(s).ok_or_else(|| format!("unknown agent id {s:?} (expected {})", AgentId::expected()))
    }
}

// `ai_run.agent_id` is a text column read and bound as this enum.
crate::db::text_column!(AgentId);

/// What a run is executed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Builtin,
    #[serde(rename = "openai")]
    OpenAi,
    Acp,
}

impl Provider {
    pub const ALL: [Provider; 3] = [Provider::Builtin, Provider::OpenAi, Provider::Acp];

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Builtin => "builtin",
            Provider::OpenAi => "openai",
            Provider::Acp => "acp",
        }
    }

    pub fn parse(s: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Provider {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Provider::parse(s).ok_or_else(|| format!("unknown provider {s:?}"))
    }
}

// `ai_run.provider` is a text column read and bound as this enum.
crate::db::text_column!(Provider);

/// A group of registry tools that a tenant switches on or off as one and a run is offered
/// as one (`evidence`: search, read, open, outline; `knowledge_rag`: the LightRAG tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Evidence,
    KnowledgeRag,
}

impl Capability {
    pub const ALL: [Capability; 2] = [Capability::Evidence, Capability::KnowledgeRag];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Evidence => "evidence",
            Capability::KnowledgeRag => "knowledge_rag",
        }
    }

    pub fn parse(s: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_list_reads_back_what_it_writes_and_refuses_the_rest() {
        for a in AgentId::ALL {
            assert_eq!(a.as_str().parse::<AgentId>().unwrap(), a);
            assert_eq!(serde_json::to_value(a).unwrap(), serde_json::json!(a.as_str()));
        }
        for p in Provider::ALL {
            assert_eq!(p.as_str().parse::<Provider>().unwrap(), p);
            assert_eq!(serde_json::to_value(p).unwrap(), serde_json::json!(p.as_str()));
        }
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.as_str()), Some(c));
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(c.as_str()));
        }
        assert!("gpt".parse::<AgentId>().unwrap_err().contains("hermes, reasonix or chat_only"));
        assert_eq!(AgentId::alternation(), "hermes|reasonix|chat_only");
        assert!("Hermes".parse::<AgentId>().is_err());
    }
}
