#!/usr/bin/env bash
# Mutation testing with cargo-mutants: plants one small change at a time in the code and
# checks that some test fails. A change no test notices (a "missed" mutant) is a rule the
# tests do not pin down; each one gets a test or a reason it cannot be observed.
#
# Usage:
#   scripts/mutants.sh reference [ARGS...]   the model (reference/) against its own tests
#   scripts/mutants.sh server [ARGS...]      the PostgreSQL engine's ack, pop and push code
#                                            against the conformance suite (tests/conformance_pg.rs;
#                                            PostgreSQL as for the tests: DATABASE_URL, Docker or
#                                            local binaries)
# ARGS go to cargo-mutants, e.g. `-f reference/src/model/ack.rs`, `--iterate` (only what was
# missed last time), `-j 2`. Results: target/mutants-{reference,server}/mutants.out/
# (caught.txt, missed.txt, timeout.txt, unviable.txt).
#
# Slow by nature (a build and a test run per mutant): reference/ has about 1,200 mutants
# and the server files about 120, each of which runs the suite on PostgreSQL. CI runs the
# reference pass only when QUEEN_CI_MUTANTS=1.
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
    # cargo-mutants runs its unmutated baseline against the mutated package, not the
    # --test-package, so the baseline is run here and skipped there.
    cargo test -p queen-tests --test conformance_pg
    cargo mutants -p queen-server \
        -f server/src/pg/ack.rs -f server/src/pg/pop.rs -f server/src/pg/push.rs \
        --test-package queen-tests --cargo-test-arg=--test=conformance_pg \
        --baseline=skip --timeout 600 --output target/mutants-server "$@"
    ;;
*)
    echo "usage: scripts/mutants.sh reference|server [cargo-mutants args]" >&2
    exit 2
    ;;
esac
