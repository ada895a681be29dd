#!/usr/bin/env bash
# Builds a local PostgreSQL 15 Docker image (default name queen-postgres:15) when it is missing.
#
# Why: CI reaches no image registry, so `postgres:15` cannot be pulled, but Debian's package
# registry is reachable. We debootstrap a minimal Debian with postgresql-15 and `docker import`
# it with a small entrypoint that behaves like the official image for our purposes: initdb once
# (trust auth, listening on all interfaces inside the container), then postgres in the foreground
# as the postgres user. Extra arguments are passed to postgres, and a leading `postgres` is
# dropped, so `docker run IMAGE postgres -c max_connections=300` works as with the official image.
#
# The Debian mirror is read from this machine's apt sources at run time (never stored in the
# repository); QUEEN_DEBIAN_MIRROR overrides it.
#
# Usage: scripts/postgres-image.sh [IMAGE]   (run as root; needs docker, debootstrap)
#        FORCE=1 scripts/postgres-image.sh    rebuilds even if the image exists
set -euo pipefail

image="${1:-${QUEEN_PG_IMAGE:-queen-postgres:15}}"
suite=bookworm

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "postgres-image: $image already present"
    exit 0
fi

# First `deb` mirror for $suite in the apt sources (deb822 *.sources first, then one-line *.list).
find_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # Print the URI of each stanza whose Types has deb and whose Suites has exactly $suite.
        awk -v suite="$suite" '
            function flush() { if (deb && hit && uri != "") { print uri; found = 1; exit } deb = 0; hit = 0; uri = "" }
            /^[[:space:]]*$/ { flush(); next }
            /^[Tt]ypes:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
            END { if (!found) flush() }
        ' "$f" | head -n1
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI suite components...
        sed -E 's/\[[^]]*\]//' "$f" | awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2; exit }'
    done
}

mirror="${QUEEN_DEBIAN_MIRROR:-$(find_mirror | head -n1)}"
if [ -z "$mirror" ]; then
    echo "postgres-image: no Debian $suite mirror found in /etc/apt/sources.list{,.d/*}; set QUEEN_DEBIAN_MIRROR" >&2
    exit 1
fi

for tool in debootstrap docker; do
    command -v "$tool" >/dev/null || { echo "postgres-image: $tool is not installed" >&2; exit 1; }
done

work="$(mktemp -d /tmp/queen-pg-image.XXXXXX)"
trap 'rm -rf "$work"' EXIT
root="$work/root"
start=$(date +%s)

echo "postgres-image: debootstrap $suite with postgresql-15 from the apt sources' mirror"
debootstrap --variant=minbase --include=postgresql-15 "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 40 "$work/debootstrap.log" >&2
    exit 1
}

# The package's postinst creates a default cluster; the entrypoint makes its own in PGDATA.
rm -rf "$root/var/lib/postgresql/15" "$root/etc/postgresql/15"
# Trim what a test database never reads: docs, translations, apt caches, and the LLVM JIT
# (a plugin loaded only for JIT, which the entrypoint turns off; ~130 MB of the image).
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/* "$root"/usr/share/i18n \
    "$root"/usr/lib/postgresql/15/lib/llvmjit* "$root"/usr/lib/postgresql/15/lib/bitcode \
    "$root"/usr/lib/x86_64-linux-gnu/libLLVM-* "$root"/usr/lib/x86_64-linux-gnu/libz3.so* \
    "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*

cat >"$root/usr/local/bin/queen-pg-entrypoint" <<'EOF'
#!/bin/sh
# initdb once (trust auth, listen on all interfaces), then postgres in the foreground as postgres.
set -eu
bin=/usr/lib/postgresql/15/bin
data="${PGDATA:-/var/lib/postgresql/data}"
[ "${1:-}" = postgres ] && shift
as_postgres() {
    if command -v setpriv >/dev/null; then
        exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    fi
    exec runuser -u postgres -- "$@"
}
mkdir -p "$data" /var/run/postgresql
chown postgres:postgres "$data" /var/run/postgresql
chmod 700 "$data"
if [ ! -s "$data/PG_VERSION" ]; then
    (as_postgres "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null)
    echo "listen_addresses = '*'" >>"$data/postgresql.conf"
    echo "jit = off" >>"$data/postgresql.conf"
    echo "host all all all trust" >>"$data/pg_hba.conf"
fi
as_postgres "$bin/postgres" -D "$data" "$@"
EOF
chmod 755 "$root/usr/local/bin/queen-pg-entrypoint"

echo "postgres-image: docker import as $image"
tar -C "$root" --numeric-owner -c . | docker import \
    --change 'ENTRYPOINT ["/usr/local/bin/queen-pg-entrypoint"]' \
    --change 'ENV PGDATA=/var/lib/postgresql/data' \
    --change 'EXPOSE 5432' \
    - "$image" >/dev/null

echo "postgres-image: built $image in $(($(date +%s) - start)) s ($(docker image inspect -f '{{.Size}}' "$image") bytes)"
