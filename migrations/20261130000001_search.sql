-- why: evidence search (issue #4). Lexical: a tsvector per block built by the indexer from
-- its own analysis (jieba for CJK, Snowball stemming for English), matched through a GIN
-- index and ranked by BM25 from the per-KB statistics below. Vector: one row per block and
-- embedding model, so a model change re-embeds into new rows and never mixes spaces.

alter table evidence_block add column lex tsvector not null default ''::tsvector;
-- number of analysed tokens: the BM25 document length
alter table evidence_block add column lex_len integer not null default 0;
create index evidence_block_lex on evidence_block using gin (lex);

-- BM25 statistics per KB, kept by the indexer in the same transaction as the blocks.
create table evidence_term_stat (
    tenant_id uuid not null,
    kb_id uuid not null,
    term text not null,
    df integer not null check (df >= 0),
    primary key (tenant_id, kb_id, term),
    foreign key (tenant_id, kb_id) references kb (tenant_id, id) on delete cascade
);

create table evidence_kb_stat (
    tenant_id uuid not null,
    kb_id uuid not null,
    blocks bigint not null default 0 check (blocks >= 0),
    total_len bigint not null default 0 check (total_len >= 0),
    primary key (tenant_id, kb_id),
    foreign key (tenant_id, kb_id) references kb (tenant_id, id) on delete cascade
);

-- `embedding` is untyped so a deployment can use any model dimension; the HNSW index is a
-- partial expression index per (model, dimension), created by `mnote migrate` for the
-- configured embedder (see src/search/vectors.rs), and queries cast to that dimension.
create table evidence_embedding (
    tenant_id uuid not null,
    block_id uuid not null,
    model text not null,
    source_id uuid not null,
    kb_id uuid not null,
    embedding vector not null,
    created_at timestamptz not null default now(),
    primary key (tenant_id, block_id, model),
    foreign key (tenant_id, block_id) references evidence_block (tenant_id, id) on delete cascade,
    foreign key (tenant_id, source_id) references source (tenant_id, id) on delete cascade
);
create index evidence_embedding_source on evidence_embedding (tenant_id, source_id);

do $$
declare t text;
begin
    foreach t in array array['evidence_term_stat', 'evidence_kb_stat', 'evidence_embedding']
    loop
        execute format('alter table %I enable row level security', t);
        execute format('alter table %I force row level security', t);
        execute format($p$create policy tenant_isolation on %I
            using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
            with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)$p$, t);
        -- statistics and vectors are visible only through their (visible) KB
        execute format($p$create policy kb_visible on %I as restrictive
            using (exists (select 1 from kb where kb.tenant_id = %I.tenant_id and kb.id = %I.kb_id))$p$, t, t, t);
    end loop;
end $$;
create policy source_visible on evidence_embedding as restrictive
    using (exists (select 1 from source s where s.tenant_id = evidence_embedding.tenant_id
                                            and s.id = evidence_embedding.source_id));

-- Keep the BM25 statistics in step with the blocks, whatever removes them (re-index, source
-- delete cascades, rebuild). Writers of one KB are serialised by an advisory lock, so
-- concurrent workers never deadlock on the shared term rows.
create function evidence_block_stats() returns trigger language plpgsql as $$
declare k record;
begin
    if tg_op = 'INSERT' then
        for k in select distinct tenant_id, kb_id from new_rows order by 1, 2 loop
            perform pg_advisory_xact_lock(hashtextextended('mnote_kb_stats:' || k.kb_id::text, 0));
        end loop;
        insert into evidence_kb_stat (tenant_id, kb_id, blocks, total_len)
            select tenant_id, kb_id, count(*), coalesce(sum(lex_len), 0) from new_rows group by 1, 2
            on conflict (tenant_id, kb_id) do update
            set blocks = evidence_kb_stat.blocks + excluded.blocks,
                total_len = evidence_kb_stat.total_len + excluded.total_len;
        insert into evidence_term_stat (tenant_id, kb_id, term, df)
            select n.tenant_id, n.kb_id, u.lexeme, count(*) from new_rows n, unnest(n.lex) u
            group by 1, 2, 3 order by 1, 2, 3
            on conflict (tenant_id, kb_id, term) do update set df = evidence_term_stat.df + excluded.df;
    else
        for k in select distinct tenant_id, kb_id from old_rows order by 1, 2 loop
            perform pg_advisory_xact_lock(hashtextextended('mnote_kb_stats:' || k.kb_id::text, 0));
        end loop;
        update evidence_kb_stat s
            set blocks = greatest(s.blocks - d.n, 0), total_len = greatest(s.total_len - d.len, 0)
            from (select tenant_id, kb_id, count(*) as n, coalesce(sum(lex_len), 0) as len
                  from old_rows group by 1, 2) d
            where s.tenant_id = d.tenant_id and s.kb_id = d.kb_id;
        update evidence_term_stat s set df = greatest(s.df - d.n, 0)
            from (select o.tenant_id, o.kb_id, u.lexeme as term, count(*) as n
                  from old_rows o, unnest(o.lex) u group by 1, 2, 3) d
            where s.tenant_id = d.tenant_id and s.kb_id = d.kb_id and s.term = d.term;
    end if;
    return null;
end $$;
create trigger evidence_block_stats_insert after insert on evidence_block
    referencing new table as new_rows for each statement execute function evidence_block_stats();
create trigger evidence_block_stats_delete after delete on evidence_block
    referencing old table as old_rows for each statement execute function evidence_block_stats();
-- Blocks are never updated in place (re-indexing replaces them); refuse it so the
-- statistics cannot drift.
create function evidence_block_no_lex_update() returns trigger language plpgsql as $$
begin
    raise exception 'evidence_block.lex is written once; delete and insert instead';
end $$;
create trigger evidence_block_lex_immutable before update of lex, lex_len, kb_id on evidence_block
    for each row execute function evidence_block_no_lex_update();
