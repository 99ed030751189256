-- why: the ingestion pipeline (issue #3). `source_artifact` holds the derived truth (text +
-- source map per source version); `evidence_*` rows are caches rebuilt from artifacts;
-- `ingest_job` is the Postgres job queue. All tenant tables, all under forced RLS.

create table source_artifact (
    tenant_id uuid not null,
    source_id uuid not null,
    source_hash text not null,
    provider text not null,
    provider_version text not null,
    text text not null,
    source_map jsonb not null,
    created_at timestamptz not null default now(),
    primary key (tenant_id, source_id, source_hash),
    foreign key (tenant_id, source_id) references source (tenant_id, id) on delete cascade
);

alter table source add column indexed_hash text;
alter table source add column pages integer;

create table evidence_section (
    tenant_id uuid not null,
    id uuid not null,
    source_id uuid not null,
    kb_id uuid not null,
    section_key text not null,
    parent_key text,
    title text not null,
    path text[] not null,
    level smallint not null,
    ordinal integer not null,
    page_start integer,
    page_end integer,
    line_start integer,
    line_end integer,
    primary key (tenant_id, id),
    unique (tenant_id, source_id, section_key),
    foreign key (tenant_id, source_id) references source (tenant_id, id) on delete cascade
);

create table evidence_block (
    tenant_id uuid not null,
    id uuid not null,
    source_id uuid not null,
    kb_id uuid not null,
    source_hash text not null,
    block_key text not null,
    section_key text,
    ordinal integer not null,
    block_type text not null,
    text text not null,
    page integer,
    bbox double precision[],
    page_width double precision,
    page_height double precision,
    line_start integer,
    line_end integer,
    char_start integer not null,
    char_end integer not null,
    para_id_start text,
    para_id_end text,
    paragraph_ordinal integer,
    text_fingerprint text not null,
    quality text not null check (quality in ('exact', 'approximate', 'page_only', 'resource_only')),
    confidence real,
    is_ocr boolean not null default false,
    locator jsonb not null,
    primary key (tenant_id, id),
    unique (tenant_id, source_id, block_key),
    foreign key (tenant_id, source_id) references source (tenant_id, id) on delete cascade
);
create index evidence_block_source on evidence_block (tenant_id, source_id, ordinal);

create table evidence_edge (
    tenant_id uuid not null,
    id uuid not null,
    source_id uuid not null,
    kind text not null check (kind in ('document_contains_resource', 'section_contains_block',
        'markdown_links_to', 'resource_refers_to', 'block_mentions_entity')),
    -- every edge starts at a located block
    source_block_id uuid not null,
    target_block_id uuid,
    target_section_key text,
    target_text text,
    primary key (tenant_id, id),
    foreign key (tenant_id, source_id) references source (tenant_id, id) on delete cascade,
    foreign key (tenant_id, source_block_id) references evidence_block (tenant_id, id) on delete cascade
);
create index evidence_edge_from on evidence_edge (tenant_id, source_block_id);

create table ingest_job (
    tenant_id uuid not null,
    id uuid not null,
    source_id uuid not null,
    status text not null default 'queued' check (status in ('queued', 'running', 'done', 'failed')),
    attempts integer not null default 0,
    run_after timestamptz not null default now(),
    lease_until timestamptz,
    worker text,
    error_code text,
    error_message text,
    created_at timestamptz not null default now(),
    finished_at timestamptz,
    primary key (tenant_id, id),
    foreign key (tenant_id, source_id) references source (tenant_id, id) on delete cascade
);
create index ingest_job_ready on ingest_job (tenant_id, run_after) where status in ('queued', 'running');
-- at most one open job per source
create unique index ingest_job_open on ingest_job (tenant_id, source_id) where status in ('queued', 'running');

do $$
declare t text;
begin
    foreach t in array array['source_artifact', 'evidence_section', 'evidence_block', 'evidence_edge', 'ingest_job']
    loop
        execute format('alter table %I enable row level security', t);
        execute format('alter table %I force row level security', t);
        execute format($p$create policy tenant_isolation on %I
            using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
            with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)$p$, t);
        -- rows of a source are visible only through its (visible) KB
        execute format($p$create policy source_visible on %I as restrictive
            using (exists (select 1 from source s where s.tenant_id = %I.tenant_id and s.id = %I.source_id))$p$, t, t, t);
    end loop;
end $$;

-- Wake listeners (KB pages' live status, CLI progress) when a source changes.
create function notify_source_change() returns trigger language plpgsql as $$
begin
    perform pg_notify('mnote_source', new.tenant_id::text || ':' || new.kb_id::text);
    return new;
end $$;
create trigger source_notify after insert or update of status, error_code, indexed_hash on source
    for each row execute function notify_source_change();
