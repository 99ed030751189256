-- why: BM25 scoring from postings. Unnesting every candidate's tsvector to find the query
-- terms' frequencies cost ~0.7 s per SciFact query; one index-only range per query term
-- (term → blocks with tf and length) costs a few milliseconds. The tsvector + GIN index
-- stay for matching; postings are derived from it by the block trigger.

create table evidence_posting (
    tenant_id uuid not null,
    term text not null,
    block_id uuid not null,
    kb_id uuid not null,
    tf smallint not null,
    dl integer not null,
    primary key (tenant_id, term, block_id) include (kb_id, tf, dl)
);
create index evidence_posting_block on evidence_posting (tenant_id, block_id);

alter table evidence_posting enable row level security;
alter table evidence_posting force row level security;
create policy tenant_isolation on evidence_posting
    using (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid)
    with check (tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid);
create policy kb_visible on evidence_posting as restrictive
    using (exists (select 1 from kb where kb.tenant_id = evidence_posting.tenant_id and kb.id = evidence_posting.kb_id));

create or replace function evidence_block_stats() returns trigger language plpgsql as $$
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
        insert into evidence_posting (tenant_id, term, block_id, kb_id, tf, dl)
            select n.tenant_id, u.lexeme, n.id, n.kb_id, least(cardinality(u.positions), 32767), n.lex_len
            from new_rows n, unnest(n.lex) u;
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
        delete from evidence_posting p using old_rows o where p.tenant_id = o.tenant_id and p.block_id = o.id;
    end if;
    return null;
end $$;

-- Blocks indexed before this migration (the owner skips RLS only while it is not forced;
-- this runs inside the migration's transaction).
alter table evidence_block no force row level security;
alter table evidence_posting no force row level security;
insert into evidence_posting (tenant_id, term, block_id, kb_id, tf, dl)
    select b.tenant_id, u.lexeme, b.id, b.kb_id, least(cardinality(u.positions), 32767), b.lex_len
    from evidence_block b, unnest(b.lex) u;
alter table evidence_block force row level security;
alter table evidence_posting force row level security;
