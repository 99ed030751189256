//! A run's tool offer, computed in one place ([`offer`]): run creation stores its hash (the
//! run's `capabilitySnapshotHash`, [`Offer::hash`]), the executor builds the run's tool box
//! from it, the run's MCP token (`mcp::run_token`) serves it, and plain MCP (`mcp::tools`)
//! offers a member the same function's answer outside any run.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{
    AgentId, Capability, Provider,
    capabilities::{self, Switches},
    descriptors,
    preferences::RunPreferences,
    tools::{ToolBox, ToolDef},
};
use crate::{auth::Auth, error::AppResult, journal::ContextRefs, state::AppState};

/// Whose offer: a run of `agent` with its frozen preferences, or a member at `/mcp` outside
/// any run (the tenant's switches only).
#[derive(Clone, Copy)]
pub enum For<'a> {
    Run { agent: AgentId, preferences: &'a RunPreferences },
    Member,
}

/// The registry tools offered, in registry order.
#[derive(Clone, Default)]
pub struct Offer(pub Vec<&'static ToolDef>);

impl Offer {
    pub fn tools(&self) -> &[&'static ToolDef] {
        &self.0
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|d| d.name).collect()
    }

    /// SHA-256 (hex) of `{"provider": …, "tools": [names]}`: a run's `capabilitySnapshotHash`.
    pub fn hash(&self, provider: Provider) -> String {
        #[derive(Serialize)]
        struct Hashed {
            provider: Provider,
            tools: Vec<&'static str>,
        }
        let canonical = serde_json::to_string(&Hashed { provider, tools: self.names() }).unwrap_or_default();
        hex::encode(Sha256::digest(canonical.as_bytes()))
    }
}

/// The capabilities a run of `agent` gets: the agent's own, less those the tenant switched
/// off and knowledge RAG when the user's preference turned it off.
pub fn allowed_capabilities(agent: AgentId, switches: &Switches, prefs: &RunPreferences) -> Vec<Capability> {
    descriptors::agent_capabilities(agent)
        .into_iter()
        .filter(|c| switches.enabled(*c))
        .filter(|c| *c != Capability::KnowledgeRag || prefs.use_knowledge_rag(agent))
        .collect()
}

/// The tools `actor` is offered in `context`: the evidence tools, the knowledge-RAG ones when a
/// KB of the context (every visible KB when it names none) is bound to LightRAG, less the
/// capabilities the tenant switched off; for a run also less those its agent lacks (all, for
/// `chat_only`) or its preferences turned off. Switches that cannot be read are an error.
pub async fn offer(state: &AppState, actor: &Auth, context: &ContextRefs, who: For<'_>) -> AppResult<Offer> {
    if let For::Run { agent, .. } = who
        && !agent.uses_tools()
    {
        return Ok(Offer::default());
    }
    let switches = {
        let mut tx = actor.tx(state).await?;
        let s = capabilities::load(&mut tx).await?;
        tx.commit().await?;
        s
    };
    let allowed: Vec<Capability> = match who {
        For::Run { agent, preferences } => allowed_capabilities(agent, &switches, preferences),
        For::Member => capabilities::all().into_iter().filter(|c| switches.enabled(*c)).collect(),
    };
    let mut tools = ToolBox::offered_for(state, actor, context).await;
    tools.retain(|d| allowed.contains(&d.capability));
    Ok(Offer(tools))
}
