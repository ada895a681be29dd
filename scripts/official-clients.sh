#!/usr/bin/env bash
# The official clients' own test suites against our broker, started with embedded defaults
# (issue 47): the Python client's sdist tests (queen-mq on PyPI) and the JavaScript
# client's integration tests (queen-mq on npm), each unchanged, plus a check that the
# clients' encryption round trip leaves the payload sealed in PostgreSQL.
#
# Usage (from anywhere in the repo):
#   scripts/official-clients.sh
#   QUEEN_SERVER_BIN=/path/to/queen-server scripts/official-clients.sh   # skip the build
#
# Settings (environment):
#   QUEEN_SERVER_BIN     a queen-server binary; default: cargo build --release -p queen-server
#   QUEEN_CLIENTS        which suites: python,js (default both; the sealed check runs with python)
#   QUEEN_CLIENTS_CACHE  where the virtualenv, the sdist and the npm package are kept
#                        (default target/official-clients)
#   QUEEN_PY_CLIENT      the PyPI release (default 2.6.0, as src/python.rs pins)
#   QUEEN_JS_CLIENT      the npm package and release (default queen-mq@2.6.0)
#   QUEEN_JS_TARBALL     that package as a tarball at hand, used instead of the registry's
#   QUEEN_TEST_TIMEOUT   seconds one Python test may take (default 120)
#   QUEEN_SUITE_TIMEOUT  seconds one client's whole suite may take (default 1800)
#
# What it runs: the server with no DATABASE_URL and no encryption key (an embedded cluster in
# a fresh temporary --data-dir, its key made beside it, a free --port on 127.0.0.1), then
# each suite pointed at it, then the sealed-row check with psql on the embedded cluster. The
# server and the temporary directory are removed on every exit.
#
# Left out: only tests that read another broker's SQL schema, listed with a reason in
# tests/official/{python,js}/excluded.txt. Anything else that fails is a finding.
#
# Exit status: 0 when every suite ran and passed and the payload was sealed; 1 when a test
# failed or the check did not hold; 2 when something could not run (build, server, package).
# The functions below run through traps and `"run_$client"`, which shellcheck cannot follow.
# shellcheck disable=SC2317
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

py_version="${QUEEN_PY_CLIENT:-2.6.0}"
js_spec="${QUEEN_JS_CLIENT:-queen-mq@2.6.0}"
clients="${QUEEN_CLIENTS:-python,js}"
cache="${QUEEN_CLIENTS_CACHE:-$root/target/official-clients}"
test_timeout="${QUEEN_TEST_TIMEOUT:-120}"
suite_timeout="${QUEEN_SUITE_TIMEOUT:-1800}"
official="$root/tests/official"

started=$(date +%s)
say() { printf '[official-clients %4ss] %s\n' "$(($(date +%s) - started))" "$*"; }
die() {
    say "ERROR: $*" >&2
    exit 2
}
wants() { [[ ",$clients," == *",$1,"* ]]; }

for tool in python3 curl timeout; do
    command -v "$tool" >/dev/null || die "$tool is required"
done

# --- the server binary -----------------------------------------------------------------
if [ -n "${QUEEN_SERVER_BIN:-}" ]; then
    server_bin="$QUEEN_SERVER_BIN"
else
    say "cargo build --release -p queen-server"
    timeout 3600 cargo build --release -p queen-server || die "the build failed"
    server_bin="${CARGO_TARGET_DIR:-$root/target}/release/queen-server"
fi
[ -x "$server_bin" ] || die "no server binary at $server_bin"

# --- a scratch directory, the server, and their removal on every exit ------------------
work="$(mktemp -d "${TMPDIR:-/tmp}/queen-official-clients.XXXXXX")"
# The embedded cluster runs as the `postgres` user when we are root: it must reach its data dir.
chmod 755 "$work"
server_pid=""
# A long step (a whole suite) runs in the background so that a signal to this script is
# handled at once: the trap stops the step (timeout passes the signal on to its command).
step_pid=""
in_background() {
    "$@" &
    step_pid=$!
    local rc=0
    wait "$step_pid" || rc=$?
    step_pid=""
    return "$rc"
}
# terminate PID HALF_SECONDS: TERM, up to HALF_SECONDS half-seconds to go, then KILL.
terminate() {
    kill -0 "$1" 2>/dev/null || return 0
    kill -TERM "$1" 2>/dev/null || true
    for _ in $(seq 1 "$2"); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.5
    done
    kill -KILL "$1" 2>/dev/null || true
}
stop_step() {
    [ -z "$step_pid" ] || terminate "$step_pid" 20
    step_pid=""
}
stop_server() {
    if [ -n "$server_pid" ]; then
        terminate "$server_pid" 30
        wait "$server_pid" 2>/dev/null || true
    fi
    server_pid=""
    # A server that was killed leaves its cluster running: stop it by the pid it recorded.
    local pm="$work/pg/postmaster.pid"
    if [ -f "$pm" ]; then
        local pg_pid
        pg_pid="$(head -n 1 "$pm" 2>/dev/null || true)"
        if [[ "$pg_pid" =~ ^[0-9]+$ ]] && kill -0 "$pg_pid" 2>/dev/null; then
            kill -QUIT "$pg_pid" 2>/dev/null || true
            sleep 1
        fi
    fi
}
cleanup() {
    local status=$?
    stop_step
    stop_server
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port="$(free_port)"
pg_port="$(free_port)"
while [ "$pg_port" = "$port" ]; do pg_port="$(free_port)"; done
url="http://127.0.0.1:$port"

# Embedded defaults only: nothing from the caller's environment reaches the server but what
# it needs to find its tools (no DATABASE_URL, no QUEEN_ENCRYPTION_KEY, no JWT_*).
say "starting $server_bin on $url (embedded PostgreSQL on port $pg_port, data in $work/pg)"
env -i PATH="$PATH" HOME="${HOME:-/root}" ${QUEEN_PG_BINDIR:+QUEEN_PG_BINDIR="$QUEEN_PG_BINDIR"} NO_COLOR=1 \
    "$server_bin" --host 127.0.0.1 --port "$port" --data-dir "$work/pg" \
    --spool-dir "$work/spool" --embedded-pg-port "$pg_port" >"$work/server.log" 2>&1 &
server_pid=$!
healthy=""
for _ in $(seq 1 240); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        tail -n 30 "$work/server.log" >&2 || true
        die "the server stopped before it answered /health"
    fi
    if curl -fsS --max-time 2 "$url/health" >/dev/null 2>&1; then
        healthy=1
        break
    fi
    sleep 0.5
done
[ -n "$healthy" ] || die "no answer from $url/health within 120 s (log: $(tail -n 5 "$work/server.log"))"
say "server healthy: $(curl -fsS --max-time 5 "$url/health")"
[ -f "$work/pg.key" ] && say "the embedded database made its own key: $work/pg.key (ENC-4)"

# Per client: passed failed excluded skipped, and a status (ran / "not run: why").
declare -A passed failed excluded skipped outside status
findings="$work/findings.txt"
: >"$findings"

# --- Python: queen-mq's sdist tests ----------------------------------------------------
run_python() {
    local venv="$cache/python-$py_version"
    local sdist_dir="$cache/sdist-$py_version"
    mkdir -p "$cache"
    if ! "$venv/bin/python" -c "import queen, pytest, pytest_asyncio, pytest_timeout, sys; sys.exit(queen.__version__ != sys.argv[1])" "$py_version" 2>/dev/null; then
        say "python: making the virtualenv $venv (pinned: tests/official/python/requirements.txt)"
        rm -rf "$venv"
        timeout 120 python3 -m venv "$venv" || return 2
        timeout 900 "$venv/bin/pip" install --quiet --disable-pip-version-check \
            -r "$official/python/requirements.txt" "queen-mq==$py_version" || return 2
    fi
    local sdist
    sdist="$(ls "$sdist_dir"/queen_mq-"$py_version".tar.gz 2>/dev/null || true)"
    if [ -z "$sdist" ]; then
        say "python: pip download --no-binary :all: --no-deps queen-mq==$py_version"
        timeout 600 "$venv/bin/pip" download --quiet --disable-pip-version-check \
            --no-binary :all: --no-deps -d "$sdist_dir" "queen-mq==$py_version" || return 2
        sdist="$sdist_dir/queen_mq-$py_version.tar.gz"
    fi
    local dir="$work/python"
    mkdir -p "$dir"
    tar -xzf "$sdist" -C "$dir" "queen_mq-$py_version/tests" || return 2
    dir="$dir/queen_mq-$py_version/tests"
    cp "$official/python/conftest.py" "$official/python/pytest.ini" "$dir/"

    local deselect=() n_excluded=0 line id
    while IFS= read -r line; do
        line="${line%%#*}"
        id="$(awk '{print $1}' <<<"$line")"
        [ -n "$id" ] || continue
        deselect+=(--deselect "$id")
        n_excluded=$((n_excluded + 1))
        say "python: excluded $line"
    done <"$official/python/excluded.txt"
    excluded[python]=$n_excluded

    say "python: pytest on $(find "$dir" -maxdepth 1 -name 'test_*.py' | wc -l) files of queen-mq $py_version's tests (each test at most ${test_timeout} s)"
    local rc=0
    # QUEEN_HTTP_TRACE: conftest.py writes every exchange there, for the findings below.
    in_background timeout --kill-after=30 "$suite_timeout" env -C "$dir" QUEEN_URL="$url" \
        QUEEN_SERVER_URL="$url" QUEEN_HTTP_TRACE="$work/python-trace.txt" \
        "$venv/bin/python" -m pytest -p no:cacheprovider --timeout "$test_timeout" -q -rfEs \
        --junitxml="$work/python-junit.xml" "${deselect[@]}" . >"$work/python.log" 2>&1 || rc=$?
    cp "$work/python.log" "$cache/python-last.log" 2>/dev/null || true
    tail -n 3 "$work/python.log" | sed 's/^/    /'
    if [ ! -s "$work/python-junit.xml" ]; then
        say "python: pytest wrote no report (exit $rc); last lines:"
        tail -n 30 "$work/python.log" >&2
        return 2
    fi
    cp "$work/python-junit.xml" "$cache/python-last-junit.xml" 2>/dev/null || true
    cp "$work/python-trace.txt" "$cache/python-last-trace.txt" 2>/dev/null || true
    "$venv/bin/python" "$official/python/junit_summary.py" "$work/python-junit.xml" "$work/python-trace.txt" \
        "$official/python/outside.txt" >"$work/python-summary.txt"
    local counts
    counts="$(tail -n 1 "$work/python-summary.txt")"
    passed[python]="$(sed -E 's/.*passed=([0-9]+).*/\1/' <<<"$counts")"
    failed[python]="$(sed -E 's/.*failed=([0-9]+).*/\1/' <<<"$counts")"
    skipped[python]="$(sed -E 's/.*skipped=([0-9]+).*/\1/' <<<"$counts")"
    outside[python]="$(sed -E 's/.*outside=([0-9]+).*/\1/' <<<"$counts")"
    grep -v '^counts ' "$work/python-summary.txt" | sed -E 's/^(FAILED|SKIPPED|OUTSIDE)/python: \1/' >>"$findings" || true
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "python: FAILED the suite itself: stopped after ${suite_timeout} s" >>"$findings"
        failed[python]=$((failed[python] + 1))
    fi
    return 0
}

# --- the sealed-row check: the client's round trip, then the row in queen_messages ------
sealed_ok=""
run_sealed_check() {
    local venv="$cache/python-$py_version"
    local psql_bin
    psql_bin="$(command -v psql || true)"
    [ -n "$psql_bin" ] || psql_bin="$(find /usr/lib/postgresql -path '*/bin/psql' 2>/dev/null | sort | tail -n 1)"
    [ -n "$psql_bin" ] || {
        say "sealed: no psql found"
        return 2
    }
    local queue="official-sealed-$$"
    say "sealed: the official client configures $queue with encryption_enabled, pushes a marked payload, pops it back in clear"
    local out
    out="$(timeout 120 "$venv/bin/python" "$official/python/sealed_round_trip.py" "$url" "$queue" 2>&1)" || {
        say "sealed: the round trip failed: $out"
        return 1
    }
    out="$(grep -E '^queue=.* marker=' <<<"$out" | tail -n 1)"
    local marker="${out##*marker=}"
    [ -n "$marker" ] || {
        say "sealed: the round trip printed no marker"
        return 1
    }
    say "sealed: round trip ok: $out"
    local sql="SELECT q.name, m.\"offset\", m.sealed, m.data::text FROM queen_messages m
        JOIN queen_partitions p ON p.id = m.partition_id JOIN queen_queues q ON q.id = p.queue_id
        WHERE q.options->>'encryptionEnabled' = 'true' ORDER BY q.name, m.\"offset\""
    local rows
    rows="$(PGCONNECT_TIMEOUT=5 timeout 30 "$psql_bin" -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres \
        -X -q -A -t -F '|' -c "$sql" 2>&1)" || {
        say "sealed: psql failed: $rows"
        return 2
    }
    say "sealed: psql on the embedded cluster: $sql"
    echo "    queue|offset|sealed|data"
    while IFS= read -r line; do echo "    $line"; done <<<"$rows"
    local bad=0 name off flag data line
    local mine=0
    while IFS='|' read -r name off flag data; do
        [ -n "$name" ] || continue
        [ "$name" = "$queue" ] && mine=$((mine + 1))
        if [ "$flag" != t ]; then
            say "sealed: FAILED $name offset $off is stored with sealed=$flag"
            bad=1
        fi
        # A sealed payload is a JSON string (the base64 of nonce and ciphertext), never the
        # object the client sent, and holds none of its clear text.
        if [[ "$data" != \"* ]] || [[ "$data" == *"$marker"* ]] || [[ "$data" == *"Hello, world"* ]]; then
            say "sealed: FAILED $name offset $off holds the payload in clear: $data"
            bad=1
        fi
    done <<<"$rows"
    if [ "$mine" -ne 1 ]; then
        say "sealed: FAILED expected one row of $queue, found $mine"
        bad=1
    fi
    if [ "$bad" -eq 0 ]; then
        say "sealed: OK: every row of a queue with encryptionEnabled has sealed=t and a base64 string, none holds the clear text (marker $marker)"
        sealed_ok=1
        return 0
    fi
    return 1
}

# --- JavaScript: queen-mq's integration tests (test-v2/run.js human) -------------------
run_js() {
    if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
        say "js: node and npm are required"
        return 2
    fi
    # QUEEN_JS_TARBALL: a package tarball at hand (npm pack of the client's folder) instead
    # of the registry's.
    local source="${QUEEN_JS_TARBALL:-$js_spec}"
    local pkg_dir
    pkg_dir="$cache/js-$(basename "$source" | tr -c 'A-Za-z0-9.\n-' _)"
    if [ ! -f "$pkg_dir/package/.installed" ]; then
        rm -rf "$pkg_dir"
        mkdir -p "$pkg_dir"
        if [ -n "${QUEEN_JS_TARBALL:-}" ]; then
            cp "$QUEEN_JS_TARBALL" "$pkg_dir/" || return 2
        else
            say "js: npm pack $js_spec"
            local err
            if ! err="$(cd "$pkg_dir" && timeout 300 npm pack --loglevel=error "$js_spec" 2>&1)"; then
                local why
                why="$(grep -m1 -oE '404 Not Found.*' <<<"$err" || grep -m1 'error' <<<"$err" || tail -n 1 <<<"$err")"
                say "js: npm pack $js_spec failed: $why"
                status[js]="not run: npm pack $js_spec failed: $why"
                return 2
            fi
        fi
        tar -xzf "$pkg_dir"/*.tgz -C "$pkg_dir" || return 2
        say "js: npm install (its dependencies and devDependencies, as its package.json says)"
        (cd "$pkg_dir/package" && timeout 900 npm install --no-audit --no-fund --include=dev --loglevel=error) || return 2
        touch "$pkg_dir/package/.installed"
    fi
    local names=() n_excluded=0 line id
    while IFS= read -r line; do
        line="${line%%#*}"
        id="$(awk '{print $1}' <<<"$line")"
        [ -n "$id" ] || continue
        names+=("$id")
        n_excluded=$((n_excluded + 1))
        say "js: excluded $line"
    done <"$official/js/excluded.txt"
    excluded[js]=$n_excluded

    # The suite reads its broker from QUEEN_SERVER_URL and opens a pg pool from PG_* (upstream
    # empties its own tables with it first, and ignores the error when they are not there).
    say "js: node test-v2/run.js human against $url"
    local rc=0
    in_background timeout --kill-after=30 "$suite_timeout" env -C "$pkg_dir/package" \
        QUEEN_SERVER_URL="$url" PG_HOST=127.0.0.1 PG_PORT="$pg_port" PG_DB=postgres \
        PG_USER=postgres PG_PASSWORD=postgres node test-v2/run.js human >"$work/js.log" 2>&1 || rc=$?
    cp "$work/js.log" "$cache/js-last.log" 2>/dev/null || true
    grep -E '^Overall Results' "$work/js.log" | sed 's/^/    /' || true
    local p=0 f=0 x=0 mark name rest excl
    while IFS= read -r line; do
        mark="${line%% *}"
        rest="${line#* }"
        name="${rest%%:*}"
        excl=""
        for id in "${names[@]}"; do [ "$id" = "$name" ] && excl=1; done
        if [ -n "$excl" ]; then
            x=$((x + 1))
        elif [ "$mark" = "✅" ]; then
            p=$((p + 1))
        else
            f=$((f + 1))
            echo "js: FAILED $name: ${rest#*: }" >>"$findings"
        fi
    done < <(sed -n '/^Results:$/,/^Overall Results/p' "$work/js.log" | grep -E '^(✅|❌) ')
    if [ $((p + f + x)) -eq 0 ]; then
        say "js: the suite printed no results (exit $rc); last lines:"
        tail -n 30 "$work/js.log" >&2
        return 2
    fi
    passed[js]=$p
    failed[js]=$f
    excluded[js]=$x
    skipped[js]=0
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "js: FAILED the suite itself: stopped after ${suite_timeout} s" >>"$findings"
        failed[js]=$((failed[js] + 1))
    fi
    return 0
}

overall=0
note() { [ "$1" -gt "$overall" ] && overall=$1; return 0; }
for client in python js; do
    wants "$client" || continue
    t0=$(date +%s)
    rc=0
    "run_$client" || rc=$?
    [ -n "${status[$client]:-}" ] || status[$client]="ran in $(($(date +%s) - t0)) s"
    if [ "$rc" -ne 0 ]; then
        [[ "${status[$client]}" == "not run"* ]] || status[$client]="not run (step failed, exit $rc)"
        note 2
    elif [ "${failed[$client]:-0}" -gt 0 ]; then
        note 1
    fi
    if [ "$client" = python ] && [ "$rc" -eq 0 ]; then
        src=0
        run_sealed_check || src=$?
        [ "$src" -eq 0 ] || note "$src"
    fi
done

# --- summary -----------------------------------------------------------------------------
echo
echo "== official clients against queen-server (embedded defaults), $(($(date +%s) - started)) s"
for client in python js; do
    wants "$client" || continue
    if [[ "${status[$client]}" == "not run"* ]]; then
        printf '  %-7s %s\n' "$client" "${status[$client]}"
    else
        printf '  %-7s passed %s, failed %s, outside the protocol %s, excluded %s, skipped by the test itself %s (%s)\n' "$client" \
            "${passed[$client]:-0}" "${failed[$client]:-0}" "${outside[$client]:-0}" "${excluded[$client]:-0}" \
            "${skipped[$client]:-0}" "${status[$client]}"
    fi
done
if wants python; then
    if [ -n "$sealed_ok" ]; then
        echo "  sealed  OK: the client's encrypted payloads are stored sealed (see the psql rows above)"
    else
        echo "  sealed  FAILED or not run (see above)"
    fi
fi
if [ -s "$findings" ]; then
    echo "-- tests that did not pass (FAILED is a finding; OUTSIDE a feature the protocol does not have, tests/official/python/outside.txt; SKIPPED the test's own condition):"
    sed 's/^/  /' "$findings"
fi
echo "logs of the last run: $cache/{python,js}-last.log"
exit "$overall"
