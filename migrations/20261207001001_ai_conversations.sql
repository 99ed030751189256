-- why: issue #26 (conversations). A conversation is a session of runs: `ai_run.session_id`
-- (client-chosen) is its id. The row holds what the list shows (owner, title, times) and is
-- created by the first run of the session, whichever panel started it. Under forced RLS with
-- the tenant policy and, like `ai_preference`, visible to its own user only (not even to
-- admins) and to background work. Deleting a conversation deletes its runs (the app does it
-- in the same transaction); runs keep no key to this table, so the journal format is unchanged.

create table ai_conversation (
    tenant_id uuid not null,
    actor_id uuid not null,
    id text not null check (id ~ '^[A-Za-z0-9_.:-]{1,200}$'),
    title text not null check (length(title) between 1 and 200),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (tenant_id, actor_id, id),
    foreign key (tenant_id, actor_id) references membership (tenant_id, user_id) on delete cascade
);
create index ai_conversation_recent on ai_conversation (tenant_id, actor_id, updated_at desc);
create trigger ai_conversation_updated_at before update on ai_conversation
    for each row execute function trigger_updated_at();

alter table ai_conversation enable row level security;
alter table ai_conversation force row level security;
create policy tenant_isolation on ai_conversation
    using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
    with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);
-- A user's conversations are theirs alone (background work may read them).
create policy ai_conversation_own on ai_conversation as restrictive
    using (actor_id = nullif(current_setting('app.user_id', true), '')::uuid
           or current_setting('app.scope', true) = 'system')
    with check (actor_id = nullif(current_setting('app.user_id', true), '')::uuid
                or current_setting('app.scope', true) = 'system');
