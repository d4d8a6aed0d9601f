#!/usr/bin/env bash
# `make image`: stages the host's build outputs (stage-rootfs.sh), then has
# mkosi build the OS tree and image/seal.sh seal it into out/clawos.raw, in
# the build root. Skipped when nothing that goes into the image changed
# since the last build (the digest of every input, build-inputs, plus the
# kernel and the timestamps), so `make run` on an unchanged tree boots the
# image it has instead of refetching packages and rebuilding it.
source "$(dirname "$0")/lib.sh"
bash "$REPO/scripts/stage-rootfs.sh"
key=$( { cat "$OUT/rootfs-extra/usr/lib/clawos/build-inputs"; sha256sum "$OUT/kernel/bzImage"; readlink -f "$OUT/buildroot"; echo "${SOURCE_DATE_EPOCH:?}"; } | sha256sum | cut -c1-16)
if [[ -f $OUT/clawos.raw && -f $OUT/clawos.bmap && -f $OUT/image/sealed.env && $(cat "$OUT/image/inputs.key" 2>/dev/null) == "$key" ]]; then
  log "image: out/clawos.raw is up to date (inputs $key)"
  exit 0
fi
rm -f "$OUT/image/inputs.key"
bash "$REPO/scripts/in-buildroot.sh" env SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" bash /src/image/build.sh
bash "$REPO/scripts/in-buildroot.sh" env SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" bash /src/image/seal.sh /out/image/clawos-root /out/image
mv "$OUT/image/clawos.raw" "$OUT/image/clawos.efi" "$OUT/"
# The block map: bmaptool (`make usb`, or by hand) writes only the blocks the
# image uses, and checks each range against its SHA-256 as it goes.
bmaptool create -o "$OUT/clawos.bmap" "$OUT/clawos.raw"
echo "$key" > "$OUT/image/inputs.key"
