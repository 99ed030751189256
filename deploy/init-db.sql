-- MNote: one-time database setup, run by the postgres image's entrypoint as the
-- superuser, connected to POSTGRES_DB, only when the data volume is first initialised
-- (mounted at /docker-entrypoint-initdb.d/). Role passwords come from the db
-- container's environment (psql \getenv, PostgreSQL 15+), so none are stored here.
--
--   mnote_owner  owns the database, the schemas and every table; `mnote migrate` uses it
--                (MNOTE_MIGRATION_DATABASE_URL) and then grants mnote_app its DML.
--   mnote_app    what `mnote serve` uses (DATABASE_URL): no superuser, no BYPASSRLS, owns
--                nothing, so FORCE ROW LEVEL SECURITY applies to every query it makes.
--
-- Changing a password later: ALTER ROLE ... PASSWORD ...; this file does not run again.

\set ON_ERROR_STOP on

\getenv owner_password MNOTE_DB_OWNER_PASSWORD
\getenv app_password MNOTE_DB_APP_PASSWORD

\if :{?owner_password}
\else
do $$ begin raise exception 'MNOTE_DB_OWNER_PASSWORD is not set in the db container'; end $$;
\endif
\if :{?app_password}
\else
do $$ begin raise exception 'MNOTE_DB_APP_PASSWORD is not set in the db container'; end $$;
\endif

create role mnote_owner with login password :'owner_password'
    nosuperuser nocreatedb nocreaterole noreplication nobypassrls;
create role mnote_app with login password :'app_password'
    nosuperuser nocreatedb nocreaterole noreplication nobypassrls noinherit;

-- The owner role owns the database, and so (PostgreSQL 15+: pg_database_owner) the
-- public schema: migrations can create tables and schemas (tower_sessions) without
-- being superuser.
alter database :"DBNAME" owner to mnote_owner;

-- Only the two mnote roles (and the superuser) may connect.
revoke all on database :"DBNAME" from public;
grant connect, temporary on database :"DBNAME" to mnote_app;

-- Extensions need the superuser; the migrations' `create extension if not exists`
-- then finds them and does nothing.
create extension if not exists vector;

-- Table privileges for mnote_app are granted by `mnote migrate` itself (DML on the tables,
-- read-only on _sqlx_migrations): it takes the app role's name from DATABASE_URL.
