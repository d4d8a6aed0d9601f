#!/usr/bin/env bash
# Builds the OS tree with mkosi, inside the build root (scripts/image.sh
# then seals it with seal.sh). The host stages binaries and data into
# /out/rootfs-extra first.
set -euo pipefail
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:?}
rm -rf /out/image/clawos-root /out/image/clawos-root.manifest
mkdir -p /out/image
mkosi --directory=/src/image --output-directory=/out/image --extra-tree=/out/rootfs-extra --force build
