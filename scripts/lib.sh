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

# fetch_pinned URL SHA256 : downloads URL once into the cache, refuses it unless
# its SHA-256 is the pinned one, and prints the cached file's path.
fetch_pinned() {
  local url=$1 sha=$2 file
  file="$CACHE/downloads/$sha-$(basename "$url")"
  if [[ ! -f $file ]] || ! echo "$sha  $file" | sha256sum --quiet -c - 2>/dev/null; then
    mkdir -p "$CACHE/downloads"
    log "downloading $url"
    curl -fsSL --retry 3 -o "$file.part" "$url" || die "cannot download $url"
    echo "$sha  $file.part" | sha256sum --quiet -c - || { rm -f "$file.part"; die "$url: SHA-256 is not the pinned $sha"; }
    mv "$file.part" "$file"
  fi
  echo "$file"
}
