-- why: knowledge RAG (issue #12). A KB can be bound to a LightRAG endpoint (`rag_binding`,
-- its API key encrypted by the app with a key the database never sees); every indexed source
-- of a bound KB is mirrored as one LightRAG document (`rag_doc`). Both under forced RLS.

create table rag_binding (
    tenant_id uuid not null,
    id uuid not null,
    kb_id uuid not null,
    url text not null,
    label text,
    -- nonce(24) || XChaCha20-Poly1305 ciphertext+tag; AAD names the KB (see src/rag/binding.rs)
    api_key_cipher bytea,
    key_version smallint not null default 1,
    -- false once unbound or replaced: the sync worker deletes its documents, then the row
    active boolean not null default true,
    lightrag_version text,
    reachable boolean,
    last_error_code text,
    last_error_message text,
    checked_at timestamptz,
    created_by uuid,
    created_at timestamptz not null default now(),
    primary key (tenant_id, id)
);
-- at most one live binding per KB (retired ones linger until their documents are deleted)
create unique index rag_binding_active on rag_binding (tenant_id, kb_id) where active;

create table rag_doc (
    tenant_id uuid not null,
    binding_id uuid not null,
    -- no foreign key: the row outlives its source until the LightRAG document is deleted
    source_id uuid not null,
    file_source text not null,
    doc_id text not null,
    -- the source version sent (source.indexed_hash at the time)
    source_hash text not null,
    method text not null check (method in ('upload', 'text')),
    status text not null check (status in ('pending', 'processing', 'processed', 'failed', 'deleted')),
    track_id text,
    -- the text sent holds OCR text (images, scanned pages): checked once processed
    ocr_expected boolean not null default false,
    ocr_text_exposed boolean,
    error_code text,
    error_message text,
    attempts integer not null default 0,
    run_after timestamptz not null default now(),
    sent_at timestamptz,
    updated_at timestamptz not null default now(),
    primary key (tenant_id, binding_id, source_id),
    foreign key (tenant_id, binding_id) references rag_binding (tenant_id, id) on delete cascade
);
create index rag_doc_source on rag_doc (tenant_id, source_id);

do $$
declare t text;
begin
    foreach t in array array['rag_binding', 'rag_doc']
    loop
        execute format('alter table %I enable row level security', t);
        execute format('alter table %I force row level security', t);
        execute format($p$create policy tenant_isolation on %I
            using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
            with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)$p$, t);
    end loop;
end $$;

-- A binding follows its KB's visibility; the sync worker (system scope) also sees the
-- bindings of deleted KBs, to clean their documents up.
create policy rag_binding_kb_visible on rag_binding as restrictive
    using (current_setting('app.scope', true) = 'system'
        or exists (select 1 from kb where kb.tenant_id = rag_binding.tenant_id and kb.id = rag_binding.kb_id));
create policy rag_doc_binding_visible on rag_doc as restrictive
    using (exists (select 1 from rag_binding b where b.tenant_id = rag_doc.tenant_id and b.id = rag_doc.binding_id));

-- The KB page's live sync state.
create function notify_rag_doc_change() returns trigger language plpgsql as $$
declare k uuid;
begin
    select kb_id into k from rag_binding where tenant_id = new.tenant_id and id = new.binding_id;
    if k is not null then
        perform pg_notify('mnote_source', new.tenant_id::text || ':' || k::text);
    end if;
    return new;
end $$;
create trigger rag_doc_notify after insert or update of status, ocr_text_exposed, error_code on rag_doc
    for each row execute function notify_rag_doc_change();
