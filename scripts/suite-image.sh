#!/usr/bin/env bash
# Builds the container image of the slim conformance suite (queen-conformance without our
# server), on the Debian image CI already builds locally (scripts/postgres-image.sh; no
# registry is reachable here), and checks it runs.
#
# Usage: scripts/suite-image.sh [IMAGE] [BASE]
#   IMAGE  default queen-conformance:latest
#   BASE   default queen-postgres:15 (built first when missing)
# Then, against a broker listening on the host:
#   docker run --rm --network host IMAGE run --target http://127.0.0.1:6632 --junit /out/report.xml
# (mount a directory at /out to keep the reports: -v "$PWD/out:/out").
set -euo pipefail
cd "$(dirname "$0")/.."

image="${1:-queen-conformance:latest}"
base="${2:-${QUEEN_PG_IMAGE:-queen-postgres:15}}"
docker image inspect "$base" >/dev/null 2>&1 || bash scripts/postgres-image.sh "$base"

start=$(date +%s)
# QUEEN_SUITE_PROFILE=dev builds unoptimised, for CI, which only checks the image runs.
profile="${QUEEN_SUITE_PROFILE:-dist}"
echo "suite-image: cargo build --profile $profile -p queen-conformance --no-default-features"
cargo build --quiet --profile "$profile" -p queen-conformance --no-default-features
target_dir="${CARGO_TARGET_DIR:-target}"
out_dir="$profile"
[ "$profile" = dev ] && out_dir=debug

ctx="$(mktemp -d /tmp/queen-suite-image.XXXXXX)"
trap 'rm -rf "$ctx"' EXIT
cp "$target_dir/$out_dir/queen-conformance" "$ctx/"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
COPY queen-conformance /usr/local/bin/queen-conformance
RUN mkdir -p /out
WORKDIR /out
ENTRYPOINT ["/usr/local/bin/queen-conformance"]
CMD ["--help"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build --quiet -t "$image" "$ctx" >/dev/null
echo "suite-image: built $image in $(($(date +%s) - start)) s; $(docker run --rm "$image" --version)"
