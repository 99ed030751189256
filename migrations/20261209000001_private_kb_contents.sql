-- why: issue #39 item 9, private KBs private from admins. A private KB's existence (its row:
-- name, owner, size) stays visible to the team's owners and admins, who may delete it or
-- transfer it to another member; its contents (sources, folders, artifacts, sections, blocks,
-- edges, vectors, BM25 statistics, LightRAG bindings and documents) are readable only by its
-- owner, its added members and background work (`app.scope = 'system'`), not by role.
--
-- Two rules, then:
-- * `mnote_kb_visible` (unchanged, the `kb_visibility` policy on `kb`): the row exists for
--   the caller: team KB, system scope, owner, KB member, tenant owner/admin.
-- * `mnote_kb_readable` (new): the caller reads its contents: team KB, system scope, owner,
--   KB member. Every content table's restrictive policy applies it on the KB row, in the same
--   shape as before (one indexed `kb` lookup by primary key, the member check one
--   `kb_member` primary-key probe only for private KBs), so hot search paths keep their plan.
--
-- `source` and `kb_folder` check their KB with the content rule; the tables under a source
-- (`source_artifact`, `evidence_section`, `evidence_block`, `evidence_edge`, `ingest_job`)
-- follow it through their `source_visible` policy unchanged; the per-KB tables
-- (`evidence_term_stat`, `evidence_kb_stat`, `evidence_embedding`) and `rag_binding` check
-- their KB with the content rule; `rag_doc` follows its binding.

create function mnote_kb_readable(p_tenant uuid, p_kb uuid, p_visibility text, p_owner uuid)
returns boolean language sql stable as $$
    select p_visibility = 'team'
        or current_setting('app.scope', true) = 'system'
        or p_owner = nullif(current_setting('app.user_id', true), '')::uuid
        or exists (select 1 from kb_member m
                   where m.tenant_id = p_tenant and m.kb_id = p_kb
                     and m.user_id = nullif(current_setting('app.user_id', true), '')::uuid)
$$;

drop policy source_kb_visible on source;
create policy source_kb_readable on source as restrictive
    using (exists (select 1 from kb where kb.tenant_id = source.tenant_id and kb.id = source.kb_id
                                       and mnote_kb_readable(kb.tenant_id, kb.id, kb.visibility, kb.owner_id)));

drop policy kb_folder_kb_visible on kb_folder;
create policy kb_folder_kb_readable on kb_folder as restrictive
    using (exists (select 1 from kb where kb.tenant_id = kb_folder.tenant_id and kb.id = kb_folder.kb_id
                                       and mnote_kb_readable(kb.tenant_id, kb.id, kb.visibility, kb.owner_id)));

do $$
declare t text;
begin
    foreach t in array array['evidence_term_stat', 'evidence_kb_stat', 'evidence_embedding']
    loop
        execute format('drop policy kb_visible on %I', t);
        execute format($p$create policy kb_readable on %I as restrictive
            using (exists (select 1 from kb where kb.tenant_id = %I.tenant_id and kb.id = %I.kb_id
                                               and mnote_kb_readable(kb.tenant_id, kb.id, kb.visibility, kb.owner_id)))$p$,
            t, t, t);
    end loop;
end $$;

drop policy rag_binding_kb_visible on rag_binding;
create policy rag_binding_kb_readable on rag_binding as restrictive
    using (current_setting('app.scope', true) = 'system'
        or exists (select 1 from kb where kb.tenant_id = rag_binding.tenant_id and kb.id = rag_binding.kb_id
                                       and mnote_kb_readable(kb.tenant_id, kb.id, kb.visibility, kb.owner_id)));

-- The size of a KB whose row the caller sees (the KB list, the KB page and the delete
-- confirmation), also when its contents are not the caller's to read (an admin and a private
-- KB): a count, nothing else. The KB is looked up as the caller first (kb's policies: a KB the
-- caller cannot see counts 0); only then is the count read with background scope, which is
-- restored before returning (an error aborts the transaction, and the setting with it).

-- Live sources (the KB list's size).
create function mnote_kb_source_count(p_tenant uuid, p_kb uuid) returns bigint
language plpgsql volatile as $$
declare
    prev text := coalesce(current_setting('app.scope', true), '');
    n bigint;
begin
    if not exists (select 1 from kb where kb.tenant_id = p_tenant and kb.id = p_kb) then
        return 0;
    end if;
    perform set_config('app.scope', 'system', true);
    select count(*) into n from source s where s.tenant_id = p_tenant and s.kb_id = p_kb and s.deleted_at is null;
    perform set_config('app.scope', prev, true);
    return n;
end $$;

-- Searchable passages of live sources (what deleting the KB takes out of search).
create function mnote_kb_block_count(p_tenant uuid, p_kb uuid) returns bigint
language plpgsql volatile as $$
declare
    prev text := coalesce(current_setting('app.scope', true), '');
    n bigint;
begin
    if not exists (select 1 from kb where kb.tenant_id = p_tenant and kb.id = p_kb) then
        return 0;
    end if;
    perform set_config('app.scope', 'system', true);
    select count(*) into n from evidence_block b where b.tenant_id = p_tenant and b.kb_id = p_kb;
    perform set_config('app.scope', prev, true);
    return n;
end $$;
