-- The one rule every reader of a source's text, map or bytes applies: a source under a revoked
-- grant is not readable, whatever its status says. Until now it was a SQL fragment spliced into
-- each reader's query; now it is this view, and readers select from `readable_source` instead of
-- `source`.
--
-- security_invoker: the view reads `source` and `dir_grant` as the querying role, so their
-- forced row-level security (tenant, soft deletion) applies exactly as on the tables.
--
-- `s.*` is expanded when the view is created: a migration that adds a column to `source` must
-- re-create this view (`create or replace view`, same definition) for readers to see it.
create view readable_source with (security_invoker = true) as
select s.*
from source s
where s.grant_id is null
   or exists (select 1 from dir_grant g
              where g.tenant_id = s.tenant_id and g.id = s.grant_id and g.revoked_at is null);
