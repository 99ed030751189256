-- why: the foundation schema. Global tables (tenant, app_user, login_attempt, sessions) are
-- Citus reference-table candidates; every tenant-owned table carries tenant_id, has a
-- tenant-prefixed primary key, and sits under ENABLE + FORCE row-level security so a query
-- that forgets its WHERE clause still cannot cross tenants (SPEC §2.5, issue #2).

create extension if not exists vector;

create function trigger_updated_at() returns trigger language plpgsql as $$
begin
    new.updated_at = now();
    return new;
end $$;

-- ---------------------------------------------------------------- global tables

create table tenant (
    id uuid primary key,
    name text not null unique check (length(name) between 1 and 100),
    created_at timestamptz not null default now()
);

create table app_user (
    id uuid primary key,
    email text not null check (position('@' in email) > 1),
    password_hash text not null,
    display_name text,
    locale text check (locale in ('en', 'zh-CN')),
    created_at timestamptz not null default now()
);
create unique index app_user_email_key on app_user (lower(email));

-- Failed and successful login attempts, for rate limiting by account and by client address.
create table login_attempt (
    id bigint generated always as identity primary key,
    email text not null,
    client_ip text not null,
    succeeded boolean not null,
    at timestamptz not null default now()
);
create index login_attempt_email_at on login_attempt (lower(email), at);
create index login_attempt_ip_at on login_attempt (client_ip, at);

-- tower-sessions-sqlx-store layout (PostgresStore), created here so the app role never needs DDL.
create schema tower_sessions;
create table tower_sessions.session (
    id text primary key not null,
    data bytea not null,
    expiry_date timestamptz not null
);
create index session_expiry on tower_sessions.session (expiry_date);

-- ---------------------------------------------------------------- tenant tables

create table membership (
    tenant_id uuid not null references tenant (id) on delete cascade,
    user_id uuid not null references app_user (id) on delete cascade,
    role text not null check (role in ('owner', 'admin', 'member')),
    created_at timestamptz not null default now(),
    primary key (tenant_id, user_id)
);
create index membership_user on membership (user_id);

create table api_token (
    tenant_id uuid not null,
    id uuid not null,
    user_id uuid not null,
    name text not null check (length(name) between 1 and 100),
    token_hash text not null,
    created_at timestamptz not null default now(),
    last_used_at timestamptz,
    revoked_at timestamptz,
    primary key (tenant_id, id),
    unique (tenant_id, token_hash),
    foreign key (tenant_id, user_id) references membership (tenant_id, user_id) on delete cascade
);

create table dir_grant (
    tenant_id uuid not null references tenant (id) on delete cascade,
    id uuid not null,
    -- canonical absolute path of the granted directory (inside MNOTE_GRANTABLE_ROOTS)
    root_path text not null,
    -- null = every member of the tenant
    user_id uuid,
    permission text not null check (permission in ('read', 'read_index')),
    created_by uuid not null,
    created_at timestamptz not null default now(),
    revoked_at timestamptz,
    primary key (tenant_id, id),
    foreign key (tenant_id, user_id) references membership (tenant_id, user_id) on delete cascade
);

create table kb (
    tenant_id uuid not null references tenant (id) on delete cascade,
    id uuid not null,
    name text not null check (length(name) between 1 and 200),
    description text not null default '',
    visibility text not null check (visibility in ('private', 'team')),
    owner_id uuid not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (tenant_id, id),
    unique (tenant_id, name),
    foreign key (tenant_id, owner_id) references membership (tenant_id, user_id)
);
create trigger kb_updated_at before update on kb for each row execute function trigger_updated_at();

create table kb_member (
    tenant_id uuid not null,
    kb_id uuid not null,
    user_id uuid not null,
    can_manage boolean not null default false,
    primary key (tenant_id, kb_id, user_id),
    foreign key (tenant_id, kb_id) references kb (tenant_id, id) on delete cascade,
    foreign key (tenant_id, user_id) references membership (tenant_id, user_id) on delete cascade
);

-- A directory registered into a KB: its current files became sources, and files added later
-- that match the globs are registered by the watcher (ingestion issue).
create table kb_folder (
    tenant_id uuid not null,
    id uuid not null,
    kb_id uuid not null,
    grant_id uuid not null,
    dir_path text not null, -- relative to the grant root; '' = the root itself
    include_globs text[] not null default '{}',
    exclude_globs text[] not null default '{}',
    created_by uuid not null,
    created_at timestamptz not null default now(),
    primary key (tenant_id, id),
    unique nulls not distinct (tenant_id, kb_id, grant_id, dir_path),
    foreign key (tenant_id, kb_id) references kb (tenant_id, id) on delete cascade,
    foreign key (tenant_id, grant_id) references dir_grant (tenant_id, id) on delete cascade
);

create table source (
    tenant_id uuid not null,
    id uuid not null,
    kb_id uuid not null,
    origin text not null check (origin in ('grant', 'upload')),
    grant_id uuid, -- set when origin = 'grant'
    resource_path text not null, -- relative to the grant root, or 'uploads/<name>'
    kind text not null check (kind in ('markdown', 'pdf', 'docx', 'image', 'text')),
    size_bytes bigint not null,
    mtime timestamptz,
    sha256 text not null,
    status text not null default 'pending'
        check (status in ('pending', 'parsing', 'indexed', 'failed', 'stale')),
    error_code text,
    error_message text,
    provider text,
    created_by uuid not null,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    primary key (tenant_id, id),
    unique nulls not distinct (tenant_id, kb_id, grant_id, resource_path),
    check ((origin = 'grant') = (grant_id is not null)),
    foreign key (tenant_id, kb_id) references kb (tenant_id, id) on delete cascade,
    foreign key (tenant_id, grant_id) references dir_grant (tenant_id, id) on delete cascade
);
create index source_kb on source (tenant_id, kb_id, resource_path);
create trigger source_updated_at before update on source for each row execute function trigger_updated_at();

-- ---------------------------------------------------------------- row-level security

-- Every tenant table: visible and writable only inside the transaction's tenant.
do $$
declare t text;
begin
    foreach t in array array['membership', 'api_token', 'dir_grant', 'kb', 'kb_member', 'kb_folder', 'source']
    loop
        execute format('alter table %I enable row level security', t);
        execute format('alter table %I force row level security', t);
        execute format($p$create policy tenant_isolation on %I
            using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
            with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)$p$, t);
    end loop;
end $$;

-- A signed-in user may list their own memberships in every tenant (the tenant picker).
create policy own_memberships on membership for select
    using (user_id = nullif(current_setting('app.user_id', true), '')::uuid);

-- Private KBs: visible to their owner, their members, and tenant owners/admins (who manage
-- KBs). `app.scope = 'system'` is set only by background jobs, never from request input.
create function mnote_kb_visible(p_tenant uuid, p_kb uuid, p_visibility text, p_owner uuid)
returns boolean language sql stable as $$
    select p_visibility = 'team'
        or current_setting('app.scope', true) = 'system'
        or p_owner = nullif(current_setting('app.user_id', true), '')::uuid
        or exists (select 1 from kb_member m
                   where m.tenant_id = p_tenant and m.kb_id = p_kb
                     and m.user_id = nullif(current_setting('app.user_id', true), '')::uuid)
        or exists (select 1 from membership ms
                   where ms.tenant_id = p_tenant
                     and ms.user_id = nullif(current_setting('app.user_id', true), '')::uuid
                     and ms.role in ('owner', 'admin'))
$$;

create policy kb_visibility on kb as restrictive
    using (mnote_kb_visible(tenant_id, id, visibility, owner_id));

-- Sources and folders follow their KB: the subquery runs under kb's own policies.
create policy source_kb_visible on source as restrictive
    using (exists (select 1 from kb where kb.tenant_id = source.tenant_id and kb.id = source.kb_id));
create policy kb_folder_kb_visible on kb_folder as restrictive
    using (exists (select 1 from kb where kb.tenant_id = kb_folder.tenant_id and kb.id = kb_folder.kb_id));
