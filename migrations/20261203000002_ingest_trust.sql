-- Issue #16: ingest progress, soft delete of KBs and sources.

-- Where the open job of a source is (written by the worker, read by the KB page):
-- phase = queued | reading | parsing | indexing; done/total = pages (or blocks) when known;
-- started_at = when the current attempt began (elapsed), phase_at = when the phase began.
alter table source add column progress_phase text
    check (progress_phase in ('queued', 'reading', 'parsing', 'indexing'));
alter table source add column progress_done integer;
alter table source add column progress_total integer;
alter table source add column progress_started_at timestamptz;
alter table source add column progress_attempt integer;

-- Soft delete: a deleted KB or a removed source is hidden at once (a restrictive policy, so
-- every reader — lists, search, the viewer, the workers — stops seeing it and its evidence),
-- restorable until the purge deletes it for good after the grace period. Only a transaction
-- that sets `app.deleted = 'include'` (the trash, restore and purge) sees such rows.
alter table kb add column deleted_at timestamptz;
alter table kb add column deleted_by uuid;
alter table source add column deleted_at timestamptz;
alter table source add column deleted_by uuid;

create policy kb_not_deleted on kb as restrictive
    using (deleted_at is null or current_setting('app.deleted', true) = 'include');
create policy source_not_deleted on source as restrictive
    using (deleted_at is null or current_setting('app.deleted', true) = 'include');

-- A deleted KB's name is free for a new KB (restoring it then needs a rename).
alter table kb drop constraint kb_tenant_id_name_key;
create unique index kb_live_name on kb (tenant_id, name) where deleted_at is null;

create index kb_deleted on kb (tenant_id, deleted_at) where deleted_at is not null;
create index source_deleted on source (tenant_id, deleted_at) where deleted_at is not null;

-- The KB page also hears about progress and removal/restore.
drop trigger source_notify on source;
create trigger source_notify after insert or update of status, error_code, indexed_hash, progress_phase, progress_done,
        progress_total, deleted_at on source
    for each row execute function notify_source_change();
