-- why: issue #14 item 5. Adding an existing account to a team used to make it a member at
-- once, without its consent, and the error for an unknown email told anyone which emails had
-- accounts. A team now *invites* an email; the person accepts (or declines) after signing in.
-- One pending invitation per team and email (a new invitation refreshes it). Forced RLS like
-- every tenant table; the invitee reads their own invitations across teams through
-- `own_invitations` (like `own_memberships`), matched on the signed-in user's email.

create table invitation (
    tenant_id uuid not null references tenant (id) on delete cascade,
    id uuid not null,
    email text not null check (email = lower(email) and position('@' in email) > 1),
    role text not null check (role in ('owner', 'admin', 'member')),
    invited_by uuid not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz not null,
    accepted_at timestamptz,
    declined_at timestamptz,
    primary key (tenant_id, id),
    check (accepted_at is null or declined_at is null)
);
create unique index invitation_pending on invitation (tenant_id, email)
    where accepted_at is null and declined_at is null;
create index invitation_email on invitation (email);

alter table invitation enable row level security;
alter table invitation force row level security;
create policy tenant_isolation on invitation
    using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
    with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);
-- Read-only: accepting or declining runs in the inviting tenant's transaction.
create policy own_invitations on invitation for select
    using (email = (select lower(u.email) from app_user u
                    where u.id = nullif(current_setting('app.user_id', true), '')::uuid));
