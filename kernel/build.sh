#!/usr/bin/env bash
# Builds the ClawOS kernel: `make tinyconfig` + kernel/clawos.config, with a
# check that every fragment option survived olddefconfig.
#
# Source, in order of preference:
#   1. KERNEL_SRC=/path/linux-*.tar.{xz,gz}   an explicit tarball
#   2. kernel.org linux-$PINNED_VERSION, checked against kernel.org's sha256sums
#   3. Debian's linux-source-6.12 package (apt-verified), used LOUDLY when
#      kernel.org cannot be reached; the choice is recorded in the image.
# Output: $OUT/kernel/{bzImage,config,release,source}. Cached by (source
# digest, fragment, this script).
source "$(dirname "$0")/../scripts/lib.sh"
PINNED_VERSION=6.6.63
FRAGMENT="$REPO/kernel/clawos.config"
DEBIAN_TARBALL=/usr/src/linux-source-6.12.tar.xz

pick_source() {
  if [[ -n ${KERNEL_SRC:-} ]]; then
    [[ -f $KERNEL_SRC ]] || die "KERNEL_SRC=$KERNEL_SRC does not exist"
    SRC_TARBALL=$KERNEL_SRC; SRC_ORIGIN="explicit tarball $(basename "$KERNEL_SRC")"; return
  fi
  local dl="$CACHE/downloads" name="linux-$PINNED_VERSION.tar.xz"
  local base="https://cdn.kernel.org/pub/linux/kernel/v6.x"
  mkdir -p "$dl"
  if [[ -f $dl/$name ]] || curl -fsS --connect-timeout 5 -o "$dl/$name.part" "$base/$name" 2>/dev/null; then
    [[ -f $dl/$name ]] || mv "$dl/$name.part" "$dl/$name"
    if curl -fsS --connect-timeout 5 "$base/sha256sums.asc" | grep " $name\$" > "$dl/$name.sha256" &&
       (cd "$dl" && sha256sum -c "$name.sha256"); then
      SRC_TARBALL=$dl/$name; SRC_ORIGIN="kernel.org linux-$PINNED_VERSION"; return
    fi
    rm -f "$dl/$name"; warn "kernel.org tarball failed its SHA-256 check; not using it"
  fi
  rm -f "$dl/$name.part"
  [[ -f $DEBIAN_TARBALL ]] || die "kernel.org unreachable and $DEBIAN_TARBALL missing (run make deps)"
  warn "################################################################"
  warn "# kernel.org is unreachable: building Debian's linux-source-6.12 #"
  warn "# ($(dpkg-query -W -f='${Version}' linux-source-6.12)) instead of the pinned $PINNED_VERSION LTS.  #"
  warn "################################################################"
  SRC_TARBALL=$DEBIAN_TARBALL
  SRC_ORIGIN="debian linux-source-6.12 $(dpkg-query -W -f='${Version}' linux-source-6.12) (kernel.org unreachable)"
}

pick_source
src_digest=$(sha256sum "$SRC_TARBALL" | cut -c1-16)
key="$src_digest-$(hash_inputs "$FRAGMENT" "$0")"
build="$CACHE/kernel/$key"
dest="$OUT/kernel"

if [[ ! -f $build/done ]]; then
  log "kernel: building from $SRC_ORIGIN (cache key $key)"
  rm -rf "$build"; mkdir -p "$build/src"
  tar -xf "$SRC_TARBALL" -C "$build/src" --strip-components=1
  cd "$build/src"
  make -s tinyconfig
  scripts/kconfig/merge_config.sh -m -O . .config "$FRAGMENT" >/dev/null
  make -s olddefconfig
  # Every option the fragment sets must still be set after olddefconfig.
  missing=0
  while IFS= read -r line; do
    [[ $line =~ ^CONFIG_ ]] || continue
    grep -qxF "$line" .config || { warn "kernel option lost in olddefconfig: $line (now: $(grep "^${line%%=*}=" .config || echo unset))"; missing=1; }
  done < "$FRAGMENT"
  [[ $missing == 0 ]] || die "required kernel options did not survive olddefconfig"
  make -j"$(nproc)" bzImage
  cp arch/x86/boot/bzImage "$build/bzImage"
  cp .config "$build/config"
  make -s kernelrelease > "$build/release"
  echo "$SRC_ORIGIN" > "$build/source"
  # The tree is large and only the outputs are reused.
  cd "$build" && rm -rf src
  touch "$build/done"
else
  log "kernel: cached build $key ($(cat "$build/release"), from $(cat "$build/source"))"
fi
rm -rf "$dest"; mkdir -p "$dest"
cp "$build"/{bzImage,config,release,source} "$dest/"
log "kernel: $(cat "$dest/release") -> $dest/bzImage"
