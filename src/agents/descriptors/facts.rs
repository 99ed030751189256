//! What the merge reads: the tenant's and the caller's stored settings, switches and grants.

#[allow(unused_imports)]
use super::*;

/// A stored preference: its value, or only that a secret is set.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    Value(Value),
    Secret,
}

/// Everything the descriptors are merged from, read in one tenant transaction as the caller.
#[derive(Debug, Clone)]
pub struct Facts {
    pub is_admin: bool,
    /// The KBs the caller can read: `(id, name)`.
    pub kbs: Vec<(Uuid, String)>,
    pub configs: HashMap<AgentId, AgentConfigRow>,
    pub switches: Switches,
    pub stored: BTreeMap<String, Stored>,
    /// The account's UI language (`None`: from the browser).
    pub locale: Option<String>,
    /// The caller's active grants: `(root path, permission)`.
    pub grants: Vec<(String, String)>,
    /// Whether the server can seal secrets (`MNOTE_SECRET_KEY`).
    pub can_store_secrets: bool,
}

/// The caller's facts, read on the read replica when it may serve them (`db::read`).
pub async fn facts(state: &AppState, auth: &Auth) -> AppResult<Facts> {
    facts_tx(auth.read_tx(state).await?, &state.config, auth).await
}

/// [`facts`] with only a pool and the configuration (the CLI's self-test).
pub async fn facts_in(pool: &sqlx::PgPool, cfg: &Config, auth: &Auth) -> AppResult<Facts> {
    facts_tx(auth.tx_pool(pool).await?, cfg, auth).await
}

pub(super) async fn facts_tx(mut tx: crate::db::TenantTx, cfg: &Config, auth: &Auth) -> AppResult<Facts> {
    let kbs = kbs::queries::list_readable(&mut tx, auth.user_id, auth.role.is_admin())
        .await?
        .into_iter()
        .map(|k| (k.id, k.name))
        .collect();
    let mut configs = HashMap::new();
    for a in AgentId::ALL {
        if let Some(row) = agent_config::load(&mut tx, a).await? {
            configs.insert(a, row);
        }
    }
    let switches = capabilities::load(&mut tx).await?;
    let stored = queries::preferences(&mut tx, auth.user_id)
        .await?
        .into_iter()
        .map(|r| {
            let v = match (r.value, r.secret_cipher) {
                (_, Some(_)) => Stored::Secret,
                (Some(v), None) => Stored::Value(v),
                (None, None) => Stored::Value(Value::Null),
            };
            (r.key, v)
        })
        .collect();
    let grants = grants::queries::active_for_user(&mut tx, auth.user_id)
        .await?
        .into_iter()
        .map(|g| (g.root_path, g.permission.to_string()))
        .collect();
    let locale = tq::user_by_id(&mut *tx, auth.user_id).await?.and_then(|u| u.locale);
    tx.commit().await?;
    Ok(Facts {
        is_admin: auth.role.is_admin(),
        kbs,
        configs,
        switches,
        stored,
        locale,
        grants,
        can_store_secrets: cfg.rag.secret_key.is_some(),
    })
}

impl Facts {
    /// The models an admin configured for `agent`: its default model, then the extra ones.
    pub fn models(&self, agent: AgentId) -> Vec<String> {
        self.configs.get(&agent).map(AgentConfigRow::models).unwrap_or_default()
    }

    /// Facts without a database (the self-test, unit tests): one KB, one grant, nothing
    /// configured or stored, everything switched on.
    pub fn sample(is_admin: bool) -> Facts {
        Facts {
            is_admin,
            kbs: vec![(Uuid::from_u128(7), "Handbook".into())],
            configs: HashMap::new(),
            switches: Switches::all_on(),
            stored: BTreeMap::new(),
            locale: None,
            grants: vec![("/data/team".into(), "read".into())],
            can_store_secrets: true,
        }
    }
}

pub(super) fn agent_of_key(key: &str) -> Option<AgentId> {
    key.strip_prefix("ai.agent.")?.split('.').next().and_then(AgentId::parse)
}
