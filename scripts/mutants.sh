#!/usr/bin/env bash
# Mutation testing with cargo-mutants: plants one small change at a time in the code and
# checks that some test fails. A change no test notices (a "missed" mutant) is a rule the
# tests do not pin down; each one gets a test or a reason it cannot be observed.
#
# Usage:
#   scripts/mutants.sh reference [ARGS...]   the model (reference/) against its own tests
#   scripts/mutants.sh server [ARGS...]      the PostgreSQL engine (server/src/pg/) against the
#                                            conformance suite (tests/conformance_pg.rs), a
#                                            database outage (tests/database_outage.rs) and the
#                                            server's own PostgreSQL tests, which see the rows
#                                            the wire cannot, and its unit tests (PostgreSQL
#                                            as for the tests: DATABASE_URL, Docker or local
#                                            binaries)
# ARGS go to cargo-mutants, e.g. `-f server/src/pg/ack.rs` (for the server: only that file,
# instead of all of server/src/pg/), `--iterate` (only what was missed last time), `-j 2`.
# Results: target/mutants-{reference,server}/mutants.out/ (caught.txt, missed.txt,
# timeout.txt, unviable.txt).
#
# Slow by nature (a build and a test run per mutant): reference/ has about 1,200 mutants
# and server/src/pg/ about 670, each of which runs the suite on PostgreSQL, so the server
# pass is made in sittings of a few files. CI runs the reference pass only when
# QUEEN_CI_MUTANTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-reference}"
shift || true
command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants
# No debug info: each mutant builds and links in a few seconds instead of tens.
export CARGO_PROFILE_DEV_DEBUG=0

case "$what" in
reference)
    cargo mutants -p queen-reference --timeout 120 --output target/mutants-reference "$@"
    ;;
server)
    files=(-f 'server/src/pg/*.rs')
    for arg in "$@"; do
        case "$arg" in -f | --file | -f* | --file=*) files=() ;; esac
    done
    tests=(--lib --test=conformance_pg --test=engine --test=encryption --test=retention --test=management
        --test=payloads --test=schema --test=notify --test=spool --test=hostile --test=hosts
        --test=database_outage)
    # cargo-mutants runs its unmutated baseline against the mutated package, not the
    # --test-package, so the baseline is run here and skipped there.
    cargo test -p queen-tests -p queen-server "${tests[@]}"
    test_args=()
    for t in "${tests[@]}"; do test_args+=("--cargo-test-arg=$t"); done
    cargo mutants -p queen-server "${files[@]}" \
        --test-package queen-tests --test-package queen-server "${test_args[@]}" \
        --baseline=skip --timeout 900 --output target/mutants-server "$@"
    ;;
*)
    echo "usage: scripts/mutants.sh reference|server [cargo-mutants args]" >&2
    exit 2
    ;;
esac
