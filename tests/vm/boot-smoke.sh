#!/usr/bin/env bash
# Boot smoke test of the ClawOS image from its serial console (part of
# `make test`): the verified root comes up and systemd reaches the login
# prompt; a copy with one flipped byte in the root filesystem is stopped by
# dm-verity. The fuller SSH-driven suite is tests/vm/run.sh (`make test-vm`).
source "$(dirname "$0")/../../scripts/lib.sh"
source "$REPO/tests/vm/lib.sh"
IMAGE="$OUT/clawos.raw"
VMS="$OUT/vm"
BOOT_TIMEOUT=${CLAWOS_BOOT_TIMEOUT:-420}
source "$OUT/image/sealed.env"
trap '[[ -n $VM_PID ]] && kill "$VM_PID" 2>/dev/null; true' EXIT

# wait_serial PATTERN TIMEOUT: until the serial log shows PATTERN or QEMU exits.
wait_serial() {
  local deadline=$(( $(date +%s) + $2 ))
  while (( $(date +%s) < deadline )); do
    grep -qE "$1" "$VM_SERIAL" && return 0
    kill -0 "$VM_PID" 2>/dev/null || return 1
    sleep 2
  done
  return 1
}

log "smoke boot: fresh VM"
vm_start "$IMAGE" "$VMS/smoke" --fresh
if wait_serial 'clawos login:' "$BOOT_TIMEOUT"; then
  LOGIN_S=$(printf '%.1f' "$(echo "$(date +%s.%N) - $VM_T0" | bc)")
  PASSED=$((PASSED + 1)); echo "  ok   boot: systemd reached the login prompt after ${LOGIN_S}s"
else
  FAILED=$((FAILED + 1)); echo "  FAIL boot: no login prompt within $BOOT_TIMEOUT s"; vm_serial_tail
fi
check "boot: the running kernel is ours ($(cat "$OUT/kernel/release"))" grep -qF "Linux version $(cat "$OUT/kernel/release")" "$VM_SERIAL"
check "boot: the kernel built the verity root device from the UKI command line" grep -q 'dm-0 (clawos-root) is ready' "$VM_SERIAL"
check "boot: the root is erofs on dm-0" grep -q 'erofs: (device dm-0): mounted' "$VM_SERIAL"
check "boot: the data partition was created and mounted at /clawfs" grep -qE 'Mounted .*clawfs.mount' "$VM_SERIAL"
check "boot: no dm-verity corruption on the pristine image" bash -c "! grep -qE 'verity.*corrupted' '$VM_SERIAL'"
kill "$VM_PID" 2>/dev/null; wait "$VM_PID" 2>/dev/null || true; VM_PID=""

log "smoke boot: tampered root filesystem (one flipped byte)"
cp --sparse=always "$IMAGE" "$VMS/tampered.raw"
# A byte of the erofs superblock's UUID field: erofs itself would never notice
# it, so only dm-verity can stop this boot.
offset=$(( root_offset_mib * 1048576 + 1024 + 0x50 ))
printf "$(printf '\\%03o' $(( $(od -An -tu1 -j "$offset" -N1 "$VMS/tampered.raw") ^ 0xFF )))" |
  dd of="$VMS/tampered.raw" bs=1 seek="$offset" conv=notrunc status=none
vm_start "$VMS/tampered.raw" "$VMS/tampered" --fresh
wait_serial 'verity.*corrupted|clawos login:' 240 || true
check "verity: the tampered image is rejected by dm-verity" grep -qE 'device-mapper: verity.*corrupted' "$VM_SERIAL"
check "verity: the tampered image never reaches the login prompt" bash -c "! grep -q 'clawos login:' '$VM_SERIAL'"
kill "$VM_PID" 2>/dev/null; wait "$VM_PID" 2>/dev/null || true; VM_PID=""
rm -f "$VMS/tampered.raw"

FLOOR_S=$(bash "$REPO/tests/vm/floor.sh")
echo "image $(du -m --apparent-size "$IMAGE" | cut -f1) MiB; login prompt after ${LOGIN_S:-?}s; floor ${FLOOR_S}s"
echo "boot: $PASSED passed, $FAILED failed"
(( FAILED == 0 ))
