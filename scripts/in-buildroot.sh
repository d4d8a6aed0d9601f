#!/usr/bin/env bash
# Runs a command inside the build root, with the repo at /src, out/ at /out and
# the build root's cache at /cache ($CACHE/buildroot-cache: cargo's home, the
# target directories of the eBPF and WASM builds, mkosi's package tree). mkosi's sandbox needs `/` to be a mount point, so the
# root is bind-mounted onto itself in a private mount namespace first.
#   in-buildroot.sh [--root DIR] CMD...
source "$(dirname "$0")/lib.sh"
ROOT="$OUT/buildroot"
if [[ ${1:-} == --root ]]; then ROOT=$2; shift 2; fi
ROOT=$(readlink -f "$ROOT")
[[ -d $ROOT/usr ]] || die "no build root at $ROOT (run make buildroot)"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# shellcheck disable=SC2016  # the script runs in the new mount namespace's shell, with its own arguments
exec unshare -m --propagation private -- /bin/bash -c '
  set -e
  R=$1 REPO=$2 OUT=$3 CACHE=$4; shift 4
  mount --rbind "$R" "$R"
  mount -t proc proc "$R/proc"
  mount --rbind /sys "$R/sys"
  mount --rbind /dev "$R/dev"
  mount -t tmpfs tmpfs "$R/tmp"
  mount --bind "$REPO" "$R/src"
  mount --bind "$OUT" "$R/out"
  mkdir -p "$CACHE/buildroot-cache"
  mount --bind "$CACHE/buildroot-cache" "$R/cache"
  exec chroot "$R" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin \
    HOME=/root CARGO_HOME=/cache/cargo TERM="${TERM:-dumb}" "$@"
' bash "$ROOT" "$REPO" "$OUT" "$CACHE" "$@"
