-- why: issue #17. Agent descriptors need two stores: each user's own agent preferences
-- (`ai.common.*`, `ai.agent.<agentId>.*`: default agent, default KBs, citation style, per-agent
-- choices, operator-declared extra fields) and the tenant's capability switches (an admin turns
-- e.g. knowledge RAG off for the whole team; its tools then leave descriptors and runs).
-- Both under forced RLS with the tenant policy. A preference row is visible to its own user
-- only (not even to admins) and background work; a capability switch is readable by every
-- member (runs need it) and writable by owners/admins only.

create table ai_preference (
    tenant_id uuid not null,
    user_id uuid not null,
    key text not null check (key ~ '^ai\.(common|agent\.[a-z_]+)\.[a-z0-9_]+$' and length(key) <= 120),
    -- the value (JSON of the field's kind); null for a secret, whose value is sealed
    value jsonb,
    -- nonce(24) || XChaCha20-Poly1305 ciphertext+tag; AAD names tenant, user and key
    secret_cipher bytea,
    updated_at timestamptz not null default now(),
    primary key (tenant_id, user_id, key),
    foreign key (tenant_id, user_id) references membership (tenant_id, user_id) on delete cascade,
    check ((value is null) <> (secret_cipher is null))
);
create trigger ai_preference_updated_at before update on ai_preference for each row execute function trigger_updated_at();

create table ai_capability_setting (
    tenant_id uuid not null,
    capability text not null check (capability ~ '^[a-z_]{1,40}$'),
    enabled boolean not null,
    updated_by uuid,
    updated_at timestamptz not null default now(),
    primary key (tenant_id, capability)
);
create trigger ai_capability_setting_updated_at before update on ai_capability_setting
    for each row execute function trigger_updated_at();

do $$
declare t text;
begin
    foreach t in array array['ai_preference', 'ai_capability_setting']
    loop
        execute format('alter table %I enable row level security', t);
        execute format('alter table %I force row level security', t);
        execute format($p$create policy tenant_isolation on %I
            using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
            with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)$p$, t);
    end loop;
end $$;

-- A user's preferences are theirs alone (background work reads them for runs).
create policy ai_preference_own on ai_preference as restrictive
    using (user_id = nullif(current_setting('app.user_id', true), '')::uuid
           or current_setting('app.scope', true) = 'system')
    with check (user_id = nullif(current_setting('app.user_id', true), '')::uuid
                or current_setting('app.scope', true) = 'system');

-- Every member reads the switches; only owners/admins (or background work) write them.
create policy ai_capability_setting_admin_insert on ai_capability_setting as restrictive for insert
    with check (mnote_is_tenant_admin(tenant_id));
create policy ai_capability_setting_admin_update on ai_capability_setting as restrictive for update
    using (mnote_is_tenant_admin(tenant_id)) with check (mnote_is_tenant_admin(tenant_id));
create policy ai_capability_setting_admin_delete on ai_capability_setting as restrictive for delete
    using (mnote_is_tenant_admin(tenant_id));

-- The other models an agent's endpoint serves, besides its default `model`: a user picks one
-- of them (`ai.agent.<agentId>.model`, options from the configured models).
alter table agent_config add column extra_models text[] not null default '{}'
    check (cardinality(extra_models) <= 20);
