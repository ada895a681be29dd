#!/usr/bin/env bash
# Where the time goes in push and consume: runs one queen-bench workload against our
# server on a durable PostgreSQL cluster of its own and records CPU profiles of the server and
# of every PostgreSQL backend with `perf`, as flamegraphs (inferno) and top-N tables.
#
#   scripts/profile.sh push-batch [seconds]      # default 5 s of recording
#   scripts/profile.sh consume [seconds]
#
# Needs: perf, PostgreSQL 15 binaries (/usr/lib/postgresql/15/bin), and inferno
# (`cargo install inferno`). Runs as root (the cluster runs as the `postgres` user).
# Output: docs/profiles/<workload>-{server,postgres}.svg and .txt
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:?usage: scripts/profile.sh push-batch|push-single|consume [seconds]}
secs=${2:-5}
bin=/usr/lib/postgresql/15/bin
out=docs/profiles
mkdir -p "$out"
command -v perf >/dev/null || { echo "missing perf (apt-get install linux-perf)"; exit 1; }
# Without inferno the tables are still written; the flamegraphs are skipped.
flames=1
for t in inferno-collapse-perf inferno-flamegraph; do
    command -v "$t" >/dev/null || { echo "no $t (cargo install inferno): tables only, no flamegraphs"; flames=0; }
done
cargo build --release -q -p queen-server -p queen-bench

tmp=$(mktemp -d /tmp/queen-profile.XXXXXX)
chown postgres "$tmp"
pg_port=$((20000 + RANDOM % 20000))
http_port=$((40000 + RANDOM % 20000))
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    su postgres -c "$bin/pg_ctl -D $tmp/data -m immediate stop" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
# Durable, as the bench's own cluster (queen-pg's DURABLE); QUEEN_PROFILE_THROWAWAY=1 for
# its throwaway settings (fsync, synchronous commit and full-page writes off).
durability=""
[ "${QUEEN_PROFILE_THROWAWAY:-0}" = 1 ] && durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
su postgres -c "$bin/initdb -D $tmp/data -A trust -U postgres" >/dev/null
su postgres -c "$bin/pg_ctl -D $tmp/data -l $tmp/pg.log -w start -o '-p $pg_port -k $tmp -c listen_addresses=127.0.0.1 $durability -c max_connections=300'" >/dev/null
url="postgres://postgres@127.0.0.1:$pg_port/postgres"
PORT=$http_port HOST=127.0.0.1 DATABASE_URL=$url DB_POOL_SIZE=10 SPOOL_DIR=$tmp/spool RUST_LOG=warn \
    target/release/queen-server >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http_port/health" >/dev/null && break; sleep 0.1; done

case $workload in
    consume) args=(--messages 400000) ;;
    *) args=(--duration-secs $((secs + 4))) ;;
esac
target/release/queen-bench --target "http://127.0.0.1:$http_port" --database-url "$url" \
    --repeat 1 --workloads "$workload" "${args[@]}" >"$tmp/bench.out" 2>"$tmp/bench.err" &
bench_pid=$!
if [ "$workload" = consume ]; then
    # Record the drain only, not the pre-fill.
    until grep -q "draining" "$tmp/bench.err" 2>/dev/null; do sleep 0.2; done
else
    sleep 2
fi
# This cluster's backends only (other clusters may run on the machine).
postmaster=$(head -1 "$tmp/data/postmaster.pid")
pg_pids=$(pgrep -d, -P "$postmaster")
perf record -q -F 997 --call-graph dwarf,16384 -p "$server_pid" -o "$tmp/server.data" -- sleep "$secs" 2>/dev/null &
p1=$!
perf record -q -F 997 --call-graph dwarf,16384 -p "$pg_pids" -o "$tmp/pg.data" -- sleep "$secs" 2>/dev/null &
p2=$!
wait "$p1" "$p2"
wait "$bench_pid" || true
grep -v '^{' "$tmp/bench.out" | tail -2

for who in server pg; do
    name=$([ $who = pg ] && echo postgres || echo server)
    if [ "$flames" = 1 ]; then
        perf script -i "$tmp/$who.data" 2>"$tmp/$who.script.err" | inferno-collapse-perf >"$tmp/$who.folded" || { echo "perf script failed:"; tail -3 "$tmp/$who.script.err"; }
        inferno-flamegraph --title "$workload: $name" <"$tmp/$who.folded" >"$out/$workload-$name.svg"
    fi
    # Self time by function, then the frames that hold the most time with their callees.
    {
        echo "## self"
        perf report -i "$tmp/$who.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
            grep -v "^#" | grep -v "^$" | head -40
        # The runtime's own frames (workers, polls, inlined shims) hold everything; the
        # program's, the database driver's, HTTP's and the kernel's entry points say where.
        echo "## with callees (our code, sqlx, hyper, serde, system calls)"
        perf report -i "$tmp/$who.data" --children --sort sym --stdio -g none 2>/dev/null |
            grep -v "^#" | grep -v "^$" | grep -v "(inlined)" |
            grep -E "queen_|sqlx|hyper::proto::h1::(role|io)|serde_json::(de|ser)::|__x64_sys|Exec|exec_|Commit|XLog|pq_" |
            head -50
    } >"$out/$workload-$name.txt" || true
    samples=$(perf script -i "$tmp/$who.data" -F time 2>/dev/null | wc -l)
    echo "$out/$workload-$name: $samples samples at 997 Hz over $secs s = $(awk -v n="$samples" -v s="$secs" 'BEGIN {printf "%.2f", n / 997 / s}') cores busy"
done
