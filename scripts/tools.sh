#!/usr/bin/env bash
# Builds the WASM tools under userspace/wasm-tools to wasm32-wasip2 components
# in the build root (Debian's rustc ships the wasm32-wasip2 standard library).
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT/tools"
"$REPO/scripts/in-buildroot.sh" sh -c '
  set -e
  cd /src/userspace/wasm-tools
  export PATH=/usr/lib/llvm-22/bin:$PATH  # wasm-component-ld drives wasm-ld
  CARGO_TARGET_DIR=/out/tools/target cargo build --release --locked
  for wasm in /out/tools/target/wasm32-wasip2/release/*.wasm; do cp "$wasm" /out/tools/; done'
# A component starts with the wasm magic and layer 1 (bytes 6-7 = 01 00).
for wasm in "$OUT"/tools/*.wasm; do
  [[ $(od -An -tx1 -N8 "$wasm" | tr -d ' ') == 0061736d0d000100 ]] || die "$wasm is not a WASM component"
  log "tools: $(basename "$wasm") ($(stat -c %s "$wasm") bytes, component)"
done
