-- The source kinds of the Office/web/mail formats (issue 40): spreadsheets and CSV read now,
-- slides, HTML and e-mail next; the check lists them all so those land without another swap.
alter table source drop constraint source_kind_check;
alter table source add constraint source_kind_check check (kind in (
    'markdown', 'pdf', 'docx', 'image', 'text', 'spreadsheet', 'csv', 'slides', 'html', 'email'));

-- A parse that stopped at the per-file row cap: the cap (the rows kept), null when complete.
alter table source add column truncated_rows integer check (truncated_rows is null or truncated_rows > 0);

-- `s.*` of readable_source was expanded when the view was created: re-create it (same
-- definition) so readers see the new column.
create or replace view readable_source with (security_invoker = true) as
select s.*
from source s
where s.grant_id is null
   or exists (select 1 from dir_grant g
              where g.tenant_id = s.tenant_id and g.id = s.grant_id and g.revoked_at is null);
