-- why: AI runs (issue #13). Every Page AI run is a row (`ai_run`, `mnote.ai_run.v1`) with an
-- append-only journal of events (`ai_run_event`, `mnote.ai_run_event.v1`), so a browser that
-- refreshes resumes exactly where it left off and any app replica can serve any run's stream.
-- An admin configures the agents of a tenant (`agent_config`: endpoint from the operator's
-- allow-list, model, API key encrypted by the app). All under forced RLS.

create table ai_run (
    tenant_id uuid not null,
    id uuid not null,                   -- hostRunId
    actor_id uuid not null,
    request_id text not null,
    session_id text not null,
    agent_id text not null,
    provider text not null,             -- builtin | openai | acp
    provider_run_id text,
    -- why the provider is what it is (e.g. `not_configured`: the agent fell back to builtin)
    provider_note text,
    status text not null check (status in ('pending', 'running', 'interrupted', 'completed', 'failed', 'cancelled')),
    status_reason text,                 -- worker_lost, user, …
    error_code text,
    error_message text,
    prompt text not null,
    context_refs jsonb not null,
    target_snapshot_hash text not null,
    capability_snapshot_hash text not null,
    preferences jsonb not null default '{}',
    parent_run_id uuid,
    resume_request_id text,
    answer text,
    receipt jsonb,
    -- the next event's seq: taken under this row's lock, so seqs have no gaps
    next_seq bigint not null default 1,
    lease_owner text,
    lease_expires_at timestamptz,
    cancel_requested_at timestamptz,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    started_at timestamptz,
    ended_at timestamptz,
    primary key (tenant_id, id),
    unique (tenant_id, request_id),
    foreign key (tenant_id, actor_id) references membership (tenant_id, user_id) on delete cascade,
    foreign key (tenant_id, parent_run_id) references ai_run (tenant_id, id) on delete set null (parent_run_id)
);
create unique index ai_run_resume on ai_run (tenant_id, parent_run_id, resume_request_id)
    where parent_run_id is not null;
create index ai_run_session on ai_run (tenant_id, actor_id, session_id, created_at desc);
create index ai_run_live on ai_run (lease_expires_at) where status in ('pending', 'running');
create trigger ai_run_updated_at before update on ai_run for each row execute function trigger_updated_at();

create table ai_run_event (
    tenant_id uuid not null,
    run_id uuid not null,
    seq bigint not null,
    kind text not null,
    source text not null,
    payload jsonb not null,
    created_at timestamptz not null default now(),
    primary key (tenant_id, run_id, seq),
    foreign key (tenant_id, run_id) references ai_run (tenant_id, id) on delete cascade
);

create table agent_config (
    tenant_id uuid not null,
    agent_id text not null check (agent_id in ('hermes', 'reasonix', 'chat_only')),
    endpoint_url text,
    model text,
    -- nonce(24) || XChaCha20-Poly1305 ciphertext+tag; AAD names tenant and agent
    api_key_cipher bytea,
    key_version smallint not null default 1,
    updated_by uuid,
    updated_at timestamptz not null default now(),
    primary key (tenant_id, agent_id)
);

do $$
declare t text;
begin
    foreach t in array array['ai_run', 'ai_run_event', 'agent_config']
    loop
        execute format('alter table %I enable row level security', t);
        execute format('alter table %I force row level security', t);
        execute format($p$create policy tenant_isolation on %I
            using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
            with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)$p$, t);
    end loop;
end $$;

-- A member sees their own runs; owners/admins (and background work) the tenant's.
create policy ai_run_actor on ai_run as restrictive
    using (actor_id = nullif(current_setting('app.user_id', true), '')::uuid or mnote_is_tenant_admin(tenant_id))
    with check (actor_id = nullif(current_setting('app.user_id', true), '')::uuid or mnote_is_tenant_admin(tenant_id));
-- Events follow their run (the subquery runs under ai_run's own policies).
create policy ai_run_event_run_visible on ai_run_event as restrictive
    using (exists (select 1 from ai_run r where r.tenant_id = ai_run_event.tenant_id and r.id = ai_run_event.run_id))
    with check (exists (select 1 from ai_run r where r.tenant_id = ai_run_event.tenant_id and r.id = ai_run_event.run_id));
-- Every member may read the agent configuration (runs need it); only admins write it.
create policy agent_config_admin_insert on agent_config as restrictive for insert
    with check (mnote_is_tenant_admin(tenant_id));
create policy agent_config_admin_update on agent_config as restrictive for update
    using (mnote_is_tenant_admin(tenant_id)) with check (mnote_is_tenant_admin(tenant_id));
create policy agent_config_admin_delete on agent_config as restrictive for delete
    using (mnote_is_tenant_admin(tenant_id));
