-- why: per-tenant settings, starting with "external parsing upload (MinerU)": off by
-- default, because it sends the tenant's scanned PDFs and images to a third-party service.
-- A tenant table like the others (tenant_id key, ENABLE + FORCE row-level security, the
-- tenant_isolation policy); writes are further limited to the tenant's owners and admins
-- (or background work, app.scope = 'system') by restrictive policies, so a member cannot
-- flip it even through a handler bug. `mnote migrate` grants the app role DML on it.

create table tenant_setting (
    tenant_id uuid primary key references tenant (id) on delete cascade,
    external_parsing_upload boolean not null default false,
    updated_by uuid references app_user (id) on delete set null,
    updated_at timestamptz not null default now()
);
create trigger tenant_setting_updated_at before update on tenant_setting
    for each row execute function trigger_updated_at();

alter table tenant_setting enable row level security;
alter table tenant_setting force row level security;

create policy tenant_isolation on tenant_setting
    using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
    with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);

-- Owners/admins of the transaction's user in that tenant (the membership subquery runs under
-- membership's own policies), or background work.
create function mnote_is_tenant_admin(p_tenant uuid)
returns boolean language sql stable as $$
    select current_setting('app.scope', true) = 'system'
        or exists (select 1 from membership ms
                   where ms.tenant_id = p_tenant
                     and ms.user_id = nullif(current_setting('app.user_id', true), '')::uuid
                     and ms.role in ('owner', 'admin'))
$$;

create policy tenant_setting_admin_insert on tenant_setting as restrictive for insert
    with check (mnote_is_tenant_admin(tenant_id));
create policy tenant_setting_admin_update on tenant_setting as restrictive for update
    using (mnote_is_tenant_admin(tenant_id))
    with check (mnote_is_tenant_admin(tenant_id));
create policy tenant_setting_admin_delete on tenant_setting as restrictive for delete
    using (mnote_is_tenant_admin(tenant_id));
