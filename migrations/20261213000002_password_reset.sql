-- why: issue 44 item 5. There was no way back into an account whose password was forgotten.
-- A team admin issues a one-time reset link for a member (like an invitation link: the
-- secret `<tenant>.<random>` is shown once and stored as a SHA-256, it expires, and using it
-- uses it up; a newer link for the same member replaces the older one). Setting the password
-- through it signs every session of the account out (`app_user.session_epoch`). A tenant
-- table like the others (tenant-prefixed key, ENABLE + FORCE row-level security).

create table password_reset (
    tenant_id uuid not null references tenant (id) on delete cascade,
    id uuid not null,
    user_id uuid not null references app_user (id) on delete cascade,
    link_hash text unique,
    created_by uuid not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    used_at timestamptz,
    primary key (tenant_id, id)
);
create index password_reset_user on password_reset (tenant_id, user_id);

alter table password_reset enable row level security;
alter table password_reset force row level security;
create policy tenant_isolation on password_reset
    using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
    with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);
