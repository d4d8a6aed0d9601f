#!/usr/bin/env bash
# Runs the PostgreSQL migration tests (userspace/pg-migrate/tests) against a
# real server: Debian's PostgreSQL 15 with pgvector, which bookworm does not
# package, built from Debian's own source tarball (hash-pinned) against
# postgresql-server-dev-15. The cluster is a throwaway one on a Unix socket
# in a temporary directory; it is stopped and removed on exit.
source "$(dirname "$0")/../../scripts/lib.sh"
PG_BIN=/usr/lib/postgresql/15/bin
PGVECTOR_URL=http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_0.8.0.orig.tar.gz
PGVECTOR_SHA256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0
PORT=54329

[[ -x $PG_BIN/initdb ]] || die "PostgreSQL 15 is missing (make deps installs it)"
tarball=$(fetch_pinned "$PGVECTOR_URL" "$PGVECTOR_SHA256")
build="$CACHE/pgvector-$(printf '%s\n' "$PGVECTOR_SHA256" "$("$PG_BIN/pg_config" --version)" with_llvm=no | sha256sum | cut -c1-16)"
if [[ ! -f $build/vector.so ]]; then
  log "building pgvector 0.8.0 for $("$PG_BIN/pg_config" --version)"
  rm -rf "$build.tmp"; mkdir -p "$build.tmp"
  tar -xzf "$tarball" -C "$build.tmp" --strip-components=1
  # OPTFLAGS="": no -march=native, so the cached build runs on any x86-64 CI
  # machine; with_llvm=no: no JIT bitcode, which would need clang and llvm.
  make -s -C "$build.tmp" PG_CONFIG="$PG_BIN/pg_config" OPTFLAGS="" with_llvm=no >/dev/null
  rm -rf "$build"; mv "$build.tmp" "$build"
fi
make -s -C "$build" PG_CONFIG="$PG_BIN/pg_config" OPTFLAGS="" with_llvm=no install >/dev/null

dir=$(mktemp -d /tmp/clawos-pg.XXXXXX)
chown postgres: "$dir"
stop() { runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap stop EXIT
# --no-locale: the cluster must not depend on which locales the host generated.
runuser -u postgres -- "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres --no-locale -E UTF8 >/dev/null
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-k $dir -p $PORT -c listen_addresses=''" start >/dev/null || { cat "$dir/server.log"; die "PostgreSQL did not start"; }
url="host=$dir port=$PORT user=postgres dbname=postgres"
psql -q "$url" -c "CREATE EXTENSION vector" >/dev/null
log "PostgreSQL $(psql -At "$url" -c 'SHOW server_version') with pgvector $(psql -At "$url" -c "SELECT extversion FROM pg_extension WHERE extname = 'vector'") on $dir"
CLAWOS_TEST_PG_URL="$url" cargo test --release --locked --workspace --test postgres -- --ignored
