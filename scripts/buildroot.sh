#!/usr/bin/env bash
# Creates the ClawOS build root: a Debian sid tools tree made with mmdebstrap,
# holding mkosi and the systemd image tools, and Debian's rustc with the
# bpfel-unknown-none and wasm32-wasip2 standard libraries plus bpf-linker.
# sid, because only it ships libstd-rust-dev-bpf with a matching rustc/LLVM.
#
# Cached in layers: the Debian tree by its package list, each tool built from
# crates.io by its version (a marker per version). The resolved package
# versions are written to $OUT/buildroot-packages.txt so a build says exactly
# what built it.
source "$(dirname "$0")/lib.sh"
BPF_LINKER_VERSION=0.13.0
# Links wasm32-wasip2 objects into components (rustc's default linker for it).
WASM_COMPONENT_LD_VERSION=0.5.31
LLVM=22
PKGS=(
  # Rust for the eBPF programs and the WASM tools, and clippy for both
  # (make lint): from the same rustc source, so it reads what this rustc
  # compiles.
  rustc cargo libstd-rust-dev-bpf libstd-rust-dev-wasm32 rust-clippy
  # bpf-linker links against LLVM
  "llvm-$LLVM-dev" "libpolly-$LLVM-dev" "libclang-$LLVM-dev" "clang-$LLVM" zlib1g-dev libzstd-dev build-essential
  # wasm-ld, which wasm-component-ld drives
  "lld-$LLVM"
  # image tools
  mkosi systemd systemd-repart systemd-ukify systemd-boot-efi python3-pefile
  erofs-utils cryptsetup-bin dosfstools mtools fdisk e2fsprogs bubblewrap
  apt dpkg debian-archive-keyring ca-certificates zstd cpio kmod busybox-static
)
key=$(printf '%s\n' "${PKGS[@]}" | sha256sum | cut -c1-16)
ROOT="$CACHE/buildroot/$key"

if [[ ! -f $ROOT/.clawos-bootstrapped ]]; then
  log "buildroot: creating Debian sid tools tree ($key)"
  rm -rf "$ROOT"; mkdir -p "$(dirname "$ROOT")"
  # sid's Release file can be past its Valid-Until on this mirror.
  # The host's extra CAs (a TLS-inspecting proxy) must be trusted inside too.
  # shellcheck disable=SC2016  # the hooks are mmdebstrap's shell snippets: "$1" is the root it passes them
  mmdebstrap --variant=apt --mode=root \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$(IFS=,; echo "${PKGS[*]}")" \
    --customize-hook='cp -r /usr/local/share/ca-certificates/. "$1/usr/local/share/ca-certificates/" 2>/dev/null || true' \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
    sid "$ROOT" http://deb.debian.org/debian
  mkdir -p "$ROOT/src" "$ROOT/out" "$ROOT/cache"
  touch "$ROOT/.clawos-bootstrapped"
fi
# cargo_tool NAME VERSION [cargo install args...]: builds a tool once per version.
cargo_tool() {
  local name=$1 version=$2; shift 2
  [[ -f $ROOT/usr/local/share/clawos-$name-$version ]] && return
  log "buildroot: building $name $version"
  "$REPO/scripts/in-buildroot.sh" --root "$ROOT" env PATH="/usr/lib/llvm-$LLVM/bin:/usr/bin:/bin" \
    LLVM_PREFIX="/usr/lib/llvm-$LLVM" "LLVM_SYS_${LLVM}1_PREFIX=/usr/lib/llvm-$LLVM" \
    cargo install --locked --force --root /usr/local "$name@$version" "$@"
  mkdir -p "$ROOT/usr/local/share"; touch "$ROOT/usr/local/share/clawos-$name-$version"
}
cargo_tool bpf-linker "$BPF_LINKER_VERSION" --no-default-features --features "llvm-$LLVM"
cargo_tool wasm-component-ld "$WASM_COMPONENT_LD_VERSION"
# shellcheck disable=SC2016  # dpkg-query's format, not the shell's
chroot "$ROOT" dpkg-query -W -f='${Package} ${Version}\n' > "$OUT/buildroot-packages.txt"
printf 'bpf-linker %s (crates.io)\nwasm-component-ld %s (crates.io)\n' "$BPF_LINKER_VERSION" "$WASM_COMPONENT_LD_VERSION" >> "$OUT/buildroot-packages.txt"
ln -sfn "$ROOT" "$OUT/buildroot"
log "buildroot: ready at $ROOT"
