#!/usr/bin/env bash
# Boot tests of the ClawOS image (`make test-vm`, part of `make test`). Boots out/clawos.raw
# under QEMU with OVMF and swtpm, checks it over SSH, reboots it (checks
# again, then kills components at random under writes: after-reboot/70-chaos.sh), boots it
# with a changed kernel command line (/clawfs must stay shut until the
# recovery key is typed at the console, the vault sealed until its recovery
# key opens it), flips a byte of a file on /clawfs while the box is off (the
# file must no longer read), boots it again with a volume made elsewhere and
# sealed to the same PCRs over its data partition (the TPM must not open
# it), and boots a tampered copy that dm-verity must refuse. In between,
# the update boots (tests/vm/update.sh): the power cut while an update is
# written, tampered updates refused, an update applied
# and booted with the vault and /clawfs opened by the TPM, a broken one
# tried three times and rolled back, booting from USB and NVMe disks; and
# `make usb` onto a loop device (tests/vm/usb.sh). Prints "N passed, M
# failed".
#
# The main line is boot 1, boot 2, boots 3-4 (on a copy of the disk after
# boot 2) and the update boots, one after the other. Parts that share
# nothing with it and check nothing bound by time run as a lane beside it
# (lane, tests/vm/lib.sh): `make usb`, the tampered image, building the
# updates and the system extensions (tests/vm/extensions.sh), beside boot 1
# once its kernel has started systemd.
source "$(dirname "$0")/../../scripts/lib.sh"
source "$REPO/tests/vm/lib.sh"
source "$REPO/tests/vm/clawfs-tamper.sh"
IMAGE="$OUT/clawos.raw"
VMS="$OUT/vm"
# shellcheck source=/dev/null  # written by image/seal.sh: version, roothash, cmdline, the
# partitions' offsets and sizes (the checks read them)
source "$OUT/image/sealed.env"
# shellcheck disable=SC2154  # the variables sealed.env sets, which shellcheck cannot see
: "${version:?}" "${roothash:?}" "${cmdline:?}" "${esp_offset:?}" "${esp_bytes:?}" "${root_offset:?}"
source "$REPO/tests/vm/update.sh"
source "$REPO/tests/vm/extensions.sh"
trap 'vm_kill; lanes_kill' EXIT
# Each check's and phase's time, for the report at the end: make test's
# (scripts/test.sh, CLAWOS_TEST_TIMES), or this suite's own when run alone.
VM_TIMES=${CLAWOS_TEST_TIMES:-$VMS/times.tsv}
mkdir -p "$VMS"
[[ -n ${CLAWOS_TEST_TIMES:-} ]] || : > "$VM_TIMES"

# The tampered image, `make usb`, building the updates and the system
# extensions need no VM of the main line: a lane, beside boot 1's first boot.
tampered_usb_and_updates() {
  # Not before boot 1's kernel has started systemd: the one boot that
  # stalled in its kernel in CI (vm_wait_ready) was boot 1 with this lane
  # beside it. 2 x VM_KERNEL_TIMEOUT covers boot 1 started once more.
  local waited=0
  until grep -qs 'Started ' "$VMS/main/serial.log" || (( waited >= 2 * VM_KERNEL_TIMEOUT )); do
    sleep 2; waited=$((waited + 2))
  done
  source "$REPO/tests/vm/usb.sh"
  check "update: make update-artifacts builds $UPDATE_V2 and $UPDATE_V3 (a broken router), signed" update_build
  check "extensions: make extensions builds nodejs and python, signed for the image's level; the test's own four are built" extensions_build
  log "boot 5: tampered root filesystem (one flipped byte)"
  cp --sparse=always "$IMAGE" "$VMS/tampered.raw"
  # A byte of the erofs superblock's UUID field: erofs itself would never notice
  # it, so only dm-verity can stop this boot.
  local offset=$(( root_offset + 1024 + 0x50 ))
  python3 - "$VMS/tampered.raw" "$offset" <<'PY'
import sys
path, off = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0xFF]))
PY
  vm_start "$VMS/tampered.raw" "$VMS/tampered" --fresh
  vm_wait_exit 240 || true
  check "verity: the tampered image is rejected by dm-verity" \
    grep -qE 'device-mapper: verity.*(corrupted|error)' "$VM_SERIAL"
  check "verity: the tampered image never reaches multi-user" \
    bash -c "! grep -q 'Reached target.*Multi-User' '$VM_SERIAL'"
  rm -f "$VMS/tampered.raw"
}

phase "boot 1"
log "boot 1: fresh VM"
# The main VM's disk; boots 3 and 4 copy it and must keep its size.
VM_DISK_SIZE=4G
rm -f "$VMS/main/serial.log"; rm -rf "$EXTENSIONS_DIR"
lane tampered-usb-updates tampered_usb_and_updates
vm_boot "$IMAGE" "$VMS/main" --fresh --disk-size "$VM_DISK_SIZE" || die "the image did not boot"
READY_FIRST=$VM_READY_S
run_checks checks
log "boot 1 done; powering off"
vm_poweroff
lane_join tampered-usb-updates

phase "boot 2"
log "boot 2: same disk and TPM state"
if vm_boot "$IMAGE" "$VMS/main"; then
  READY_SECOND=$VM_READY_S
  run_checks after-reboot
  # The boot's first open (later ones, after the chaos checks kill the
  # agent, take the key from the kernel keyring), and where its key came from.
  UNSEAL=$(vm_ssh "journalctl -b -u clawos-security-agent -o cat" | sed -n 's/.*vault open: \(.* in [0-9]* ms\).*/\1/p' | head -n 1) || true
  CLAWFS_FORMAT_S=$(vm_ssh "journalctl -u clawos-clawfs-format -o cat" | sed -n 's/^clawfs-keys: \/clawfs encrypted in \([0-9]*\) s.*/\1/p' | tail -n 1) || true
  vm_poweroff
else
  FAILED=$((FAILED + 1)); echo "  FAIL second boot"
fi

# Boots 3 and 4 run on a copy of the main VM's disk and TPM as boot 2 left
# them, so they share nothing with the update boots after it. Not a lane
# beside them, though: run so (one run, 2026-11-27) the two VMs on two
# cores pushed the first tool call after the power cut past its timeout and
# U2's boot from 99 s to 177 s.
phase "boots 3-4"
CHANGED="$VMS/changed" CHANGED_DISK_SIZE=6G
log "boot 3: same data and TPM, a UKI with a changed kernel command line"
# The VM's disk as it is now (data partition included), with the UKI's
# embedded command line patched in place on the ESP: same length, so the PE
# layout is untouched, but the firmware's PCR 4 measurement differs.
rm -rf "$CHANGED"; mkdir -p "$CHANGED"
cp -a "$VMS/main/tpm" "$VMS/main/ovmf-vars.fd" "$VMS/main/uuid" "$CHANGED/"
qemu-img convert -O raw "$VMS/main/disk.qcow2" "$CHANGED/clawos.raw"
python3 - "$CHANGED/clawos.raw" "$cmdline" "$esp_offset" "$esp_bytes" <<'PY'
import sys
path, cmdline, esp_start, esp_bytes = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3]), int(sys.argv[4])
with open(path, "r+b") as f:
    f.seek(esp_start)
    esp = f.read(esp_bytes)
    at = esp.find(cmdline)
    if at < 0 or esp.find(cmdline, at + 1) >= 0:
        sys.exit("the sealed command line is not on the ESP exactly once")
    f.seek(esp_start + at)
    f.write(cmdline.replace(b" panic=30", b" panic=31"))
PY
changed_cmdline_boots() {
  # /clawfs's TPM2 keyslot is sealed to PCR 4 too: the boot stops at the
  # console asking for the recovery key, with nothing started (no SSH), as
  # long as it is not given; the console is typed at through a socket.
  # The disk 2 GiB larger than the one boot 1 formatted /clawfs on: the
  # data partition and /clawfs keep their size (clawfs-keys keep-size), and
  # boot 4 is the second boot on it, which waited on /dev/mapper/clawfs
  # when the partition grew (specs/clawfs/encryption.md, "A larger disk").
  vm_start "$CHANGED/clawos.raw" "$CHANGED" --disk-size "$CHANGED_DISK_SIZE" --console-socket "$CHANGED/console.sock"
  source "$REPO/tests/vm/changed-cmdline/10-clawfs-console.sh"
  if vm_wait_ready "$BOOT_TIMEOUT"; then
    source "$REPO/tests/vm/changed-cmdline/55-clawfs.sh"
    source "$REPO/tests/vm/changed-cmdline/65-vault.sh"
    vm_poweroff
    # The offline edit: one byte of the canary file boot 1 wrote, flipped in
    # the disk (specs/clawfs/encryption.md, "Integrity").
    check "clawfs: a byte of a file on /clawfs is flipped on the disk while the box is off" \
      clawfs_flip_byte "$CHANGED/disk.qcow2" "$(cat "$VMS/clawfs-canary.offset" 2>/dev/null)"
    log "boot 4: the changed UKI again, after the reseal, with the edited file"
    vm_start "$CHANGED/clawos.raw" "$CHANGED" --disk-size "$CHANGED_DISK_SIZE"
    if vm_wait_ready "$BOOT_TIMEOUT"; then
      source "$REPO/tests/vm/changed-cmdline/after-reseal-clawfs.sh"
      source "$REPO/tests/vm/changed-cmdline/after-reseal.sh"
      # Boot 6 (the VM stopped after it): a volume made elsewhere.
      source "$REPO/tests/vm/changed-cmdline/planted-volume.sh"
    else
      FAILED=$((FAILED + 1)); echo "  FAIL boot after the reseal"
    fi
  else
    FAILED=$((FAILED + 1)); echo "  FAIL boot with the changed command line"
  fi
  rm -rf "$CHANGED"
}
changed_cmdline_boots

phase "updates"
update_boots

phase floor
log "floor: the same kernel booting a minimal initramfs"
FLOOR_S=$(bash "$REPO/tests/vm/floor.sh")

echo
echo "image $(du -m --apparent-size "$IMAGE" | cut -f1) MiB; ready after ${READY_FIRST}s (first boot), ${READY_SECOND:-?}s (second); floor ${FLOOR_S}s; ratio $(echo "scale=1; ${READY_SECOND:-$READY_FIRST} / $FLOOR_S" | bc)"
echo "update $UPDATE_V2: ${UPDATE_DOWNLOAD_MIB:-?} MiB to download (built in ${UPDATE_BUILD_S:-?} s for two versions), applied in $(cat "$VMS/update-apply-$UPDATE_V2.s" 2>/dev/null || echo '?') s over HTTP on the host's loopback; power-on to blessed ${UPDATE_BLESSED_S:-?} s; three failed tries and back to the previous version in ${ROLLBACK_S:-?} s"
echo "vault at boot 2's first open: ${UNSEAL:-?}; /clawfs made at first boot (LUKS2 with integrity, no wipe; ext4) in ${CLAWFS_FORMAT_S:-?} s"
echo "vm time: $(phase_times); $SECONDS s in all; $STALLED_BOOTS boot(s) started once more after a kernel stall"
[[ -n ${CLAWOS_TEST_TIMES:-} ]] || bash "$REPO/scripts/times-report.sh" "$VM_TIMES" "$CACHE/test-times/test-vm.tsv"
echo "vm: $PASSED passed, $FAILED failed"
(( FAILED == 0 ))
