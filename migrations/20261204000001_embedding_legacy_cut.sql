-- Issue #15: the local MiniLM ran in candle until 2026-12-02 and cut every text at 256 tokens;
-- it now embeds longer texts in windows. Vectors that exist at this migration are marked
-- `legacy_cut` (adding the column with default true marks them without touching a row, so
-- forced RLS is no obstacle); new ones are not. The embedding backlog checks the marked
-- vectors block by block: one whose text is longer than one window of a model that used to
-- cut is deleted and re-embedded whole, the others are unmarked.
alter table evidence_embedding add column legacy_cut boolean not null default true;
alter table evidence_embedding alter column legacy_cut set default false;
create index evidence_embedding_legacy_cut on evidence_embedding (tenant_id) where legacy_cut;
