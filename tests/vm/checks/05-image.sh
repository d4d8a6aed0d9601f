# shellcheck shell=bash
# The image under test is the one a user flashes, byte for byte, and it
# carries no test code: what the tests need they bring in over SSH.

# qemu/run.sh boots an image behind a copy-on-write overlay whose backing
# file is that image; the guest's writes land in the overlay only. So the
# chain must be exactly that: one qcow2 overlay on one raw file, and the raw
# file's SHA-256 must be out/clawos.raw's (the file `make image` leaves for
# flashing), not a copy with test code added. Hashed on the host while the
# VM runs: QEMU opened the base read-only. (Boots of tampered or changed
# copies, later in run.sh, use copies of their own and are not this check.)
image_is_the_flashed_one() {
  local chain base tested flashed
  # -U: the running QEMU holds a lock on the overlay; reading headers is safe.
  chain=$(qemu-img info -U --backing-chain --output=json "$VM_STATE/disk.qcow2") || return 1
  jq -e 'length == 2 and .[0].format == "qcow2" and .[1].format == "raw" and .[1]["backing-filename"] == null' \
    <<<"$chain" >/dev/null || { echo "the VM's disk is not one overlay on one raw image:"; echo "$chain"; return 1; }
  base=$(jq -r '.[1].filename' <<<"$chain")
  tested=$(sha256sum < "$base" | cut -d' ' -f1)
  flashed=$(sha256sum < "$OUT/clawos.raw" | cut -d' ' -f1)
  echo "the VM boots $base (sha256 $tested); $OUT/clawos.raw is sha256 $flashed"
  [[ $tested == "$flashed" ]]
}
check "image: the VM boots out/clawos.raw byte for byte (same SHA-256), under a copy-on-write overlay only" \
  image_is_the_flashed_one

# The names to look for come from the tree, so a new harness, benchmark or
# test tool is covered without editing this: every binary of a workspace
# package outside userspace/ (cargo metadata; --no-deps reads manifests
# only, no network), every tool under tests/tools. The guest must have none
# of them anywhere on its root, its /usr/bin clawos-* must be exactly
# PRODUCT_BINARIES (scripts/lib.sh), the image's tool registry must name no
# test tool, and no configuration on it may name what only the tests use:
# their cgroups (clawos-ebpf-check), directories and units (clawos-test,
# clawos-vm-test).
image_carries_no_test_code() {
  local test_bins=() test_tools=() name find_expr=()
  mapfile -t test_bins < <(cargo metadata --manifest-path "$REPO/Cargo.toml" --no-deps --offline --format-version 1 |
    jq -r --arg userspace "$REPO/userspace/" '.packages[] | select(.manifest_path | startswith($userspace) | not)
      | .targets[] | select(any(.kind[]; . == "bin")) | .name')
  for name in "$REPO"/tests/tools/*/; do test_tools+=("$(basename "$name")"); done
  # Nothing to look for would make this pass vacuously.
  (( ${#test_bins[@]} && ${#test_tools[@]} )) || { echo "found no test binaries (${test_bins[*]}) or test tools (${test_tools[*]}) to look for"; return 1; }
  for name in "${test_bins[@]}"; do find_expr+=(-o -name "$name"); done
  for name in "${test_tools[@]}"; do find_expr+=(-o -name "$name-v*.wasm" -o -name "$name.json"); done
  vm_ssh "
    rc=0
    product=' ${PRODUCT_BINARIES[*]} '
    for bin in \$product; do test -x /usr/bin/\$bin || { echo \"missing /usr/bin/\$bin\"; rc=1; }; done
    for path in /usr/bin/clawos-*; do
      [ -e \"\$path\" ] || continue
      case \$product in *\" \${path#/usr/bin/} \"*) ;; *) echo \"not a product binary: \$path\"; rc=1 ;; esac
    done
    # -xdev: the root filesystem (the image) only, not /run or /clawfs.
    found=\$(find / -xdev -type f \\( -false ${find_expr[*]@Q} \\) -print)
    if [ -n \"\$found\" ]; then echo \"test code in the image:\"; echo \"\$found\"; rc=1; fi
    listed=\$(jq -r '.tools[].tool_id' /usr/lib/clawos/tools/registry.json) || exit 1
    for tool in ${test_tools[*]}; do
      if echo \"\$listed\" | grep -qx \"\$tool\"; then echo \"test tool \$tool in the image's registry\"; rc=1; fi
    done
    # Text files (-I) of the root's configuration: /etc on the root itself
    # (-xdev), but the operator's key (a throwaway test key in test builds,
    # the operator's own otherwise), and ClawOS's part of /usr/lib.
    named=\$(grep -IlE 'clawos-ebpf-check|clawos-test|clawos-vm-test' \$(find /etc /usr/lib/clawos /usr/lib/systemd /usr/lib/sysusers.d /usr/lib/tmpfiles.d /usr/lib/repart.d /usr/lib/sysctl.d \
      -xdev -type f ! -path '/etc/ssh/authorized_keys/*' 2>/dev/null) 2>/dev/null)
    if [ -n \"\$named\" ]; then echo \"configuration naming test cgroups, directories or units:\"; echo \"\$named\"; rc=1; fi
    exit \$rc"
}
check "image: only the product's binaries and tools, no test harness, benchmark or test tool" image_carries_no_test_code
