-- why: MNOTE_GRANTABLE_ROOTS is one allow-list for every tenant, so tenant A's admin could
-- grant a directory holding tenant B's files. The operator now says which roots each tenant
-- may grant (`mnote tenant roots add|remove|list`). Grants are checked against these rows on
-- creation and on every access.
-- A tenant table like the others (tenant_id key, ENABLE + FORCE row-level security, the
-- tenant_isolation policy), but writable only by background work / the CLI (app.scope =
-- 'system', which no request input reaches): restrictive policies, so not even a tenant
-- owner — or a handler bug — can widen its own roots.

create table tenant_root (
    tenant_id uuid not null references tenant (id) on delete cascade,
    root_path text not null,
    created_at timestamptz not null default now(),
    primary key (tenant_id, root_path)
);

alter table tenant_root enable row level security;
alter table tenant_root force row level security;

create policy tenant_isolation on tenant_root
    using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
    with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);

create policy tenant_root_system_insert on tenant_root as restrictive for insert
    with check (current_setting('app.scope', true) = 'system');
create policy tenant_root_system_update on tenant_root as restrictive for update
    using (current_setting('app.scope', true) = 'system')
    with check (current_setting('app.scope', true) = 'system');
create policy tenant_root_system_delete on tenant_root as restrictive for delete
    using (current_setting('app.scope', true) = 'system');
