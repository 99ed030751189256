-- why: issue 44 item 4. A team's admins (and the company's IT behind them) ask "who did what,
-- when, from where" before they let the tool near their documents; nothing recorded it.
-- One append-only row per audited action: who (account id and the e-mail at the time), when,
-- from where (the client address as the server sees it), what (action and its target) and the
-- outcome. A tenant table like the others (tenant-prefixed key, ENABLE + FORCE row-level
-- security, the tenant_isolation policy); the app role may INSERT and SELECT only: `mnote
-- migrate` revokes UPDATE and DELETE on it (db::grant_app_role), and a trigger refuses any
-- UPDATE, also the owner's. Old rows leave only through `mnote_audit_purge`, a SECURITY
-- DEFINER function that deletes the current tenant's rows older than the retention and
-- refuses a retention under 30 days, so not even a compromised app role can erase recent rows.

create table audit_event (
    tenant_id uuid not null references tenant (id) on delete cascade,
    id bigint generated always as identity,
    at timestamptz not null default now(),
    -- null: the operator's CLI or background work
    actor_id uuid,
    actor_email text not null default '',
    client_ip text,
    action text not null,
    target text not null default '',
    outcome text not null check (outcome in ('success', 'failure')),
    detail text not null default '',
    primary key (tenant_id, id)
);

create index audit_event_at on audit_event (tenant_id, at desc, id desc);
create index audit_event_action on audit_event (tenant_id, action, at desc);

alter table audit_event enable row level security;
alter table audit_event force row level security;

create policy tenant_isolation on audit_event
    using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
    with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);

create function mnote_audit_no_update() returns trigger
language plpgsql as $$
begin
    raise exception 'audit_event is append-only' using errcode = '42501';
end $$;

create trigger audit_event_append_only before update on audit_event
    for each row execute function mnote_audit_no_update();

-- A row's time is the server's: an app role that names another `at` gets now() all the same.
create function mnote_audit_stamp() returns trigger
language plpgsql as $$
begin
    new.at := now();
    return new;
end $$;

create trigger audit_event_stamp before insert on audit_event
    for each row execute function mnote_audit_stamp();

create function mnote_audit_purge(keep_days integer) returns bigint
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    n bigint;
begin
    if keep_days is null or keep_days < 30 then
        raise exception 'the audit retention is at least 30 days' using errcode = '22023';
    end if;
    delete from audit_event
    where tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid
      and at < now() - make_interval(days => keep_days);
    get diagnostics n = row_count;
    return n;
end $$;

revoke all on function mnote_audit_purge(integer) from public;
