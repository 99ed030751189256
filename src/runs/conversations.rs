//! Conversations: a session of runs (`ai_run.session_id` is the conversation's id). The row
//! (`ai_conversation`, visible to its own user only) holds what the list shows; it is created
//! by the session's first run, whichever panel started it (`/ai`, the KB page, the viewer),
//! with the first question as its title. Deleting a conversation deletes its runs and their
//! journals (refused while one of them is still running).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use crate::db::TenantTx;
use uuid::Uuid;

use crate::{
    error::{AppError, AppResult},
    journal::store::{self, RunRow, RunView},
};

/// Longest title (characters); a longer first question is cut with `…`.
pub const TITLE_MAX: usize = 120;
/// The most turns one conversation shows (the latest ones).
pub const MAX_TURNS: i64 = 100;
/// The most conversations a list returns.
pub const LIST_MAX: i64 = 200;

#[derive(Debug, Clone)]
pub struct ConversationRow {
    pub id: String,
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// How many runs (turns) it has.
    pub run_count: i64,
}

/// `mnote.ai_conversation.v1`: one conversation as the list and the API show it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationView {
    pub schema: &'static str,
    pub id: String,
    pub title: String,
    pub run_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ConversationRow {
    pub fn view(&self) -> ConversationView {
        ConversationView {
            schema: "mnote.ai_conversation.v1",
            id: self.id.clone(),
            title: self.title.clone(),
            run_count: self.run_count,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// `GET /api/page-ai/conversations` response.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ConversationList {
    pub items: Vec<ConversationView>,
}

/// `GET /api/page-ai/conversations/{id}` response: the conversation and its runs, oldest first.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationDetail {
    #[serde(flatten)]
    pub conversation: ConversationView,
    pub runs: Vec<RunView>,
}

/// `GET /api/page-ai/conversations?q=&limit=`
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct ListQuery {
    #[serde(default)]
    pub q: Option<String>,
    #[serde(default)]
    pub limit: Option<i64>,
}

/// `PATCH /api/page-ai/conversations/{id}` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    #[schemars(length(min = 1, max = TITLE_MAX), regex(pattern = r"\S"))]
    pub title: String,
}

/// The title a question gives a conversation: one line, spaces collapsed, at most
/// [`TITLE_MAX`] characters.
pub fn title_of(prompt: &str) -> String {
    let one: String = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= TITLE_MAX {
        return one;
    }
    let cut: String = one.chars().take(TITLE_MAX - 1).collect();
    format!("{}…", cut.trim_end())
}

/// A title a person typed: trimmed, 1–[`TITLE_MAX`] characters, one line.
pub fn checked_title(title: &str) -> AppResult<String> {
    let t: String = title.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.is_empty() {
        return Err(AppError::invalid("title", "give the conversation a title"));
    }
    if t.chars().count() > TITLE_MAX {
        return Err(AppError::invalid("title", format!("at most {TITLE_MAX} characters")));
    }
    Ok(t)
}

/// `ILIKE` pattern for a search text (its `%`, `_` and `\` taken literally).
fn like(q: &str) -> String {
    let mut p = String::from("%");
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// A run was started in session `id`: its conversation, created with the question as title the
/// first time, else marked active now.
pub async fn touch(conn: &mut PgConnection, tenant: Uuid, actor: Uuid, id: &str, prompt: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into ai_conversation (tenant_id, actor_id, id, title) values ($1, $2, $3, $4)
         on conflict (tenant_id, actor_id, id) do update set updated_at = now()",
        tenant,
        actor,
        id,
        title_of(prompt),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The caller's conversations, most recently active first; `q` matches the title or any of
/// its questions (case-insensitive).
pub async fn list(tx: &mut TenantTx, actor: Uuid, q: &str, limit: i64) -> sqlx::Result<Vec<ConversationRow>> {
    select(tx, actor, None, q.trim(), limit.clamp(1, LIST_MAX)).await
}

/// One of the caller's conversations.
pub async fn get(tx: &mut TenantTx, actor: Uuid, id: &str) -> sqlx::Result<Option<ConversationRow>> {
    Ok(select(tx, actor, Some(id), "", 1).await?.pop())
}

/// The one statement that reads conversations (an actor has few): `id` picks one, `q` (empty:
/// any) matches the title or a question.
async fn select(tx: &mut TenantTx, actor: Uuid, id: Option<&str>, q: &str, limit: i64) -> sqlx::Result<Vec<ConversationRow>> {
    let tenant = tx.tenant_id();
    sqlx::query_as!(
        ConversationRow,
        r#"select c.id, c.title, c.created_at as "created_at: _", c.updated_at as "updated_at: _",
             (select count(*) from ai_run r where r.tenant_id = c.tenant_id and r.actor_id = c.actor_id
                 and r.session_id = c.id) as "run_count!"
         from ai_conversation c
         where c.tenant_id = $5 and c.actor_id = $1 and ($6::text is null or c.id = $6)
           and ($2 = '' or c.title ilike $3 or exists (select 1 from ai_run r where r.tenant_id = c.tenant_id
                and r.actor_id = c.actor_id and r.session_id = c.id and r.prompt ilike $3))
         order by c.updated_at desc, c.id limit $4"#,
        actor,
        q,
        like(q),
        limit,
        tenant,
        id,
    )
    .fetch_all(&mut **tx)
    .await
}

/// Its runs, oldest first (the latest [`MAX_TURNS`]).
pub async fn runs(tx: &mut TenantTx, actor: Uuid, id: &str) -> sqlx::Result<Vec<RunRow>> {
    let mut runs = store::session_runs(tx, actor, id, MAX_TURNS).await?;
    runs.reverse();
    Ok(runs)
}

/// A new title; `None` when the caller has no such conversation.
pub async fn rename(tx: &mut TenantTx, actor: Uuid, id: &str, title: &str) -> sqlx::Result<Option<ConversationRow>> {
    let tenant = tx.tenant_id();
    let done = sqlx::query!(
        "update ai_conversation set title = $3 where tenant_id = $4 and actor_id = $1 and id = $2",
        actor,
        id,
        title,
        tenant,
    )
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    get(tx, actor, id).await
}

/// Delete the conversation and its runs (their journals go with them): not found, or refused
/// while one of its runs is waiting or running.
pub async fn delete(tx: &mut TenantTx, actor: Uuid, id: &str) -> AppResult<()> {
    let tenant = tx.tenant_id();
    let found = sqlx::query_scalar!(
        "select id from ai_conversation where tenant_id = $3 and actor_id = $1 and id = $2 for update",
        actor,
        id,
        tenant,
    )
    .fetch_optional(&mut **tx)
    .await?;
    if found.is_none() {
        return Err(AppError::NotFound);
    }
    let live = sqlx::query_scalar!(
        r#"select count(*) as "n!" from ai_run where tenant_id = $3 and actor_id = $1 and session_id = $2
         and status in ('pending', 'running')"#,
        actor,
        id,
        tenant,
    )
    .fetch_one(&mut **tx)
    .await?;
    if live > 0 {
        return Err(AppError::Conflict("an answer in this conversation is still running; cancel it first".into()));
    }
    sqlx::query!("delete from ai_run where tenant_id = $3 and actor_id = $1 and session_id = $2", actor, id, tenant)
        .execute(&mut **tx)
        .await?;
    sqlx::query!("delete from ai_conversation where tenant_id = $3 and actor_id = $1 and id = $2", actor, id, tenant)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_one_short_line() {
        assert_eq!(title_of("  What is\n the  dock? "), "What is the dock?");
        let long = "word ".repeat(100);
        let t = title_of(&long);
        assert!(t.chars().count() <= TITLE_MAX && t.ends_with('…'), "{t}");
        assert_eq!(checked_title("  New   name ").unwrap(), "New name");
        assert!(checked_title("   ").is_err());
        assert!(checked_title(&"x".repeat(TITLE_MAX + 1)).is_err());
    }

    #[test]
    fn search_text_is_taken_literally() {
        assert_eq!(like("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }
}
