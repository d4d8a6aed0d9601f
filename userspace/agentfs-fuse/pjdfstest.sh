#!/usr/bin/env bash
# Runs pjdfstest (https://github.com/pjd/pjdfstest) against a FUSE mount of a
# fresh workspace; results are recorded in PJDFSTEST.md. Not part of
# `make test`: pjdfstest is fetched separately and never committed here.
#   usage: pjdfstest.sh <pjdfstest checkout> [clawctl binary]   (as root)
set -euo pipefail
PINNED=85a8aea9e685999ef0540392fd80535f873d7ff7
src=${1:?usage: pjdfstest.sh <pjdfstest checkout> [clawctl]}
clawctl=${2:-${CARGO_TARGET_DIR:-/var/cache/clawos/cargo-target}/release/clawctl}
[[ $(git -C "$src" rev-parse HEAD) == "$PINNED" ]] || { echo "pjdfstest must be at $PINNED" >&2; exit 1; }
(cd "$src" && { [[ -x pjdfstest ]] || { autoreconf -ifs && ./configure && make pjdfstest; }; }) >/dev/null
work=$(mktemp -d); chmod 0755 "$work"; mkdir "$work/mnt"
# allow_other: pjdfstest switches to other users, who must reach the mount.
"$clawctl" fs mount --allow-other "$work/ws.db" "$work/mnt" & mounter=$!
trap 'umount -l "$work/mnt" 2>/dev/null || true; wait $mounter || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
(cd "$work/mnt" && prove -r "$(realpath "$src")/tests") || true
umount -l "$work/mnt"; wait $mounter || true
"$clawctl" fs check "$work/ws.db"
