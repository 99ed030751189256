#!/usr/bin/env bash
# SQL-level benchmark of issue 29: the search path's statements with and without an explicit
# `tenant_id = $n` (RLS alone vs RLS + the filter), and a transaction's start with `SET LOCAL`
# vs `set_config(…, true)`. pgbench on the development Postgres (`./dev env` says where), in a
# database of its own that `drop` removes again.
#
#   scripts/bench_tenant_sql/run.sh setup    # database + schema (migrations/) + ~250k blocks
#   scripts/bench_tenant_sql/run.sh time     # before/after latency, alternating, same session
#   scripts/bench_tenant_sql/run.sh explain  # EXPLAIN (ANALYZE, BUFFERS) of each variant
#   scripts/bench_tenant_sql/run.sh drop     # drop the database (always do this at the end)
#
# Data: 4 tenants, one team KB each, sources of 20 blocks of 40 words drawn log-uniformly from
# 20,000 pseudo-words (a Zipf-like spread: a few common words, many rare ones); the measured
# tenant has BENCH_BLOCKS (default 100,000) blocks, the three others BENCH_OTHER (50,000) each.
# Statements run as the confined app role (RLS applies), prepared (`-M prepared`: the tenant
# is a bind parameter as in the server), one client. Environment: BENCH_SECS per run (10),
# BENCH_ROUNDS (2; each round runs before then after, the second round after then before).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DB=mnote_bench_tenant_sql
SECS="${BENCH_SECS:-10}"
ROUNDS="${BENCH_ROUNDS:-2}"
BLOCKS="${BENCH_BLOCKS:-100000}"
OTHER="${BENCH_OTHER:-50000}"
TENANT=00000000-0000-0000-0000-000000000001
USER_ID=00000000-0000-0000-0000-0000000000a1

eval "$("$ROOT/dev" env)"
: "${MNOTE_TEST_ADMIN_URL:?./dev env printed no MNOTE_TEST_ADMIN_URL}"
: "${DATABASE_URL:?./dev env printed no DATABASE_URL}"
PG_BIN="${MNOTE_TEST_PG_BIN:-}"
if [ -z "$PG_BIN" ]; then
  PG_BIN="$(dirname "$(find "$ROOT" "${MNOTE_DATA_DIR:-$ROOT}" -path '*/bin/pgbench' -type f 2>/dev/null | head -1)")"
fi
[ -x "$PG_BIN/pgbench" ] || { echo "pgbench not found (looked in ${PG_BIN:-nothing})" >&2; exit 1; }
PSQL=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1)
# The same server, the bench database: as the admin (setup, drop) and as the app role (timing).
with_db() { local u="${1%%\?*}"; printf '%s/%s' "${u%/*}" "$DB"; }
ADMIN_DB="$(with_db "$MNOTE_TEST_ADMIN_URL")"
APP_DB="$(with_db "$DATABASE_URL")"
APP_ROLE="$(printf '%s' "$DATABASE_URL" | sed -E 's#^[a-z]+://([^:@/]+).*#\1#')"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

setup() {
  "${PSQL[@]}" "$MNOTE_TEST_ADMIN_URL" -c "drop database if exists $DB" -c "create database $DB"
  for f in "$ROOT"/migrations/*.sql; do "${PSQL[@]}" "$ADMIN_DB" -f "$f" >/dev/null; done
  "${PSQL[@]}" "$ADMIN_DB" <<SQL
grant usage on schema public to "$APP_ROLE";
grant select, insert, update, delete on all tables in schema public to "$APP_ROLE";
insert into tenant (id, name) select ('00000000-0000-0000-0000-00000000000' || t)::uuid, 'bench ' || t from generate_series(1, 4) t;
insert into app_user (id, email, password_hash) values ('$USER_ID', 'bench@example.com', 'x');
insert into membership (tenant_id, user_id, role) select id, '$USER_ID', 'owner' from tenant;
insert into kb (tenant_id, id, name, visibility, owner_id)
  select id, ('00000000-0000-0000-0001-' || right(id::text, 12))::uuid, 'kb', 'team', '$USER_ID' from tenant;
-- the hydration statement's 40 ids per run come from here (same cost before and after)
create table bench_ids (n int primary key, id uuid not null);
grant select on bench_ids to "$APP_ROLE";
SQL
  local t n
  for t in 1 2 3 4; do
    n=$([ "$t" = 1 ] && echo "$BLOCKS" || echo "$OTHER")
    echo "tenant $t: $n blocks"
    "${PSQL[@]}" "$ADMIN_DB" <<SQL
\set tenant '''00000000-0000-0000-0000-00000000000$t'''
\set kb '''00000000-0000-0000-0001-00000000000$t'''
insert into source (tenant_id, id, kb_id, origin, resource_path, kind, size_bytes, sha256, status, created_by, indexed_hash)
  select :tenant, gen_random_uuid(), :kb, 'upload', 'uploads/doc-' || i || '.md', 'markdown', 1000, 'h' || i, 'indexed',
         '$USER_ID', 'h' || i
  from generate_series(1, ceil($n / 20.0)::int) i;
insert into evidence_block (tenant_id, id, source_id, kb_id, source_hash, block_key, ordinal, block_type, text,
                            char_start, char_end, text_fingerprint, quality, locator, lex, lex_len)
  select :tenant, gen_random_uuid(), s.id, :kb, s.indexed_hash, 'b' || o, o, 'paragraph', w.text,
         0, length(w.text), md5(w.text), 'exact', '{}'::jsonb, to_tsvector('simple', w.text), 40
  from (select id, indexed_hash, row_number() over (order by id) as r from source where tenant_id = :tenant) s
  cross join generate_series(0, 19) o
  cross join lateral (select string_agg('w' || floor(exp(random() * ln(20000)))::int, ' ') as text
                      from generate_series(1, 40) k where o >= 0 and s.r >= 0) w
  where (s.r - 1) * 20 + o < $n;
SQL
  done
  "${PSQL[@]}" "$ADMIN_DB" <<SQL
insert into bench_ids select row_number() over (order by id), id from evidence_block
  where tenant_id = '$TENANT' order by id limit 20000;
vacuum analyze;
SQL
  "${PSQL[@]}" "$ADMIN_DB" -c "select tenant_id, count(*) from evidence_block group by 1 order by 1"
}

# ---- the statements, as the server sends them (before: RLS only; after: + tenant_id = $n) ----
# :tn is the tenant (a bind parameter under -M prepared), :a/:b two query words.
BEGIN_TX="begin;
select set_config('app.tenant_id', :tn, true), set_config('app.user_id', :un, true), set_config('app.scope', '', true);"
WORDS='\set a random(10, 2000)
\set b random(10, 2000)'
GRANT_ACTIVE="(s.grant_id is null or exists (select 1 from dir_grant g where g.tenant_id = s.tenant_id and g.id = s.grant_id and g.revoked_at is null))"

# $1 = 1 for the explicit filter. Prints the block filter of query::Filters::block_sql.
block_filter() {
  local t=""
  [ "$1" = 1 ] && t="b.tenant_id = :tn::uuid and s.tenant_id = b.tenant_id and "
  printf '%s' "${t}s.id = b.source_id and (null::uuid[] is null) and (true or not b.is_ocr)
    $([ "$1" = 1 ] && echo "and s.tenant_id = :tn::uuid") and (null::text[] is null) and (null::text is null) and (false or s.status <> 'stale')
    and $GRANT_ACTIVE"
}

statement() { # name explicit
  local e="$2" tf=""
  [ "$e" = 1 ] && tf="tenant_id = :tn::uuid and "
  case "$1" in
    lexical) cat <<SQL
with q(term, qtf) as (select * from unnest(array['w' || :a::int, 'w' || :b::int]::text[], array[1, 1]::int4[])),
st as (select term, sum(df)::float8 as df from evidence_term_stat where ${tf}term = any(array['w' || :a::int, 'w' || :b::int]::text[]) and (null::uuid[] is null) group by term),
kbs as (select kb_id, blocks, greatest(total_len::float8 / greatest(blocks, 1), 1) as avgdl from evidence_kb_stat where ${tf}(null::uuid[] is null)),
n as (select greatest(coalesce(sum(blocks), 0), 1)::float8 as n from kbs),
w as (select q.term, q.qtf * ln(1 + (n.n - least(st.df, n.n) + 0.5) / (least(st.df, n.n) + 0.5)) as idf from q join st using (term) cross join n),
cand as (select b.id, b.kb_id, b.lex_len, ts_filter(setweight(b.lex, 'A', array['w' || :a::int, 'w' || :b::int]::text[]), '{a}') as q
         from evidence_block b, source s where b.lex @@ ('w' || :a::int || ' | w' || :b::int)::tsquery and $(block_filter "$e")),
lexical as (select c.id, sum(w.idf * cardinality(u.positions) * 2.2 / (cardinality(u.positions) + 1.2 * (0.25 + 0.75 * c.lex_len / kbs.avgdl))) as score
            from cand c join kbs using (kb_id) cross join lateral unnest(c.q) u join w on w.term = u.lexeme
            group by c.id order by score desc, c.id limit 30)
select id, score from lexical order by score desc, id;
SQL
    ;;
    hydrate) cat <<SQL
select b.id, b.text, b.locator, b.is_ocr, s.status, s.kind, s.resource_path, s.id as source_id, coalesce(s.mtime, s.updated_at) as modified_at
from evidence_block b, source s
where b.id = any((select array_agg(id) from bench_ids where n between :a::int * 5 and :a::int * 5 + 39)::uuid[]) and $(block_filter "$e");
SQL
    ;;
    count) cat <<SQL
select count(*) from evidence_block b, source s where b.lex @@ ('w' || :a::int || ' | w' || :b::int)::tsquery and $(block_filter "$e");
SQL
    ;;
    versions) cat <<SQL
select tenant_id, kb_id, generation, blocks, total_len from evidence_kb_stat where ${tf}(null::uuid[] is null) and blocks > 0 order by kb_id;
SQL
    ;;
    block_counts) cat <<SQL
select source_id, count(*) from evidence_block where ${tf}kb_id = '00000000-0000-0000-0001-000000000001' group by source_id;
SQL
    ;;
  esac
}

script() { # name explicit -> file
  local f="$WORK/$1-$2.sql"
  { echo "$WORDS"; echo "$BEGIN_TX"; statement "$1" "$2"; echo "commit;"; } >"$f"
  echo "$f"
}

# The start of a transaction as TenantTx sends it (one round trip, simple protocol).
begin_script() { # setlocal|set_config
  local f="$WORK/begin-$1.sql"
  if [ "$1" = setlocal ]; then
    echo "begin \\; set local app.tenant_id = '$TENANT' \\; set local app.user_id = '$USER_ID' \\; set local app.scope = '';" >"$f"
  else
    echo "begin \\; select set_config('app.tenant_id', '$TENANT', true), set_config('app.user_id', '$USER_ID', true), set_config('app.scope', '', true);" >"$f"
  fi
  { echo "select count(*) from evidence_kb_stat where tenant_id = '$TENANT';"; echo "commit;"; } >>"$f"
  echo "$f"
}

latency() { # file mode -> "avg_ms tps"
  "$PG_BIN/pgbench" -n -M "$2" -c 1 -T "$SECS" -D tn="$TENANT" -D un="$USER_ID" -f "$1" "$APP_DB" 2>&1 |
    awk '/^latency average/ {l=$4} /^tps/ {t=$3} END {printf "%s %s\n", l, t}'
}

time_all() {
  echo "pgbench -c 1 -T $SECS per run, $ROUNDS rounds (round 1: before, after; round 2: after, before; ...)"
  printf '%-14s %-8s %s\n' statement variant "latency ms per round"
  local name r v runs
  for name in lexical hydrate count versions block_counts; do
    declare -A got=([0]="" [1]="")
    for r in $(seq 1 "$ROUNDS"); do
      for v in $([ $((r % 2)) = 1 ] && echo "0 1" || echo "1 0"); do
        runs="$(latency "$(script "$name" "$v")" prepared)"
        got[$v]="${got[$v]} ${runs%% *}"
      done
    done
    printf '%-14s %-8s%s\n' "$name" before "${got[0]}" "$name" after "${got[1]}"
    echo "${got[0]}|${got[1]}" | awk -F'|' -v n="$name" '{split($1, b, " "); split($2, a, " "); sb = 0; sa = 0
      for (i in b) sb += b[i]; for (i in a) sa += a[i]; printf "%-14s ratio after/before %.2f\n", n, (sa / length(a)) / (sb / length(b))}'
    unset got
  done
  local -A bg=([setlocal]="" [set_config]="")
  for r in $(seq 1 "$ROUNDS"); do
    for v in $([ $((r % 2)) = 1 ] && echo "set_config setlocal" || echo "setlocal set_config"); do
      runs="$(latency "$(begin_script "$v")" simple)"
      bg[$v]="${bg[$v]} ${runs%% *}"
    done
  done
  printf '%-14s %-10s%s\n' begin set_config "${bg[set_config]}" begin "SET LOCAL" "${bg[setlocal]}"
  echo "${bg[set_config]}|${bg[setlocal]}" | awk -F'|' '{split($1, b, " "); split($2, a, " "); sb = 0; sa = 0
    for (i in b) sb += b[i]; for (i in a) sa += a[i]; printf "begin          ratio SET LOCAL/set_config %.2f\n", (sa / length(a)) / (sb / length(b))}'
}

explain_all() {
  local name v
  for name in lexical hydrate count versions block_counts; do
    for v in 0 1; do
      echo "=== $name $([ "$v" = 1 ] && echo "after (explicit tenant_id)" || echo "before (RLS only)")"
      statement "$name" "$v" |
        sed -e "s/:tn::uuid/'$TENANT'::uuid/g" -e "s/:a::int/100/g" -e "s/:b::int/700/g" >"$WORK/q.sql"
      { echo "begin;"
        echo "select set_config('app.tenant_id', '$TENANT', true), set_config('app.user_id', '$USER_ID', true), set_config('app.scope', '', true) \\g /dev/null"
        printf 'explain (analyze, buffers, costs off, timing off, summary on) '; cat "$WORK/q.sql"
        echo "rollback;"; } | "${PSQL[@]}" "$APP_DB" | grep -v '^$'
    done
  done
}

case "${1:-}" in
  setup) setup ;;
  time) time_all ;;
  explain) explain_all ;;
  drop) "${PSQL[@]}" "$MNOTE_TEST_ADMIN_URL" -c "drop database if exists $DB" && echo "dropped $DB" ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
