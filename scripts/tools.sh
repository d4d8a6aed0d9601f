#!/usr/bin/env bash
# Builds the WASM tools to wasm32-wasip2 components in the build root
# (Debian's rustc ships the wasm32-wasip2 standard library), names them
# <tool>-v<version>.wasm (ClawFS naming rules) and writes a registry.json from
# each tool's tool.json plus its path and hash:
#   userspace/wasm-tools/*  the image's tools   -> out/tools (stage-rootfs.sh ships it)
#   tests/tools/*           hostile test tools  -> out/test-tools (never shipped:
#                           the unit tests load it, the boot tests install from it)
#   userspace/wasm-tools/*-channel  channel components -> out/channels
# A tool.json without "capabilities" is a tool whose grants are the
# operator's to choose (web-fetch: which hosts): it is not in the registry
# but kept with its tool.json as <tool>.json, for
# `clawctl tool install <tool>-v<version>.wasm --definition <tool>.json --grant ...`.
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT/tools" "$OUT/test-tools"
# Only the packaged files. cargo's target directory is in the cache (the
# build root's /cache), like the host's: cargo keys every artifact by its
# inputs, so it is safe to share and a fresh clone rebuilds only the tools.
rm -f "$OUT"/tools/*.wasm "$OUT"/tools/*.json "$OUT"/test-tools/*.wasm "$OUT"/test-tools/*.json
# One build of the one workspace (tests/tools are its members too), so both
# kinds come from the same toolchain and lock. From its directory, because its
# .cargo/config.toml (the wasm32-wasip2 target) is found from the current one.
# shellcheck disable=SC2016  # $PATH is the build root's
"$REPO/scripts/in-buildroot.sh" sh -c '
  set -e
  cd /src/userspace/wasm-tools
  export PATH=/usr/lib/llvm-22/bin:$PATH  # wasm-component-ld drives wasm-ld
  CARGO_TARGET_DIR=/cache/target-wasm-tools cargo build --release --locked'
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/userspace/wasm-tools/Cargo.toml")

# package_tools SRC DEST: every tool directory under SRC (one with a
# tool.json) as a checked component in DEST, plus DEST/registry.json.
package_tools() {
  local src=$1 dest=$2 dir tool wasm hash entries=()
  for dir in "$src"/*/; do
    tool=$(basename "$dir")
    [[ -f $dir/tool.json ]] || continue
    wasm="$dest/$tool-v$version.wasm"
    cp "$CACHE/buildroot-cache/target-wasm-tools/wasm32-wasip2/release/${tool//-/_}.wasm" "$wasm"
    # A component starts with the wasm magic and layer 1 (bytes 6-7 = 01 00).
    [[ $(od -An -tx1 -N8 "$wasm" | tr -d ' ') == 0061736d0d000100 ]] || die "$wasm is not a WASM component"
    hash=$(sha256sum "$wasm" | cut -d' ' -f1)
    log "tools: $(basename "$dest")/$(basename "$wasm") ($(stat -c %s "$wasm") bytes, component, sha256:${hash:0:12}…)"
    if ! jq -e 'has("capabilities")' "$dir/tool.json" >/dev/null; then
      cp "$dir/tool.json" "$dest/$tool.json"
      continue
    fi
    entries+=("$(jq --arg id "$tool" --arg v "$version" --arg path "$(basename "$wasm")" --arg hash "sha256:$hash" \
      '{tool_id: $id, version: $v, wasm_path: $path, wasm_hash: $hash, wit_interface: "clawos:tool/tool@0.1.0",
        author: "ClawOS Project", license: "Apache-2.0"} + .' "$dir/tool.json")")
  done
  # An empty list is still a valid registry (jq -s of nothing is []).
  printf '%s\n' "${entries[@]}" | jq -s '{tools: .}' > "$dest/registry.json"
  log "tools: $(basename "$dest")/registry.json with ${#entries[@]} tools"
}
package_tools "$REPO/userspace/wasm-tools" "$OUT/tools"
package_tools "$REPO/tests/tools" "$OUT/test-tools"

# Channel components (specs/channels): the directories named *-channel, of
# the clawos:channel world, no tool.json. In out/channels, not yet shipped.
mkdir -p "$OUT/channels"
rm -f "$OUT"/channels/*.wasm
for dir in "$REPO"/userspace/wasm-tools/*-channel/; do
  channel=$(basename "$dir")
  wasm="$OUT/channels/$channel-v$version.wasm"
  cp "$CACHE/buildroot-cache/target-wasm-tools/wasm32-wasip2/release/${channel//-/_}.wasm" "$wasm"
  [[ $(od -An -tx1 -N8 "$wasm" | tr -d ' ') == 0061736d0d000100 ]] || die "$wasm is not a WASM component"
  log "tools: channels/$(basename "$wasm") ($(stat -c %s "$wasm") bytes, component)"
done
