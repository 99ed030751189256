-- why: the search server keeps an in-memory BM25 postings mirror per KB (src/search/memindex.rs)
-- and must know when a KB's blocks changed. `generation` goes up with every statement that
-- inserts or deletes blocks of the KB, in the same transaction as the blocks, so a mirror
-- built at generation g is exact for exactly as long as the row still says g.

alter table evidence_kb_stat add column generation bigint not null default 0;

create or replace function evidence_block_stats() returns trigger language plpgsql as $$
declare k record;
begin
    if tg_op = 'INSERT' then
        for k in select distinct tenant_id, kb_id from new_rows order by 1, 2 loop
            perform pg_advisory_xact_lock(hashtextextended('mnote_kb_stats:' || k.kb_id::text, 0));
        end loop;
        insert into evidence_kb_stat (tenant_id, kb_id, blocks, total_len, generation)
            select tenant_id, kb_id, count(*), coalesce(sum(lex_len), 0), 1 from new_rows group by 1, 2
            on conflict (tenant_id, kb_id) do update
            set blocks = evidence_kb_stat.blocks + excluded.blocks,
                total_len = evidence_kb_stat.total_len + excluded.total_len,
                generation = evidence_kb_stat.generation + 1;
        insert into evidence_term_stat (tenant_id, kb_id, term, df)
            select n.tenant_id, n.kb_id, u.lexeme, count(*) from new_rows n, unnest(n.lex) u
            group by 1, 2, 3 order by 1, 2, 3
            on conflict (tenant_id, kb_id, term) do update set df = evidence_term_stat.df + excluded.df;
    else
        for k in select distinct tenant_id, kb_id from old_rows order by 1, 2 loop
            perform pg_advisory_xact_lock(hashtextextended('mnote_kb_stats:' || k.kb_id::text, 0));
        end loop;
        update evidence_kb_stat s
            set blocks = greatest(s.blocks - d.n, 0), total_len = greatest(s.total_len - d.len, 0),
                generation = s.generation + 1
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

-- A vector's source is in the vector's KB, and a source is visible exactly when its KB is
-- (the source policy), so `kb_visible` already decides; the extra per-source check made every
-- vector search hash all of the tenant's sources first.
drop policy source_visible on evidence_embedding;
