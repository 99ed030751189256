//! The audit log: one append-only row per audited action of a team (`audit_event`, forced
//! RLS; the app role may insert and select, never update or delete: `db::grant_app_role`).
//! Who (account and its e-mail at the time), when, from where (the client address as the
//! server sees it, `auth::ClientIp`), what (an [`Action`] and its target) and the [`Outcome`].
//! Handlers call [`record`] inside the transaction of the change they audit, so a change and
//! its row commit together or not at all. Reading (`GET /api/audit`, `/admin/audit`, `mnote
//! audit`) is [`queries::list`]; [`queries::purge`] drops rows older than the retention
//! (`MNOTE_AUDIT_RETENTION_DAYS`, at least 30) through the privileged `mnote_audit_purge`.

pub mod export;
pub mod queries;

use serde::Serialize;
use uuid::Uuid;

use crate::{
    db::TenantTx,
    error::{AppError, AppResult},
};

/// What was done. Stored by name in `audit_event.action`; the names are stable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
pub enum Action {
    #[serde(rename = "sign_in")]
    SignIn,
    #[serde(rename = "sign_out")]
    SignOut,
    #[serde(rename = "token.create")]
    TokenCreate,
    #[serde(rename = "token.revoke")]
    TokenRevoke,
    #[serde(rename = "invitation.create")]
    InvitationCreate,
    #[serde(rename = "invitation.renew")]
    InvitationRenew,
    #[serde(rename = "invitation.revoke")]
    InvitationRevoke,
    #[serde(rename = "invitation.accept")]
    InvitationAccept,
    #[serde(rename = "member.role")]
    MemberRole,
    #[serde(rename = "member.remove")]
    MemberRemove,
    #[serde(rename = "member.reset_link")]
    PasswordResetLink,
    #[serde(rename = "password.reset")]
    PasswordReset,
    #[serde(rename = "grant.add")]
    GrantAdd,
    #[serde(rename = "grant.revoke")]
    GrantRevoke,
    #[serde(rename = "kb.create")]
    KbCreate,
    #[serde(rename = "kb.delete")]
    KbDelete,
    #[serde(rename = "kb.restore")]
    KbRestore,
    #[serde(rename = "kb.visibility")]
    KbVisibility,
    #[serde(rename = "kb.transfer")]
    KbTransfer,
    #[serde(rename = "kb.member_set")]
    KbMemberSet,
    #[serde(rename = "kb.member_remove")]
    KbMemberRemove,
    #[serde(rename = "rag.bind")]
    RagBind,
    #[serde(rename = "rag.unbind")]
    RagUnbind,
    #[serde(rename = "agent.endpoint")]
    AgentEndpoint,
    #[serde(rename = "agent.key")]
    AgentKey,
    #[serde(rename = "capability.switch")]
    CapabilitySwitch,
    #[serde(rename = "source.download")]
    SourceDownload,
}

impl Action {
    pub const ALL: &[Action] = &[
        Action::SignIn,
        Action::SignOut,
        Action::TokenCreate,
        Action::TokenRevoke,
        Action::InvitationCreate,
        Action::InvitationRenew,
        Action::InvitationRevoke,
        Action::InvitationAccept,
        Action::MemberRole,
        Action::MemberRemove,
        Action::PasswordResetLink,
        Action::PasswordReset,
        Action::GrantAdd,
        Action::GrantRevoke,
        Action::KbCreate,
        Action::KbDelete,
        Action::KbRestore,
        Action::KbVisibility,
        Action::KbTransfer,
        Action::KbMemberSet,
        Action::KbMemberRemove,
        Action::RagBind,
        Action::RagUnbind,
        Action::AgentEndpoint,
        Action::AgentKey,
        Action::CapabilitySwitch,
        Action::SourceDownload,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::SignIn => "sign_in",
            Action::SignOut => "sign_out",
            Action::TokenCreate => "token.create",
            Action::TokenRevoke => "token.revoke",
            Action::InvitationCreate => "invitation.create",
            Action::InvitationRenew => "invitation.renew",
            Action::InvitationRevoke => "invitation.revoke",
            Action::InvitationAccept => "invitation.accept",
            Action::MemberRole => "member.role",
            Action::MemberRemove => "member.remove",
            Action::PasswordResetLink => "member.reset_link",
            Action::PasswordReset => "password.reset",
            Action::GrantAdd => "grant.add",
            Action::GrantRevoke => "grant.revoke",
            Action::KbCreate => "kb.create",
            Action::KbDelete => "kb.delete",
            Action::KbRestore => "kb.restore",
            Action::KbVisibility => "kb.visibility",
            Action::KbTransfer => "kb.transfer",
            Action::KbMemberSet => "kb.member_set",
            Action::KbMemberRemove => "kb.member_remove",
            Action::RagBind => "rag.bind",
            Action::RagUnbind => "rag.unbind",
            Action::AgentEndpoint => "agent.endpoint",
            Action::AgentKey => "agent.key",
            Action::CapabilitySwitch => "capability.switch",
            Action::SourceDownload => "source.download",
        }
    }
}

impl std::str::FromStr for Action {
    type Err = AppError;
    fn from_str(s: &str) -> AppResult<Self> {
        Action::ALL.iter().copied().find(|a| a.as_str() == s).ok_or_else(|| AppError::invalid("action", "an audited action"))
    }
}

crate::db::text_column!(Action);

/// How the action ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Success,
    Failure,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
        }
    }
}

impl std::str::FromStr for Outcome {
    type Err = AppError;
    fn from_str(s: &str) -> AppResult<Self> {
        match s {
            "success" => Ok(Outcome::Success),
            "failure" => Ok(Outcome::Failure),
            _ => Err(AppError::invalid("outcome", "success or failure")),
        }
    }
}

crate::db::text_column!(Outcome);

/// Who acted and from where. `user_id: None` is the operator's CLI or background work.
#[derive(Clone, Debug, Default)]
pub struct Actor {
    pub user_id: Option<Uuid>,
    pub email: String,
    /// The client address as the server sees it (`MNOTE_TRUST_PROXY` decides whether the
    /// proxy's `X-Forwarded-For` entry counts).
    pub ip: Option<String>,
}

/// One audited action, written by [`record`].
#[derive(Clone, Debug)]
pub struct Entry {
    pub actor: Actor,
    pub action: Action,
    /// What it was done to, e.g. `kb:<id> Handbook`, `token:<id> ci`, an e-mail.
    pub target: String,
    pub outcome: Outcome,
    /// A short qualifier, e.g. the sign-in method, the new role or visibility.
    pub detail: String,
}

impl Entry {
    pub fn new(actor: Actor, action: Action, target: impl Into<String>) -> Self {
        Entry { actor, action, target: target.into(), outcome: Outcome::Success, detail: String::new() }
    }

    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.detail = d.into();
        self
    }

    pub fn failed(mut self) -> Self {
        self.outcome = Outcome::Failure;
        self
    }
}

/// Longest target/detail kept (the rest is cut at a character boundary).
const MAX_TEXT: usize = 500;

fn bounded(s: &str) -> &str {
    match s.char_indices().nth(MAX_TEXT) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Write one row in the transaction's tenant (its `app.tenant_id`, which RLS checks).
pub async fn record(tx: &mut TenantTx, e: &Entry) -> sqlx::Result<()> {
    let tenant = tx.tenant_id();
    sqlx::query!(
        "insert into audit_event (tenant_id, actor_id, actor_email, client_ip, action, target, outcome, detail)
         values ($1, $2, $3, $4, $5, $6, $7, $8)",
        tenant,
        e.actor.user_id,
        bounded(&e.actor.email),
        e.actor.ip.as_deref().map(bounded),
        e.action as _,
        bounded(&e.target),
        e.outcome as _,
        bounded(&e.detail),
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_names_round_trip_and_match_serde() {
        for a in Action::ALL {
            assert_eq!(a.as_str().parse::<Action>().unwrap(), *a);
            assert_eq!(serde_json::to_value(a).unwrap(), serde_json::json!(a.as_str()));
        }
        assert!("kb.nope".parse::<Action>().is_err());
    }

    #[test]
    fn long_text_is_cut_on_a_char_boundary() {
        let s = "字".repeat(MAX_TEXT + 5);
        assert_eq!(bounded(&s).chars().count(), MAX_TEXT);
    }
}
