# Shared helpers for the ClawOS build scripts. Sourced, never run.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$REPO/out}"
# Caches live outside the repo so a clean clone still reuses them; every entry is
# keyed by the hash of its inputs, so a stale entry is never picked up.
CACHE="${CLAWOS_CACHE:-/var/cache/clawos}"
mkdir -p "$OUT" "$CACHE"

log()  { printf '\033[1;34m==> %s\033[0m\n' "$*" >&2; }
warn() { printf '\033[1;33m!!! %s\033[0m\n' "$*" >&2; }
die()  { printf '\033[1;31mxxx %s\033[0m\n' "$*" >&2; exit 1; }

# hash_inputs FILE... : a short digest over file contents and their names
# relative to the repository, so every checkout of the same tree shares it.
hash_inputs() {
  local f
  for f in "$@"; do f=$(realpath "$f"); printf '%s\n' "${f#"$REPO"/}"; cat "$f"; done | sha256sum | cut -c1-16
}
