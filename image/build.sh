#!/usr/bin/env bash
# Builds the OS tree with mkosi, inside the build root (scripts/image.sh
# then seals it with seal.sh). The host stages binaries and data into
# /out/rootfs-extra first.
set -euo pipefail
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:?}
rm -rf /out/image/clawos-root /out/image/clawos-root.manifest
mkdir -p /out/image /cache/mkosi
# Incremental: mkosi keeps the tree as it was after installing the packages
# in /cache/mkosi and starts from it while mkosi.conf's packages, release and
# mirror are the same (its cache manifest), so a build installs no packages
# again; the extra trees and mkosi.postinst.chroot are applied to it afresh
# each time. The cached tree keeps the package versions it was made with:
# removing /cache/mkosi (the cache's buildroot-cache/mkosi) takes the
# mirror's newest.
mkosi --directory=/src/image --output-directory=/out/image --extra-tree=/out/rootfs-extra \
  --incremental=yes --cache-directory=/cache/mkosi --force build
