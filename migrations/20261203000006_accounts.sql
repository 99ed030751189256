-- why: issue #16 "Accounts and admin".
-- * A user changes their own password and their other sessions are signed out: every session
--   remembers the account's `session_epoch` at sign-in; a password change bumps it, and a
--   session with an older epoch is no longer signed in.
-- * API tokens may expire (`expires_at`, null = never); an expired token is refused with
--   `token_expired`.
-- * An invitation carries a link (`link_hash` = SHA-256 of the secret in the link, which is
--   shown once): a person without an account opens it, sets a password and joins. Single use
--   (cleared on acceptance), and it expires with the invitation. Tables keep their forced RLS
--   and policies (no new tenant table).

alter table app_user add column session_epoch integer not null default 0;

alter table api_token add column expires_at timestamptz;

alter table invitation add column link_hash text;
create unique index invitation_link on invitation (link_hash) where link_hash is not null;
