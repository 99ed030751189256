-- Issue 27: each ACP run gets a run-scoped MCP token (usable only at /mcp, only for the run's
-- actor, tenant and context, only while the run is `running`). Only its SHA-256 is stored, on
-- the run's own row (tenant table under forced RLS already); the run's end (any terminal
-- status, and `interrupted` by the reconciler or a stopping server) clears it.
alter table ai_run add column mcp_token_hash text;
create unique index ai_run_mcp_token on ai_run (mcp_token_hash) where mcp_token_hash is not null;
