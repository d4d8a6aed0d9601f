#!/usr/bin/env bash
# Boots a ClawOS disk image under QEMU the way real hardware would see it:
# UEFI (OVMF), a TPM 2.0 (swtpm, state kept in the VM's directory), virtio
# disk/net/rng, user-mode networking with SSH forwarded to a host port.
# The image sits behind a copy-on-write overlay so the built image stays
# pristine; the overlay, UEFI variables and TPM state persist in --state DIR
# across boots (that is what makes reboot tests meaningful).
#
#   run.sh --image IMG --state DIR [--headless] [--ssh-port N] [--serial FILE]
#          [--disk-size 4G] [--fresh] [--disk-cache writeback|unsafe]
#          [--console-socket PATH] [--disk-bus virtio|nvme|usb] [--ssh-key KEY]
# Interactive by default: serial console on this terminal (Ctrl-a x quits),
# and a reboot inside the box reboots the VM (`clawctl update apply
# --reboot` carries on). --headless (the boot tests) ends QEMU at a reboot
# instead (-no-reboot): a test sees each boot as a QEMU run of its own.
# --ssh-key names the private key the image trusts, for the SSH command
# printed at the start.
# --console-socket (with --headless) also serves the serial console on a Unix
# socket, so a test can type at a console prompt (the recovery key of
# /clawfs); the --serial file still gets everything the guest prints.
# --disk-cache unsafe (the boot tests) skips the host fsync behind each guest
# flush: the data still reaches the overlay file, and a test VM's disk need
# not survive a crash of the host.
# --disk-bus attaches the disk as virtio-blk (default), an NVMe drive, or a
# USB stick (usb-storage on an xHCI controller), as it would be on a server
# or when booted from a flashed stick.
# CLAWOS_ACCEL=kvm|tcg picks the accelerator; unset, KVM is used when
# /dev/kvm is writable on bare metal. Nested KVM hangs on the CI machines
# (the guest stalls in its kernel), so virtual machines get TCG.
# shellcheck disable=SC2054  # QEMU takes comma-separated key=value lists as one word each
set -euo pipefail
IMAGE="" STATE="" HEADLESS=0 SSH_PORT=2222 SERIAL="" DISK_SIZE=4G FRESH=0 DISK_CACHE=writeback CONSOLE_SOCKET="" DISK_BUS=virtio SSH_KEY=""
while (($#)); do
  case $1 in
    --image) IMAGE=$2; shift 2 ;;
    --state) STATE=$2; shift 2 ;;
    --headless) HEADLESS=1; shift ;;
    --ssh-port) SSH_PORT=$2; shift 2 ;;
    --serial) SERIAL=$2; shift 2 ;;
    --disk-size) DISK_SIZE=$2; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    --disk-cache) DISK_CACHE=$2; shift 2 ;;
    --console-socket) CONSOLE_SOCKET=$2; shift 2 ;;
    --disk-bus) DISK_BUS=$2; shift 2 ;;
    --ssh-key) SSH_KEY=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -f $IMAGE ]] || { echo "run.sh: no image at '$IMAGE' (run make image)" >&2; exit 1; }
[[ -n $STATE ]] || { echo "run.sh: --state DIR is required" >&2; exit 2; }
IMAGE=$(readlink -f "$IMAGE")
mkdir -p "$STATE"; STATE=$(readlink -f "$STATE")  # swtpm --daemon chdirs to /
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd

if ((FRESH)); then rm -rf "$STATE/disk.qcow2" "$STATE/ovmf-vars.fd" "$STATE/tpm" "$STATE/uuid"; fi
mkdir -p "$STATE/tpm"
[[ -f $STATE/disk.qcow2 ]] || qemu-img create -q -f qcow2 -F raw -b "$IMAGE" "$STATE/disk.qcow2" "$DISK_SIZE"
[[ -f $STATE/ovmf-vars.fd ]] || cp "$OVMF_VARS" "$STATE/ovmf-vars.fd"
# The SMBIOS product UUID, which the image uses as its machine id: one per
# VM, like a board's, so it stays the same across reboots.
[[ -s $STATE/uuid ]] || cat /proc/sys/kernel/random/uuid > "$STATE/uuid"

accel=tcg
case ${CLAWOS_ACCEL:-} in
  kvm) accel=kvm ;;
  tcg) ;;
  # Only when systemd-detect-virt positively says bare metal: a missing
  # tool or any VM or container means TCG.
  "") if [[ -w /dev/kvm && $(systemd-detect-virt 2>/dev/null) == none ]]; then accel=kvm; fi ;;
  *) echo "run.sh: CLAWOS_ACCEL must be kvm or tcg, not '$CLAWOS_ACCEL'" >&2; exit 2 ;;
esac
# CLAWOS_QEMU_CPU= the CPU model (default: QEMU's own for the accelerator).
cpu=()
[[ -z ${CLAWOS_QEMU_CPU:-} ]] || cpu=(-cpu "$CLAWOS_QEMU_CPU")
echo "run.sh: accel $accel ${cpu[*]}" >&2

# swtpm exits by itself when QEMU closes the control channel.
rm -f "$STATE/tpm/ctrl"
swtpm socket --tpm2 --tpmstate dir="$STATE/tpm" --ctrl type=unixio,path="$STATE/tpm/ctrl" \
  --log file="$STATE/tpm/swtpm.log" --terminate --daemon
for _ in $(seq 50); do [[ -S $STATE/tpm/ctrl ]] && break; sleep 0.1; done

args=(
  -machine q35 -accel "$accel" "${cpu[@]}" -smp 2 -m 2048 -uuid "$(cat "$STATE/uuid")"
  -drive if=pflash,format=raw,unit=0,readonly=on,file="$OVMF_CODE"
  -drive if=pflash,format=raw,unit=1,file="$STATE/ovmf-vars.fd"
  -chardev socket,id=chrtpm,path="$STATE/tpm/ctrl" -tpmdev emulator,id=tpm0,chardev=chrtpm -device tpm-tis,tpmdev=tpm0
  -drive if=none,id=disk0,format=qcow2,"cache=$DISK_CACHE,file=$STATE/disk.qcow2"
  -netdev user,id=net0,"hostfwd=tcp:127.0.0.1:$SSH_PORT-:22" -device virtio-net-pci,netdev=net0
  -device virtio-rng-pci
)
case $DISK_BUS in
  # bootindex: the firmware tries this disk first, whatever boot entries
  # earlier boots of the VM left in its variables.
  virtio) args+=(-device virtio-blk-pci,drive=disk0,bootindex=1) ;;
  nvme) args+=(-device nvme,drive=disk0,serial=clawos-test,bootindex=1) ;;
  usb) args+=(-device qemu-xhci,id=xhci -device usb-storage,bus=xhci.0,drive=disk0,removable=on,bootindex=1) ;;
  *) echo "run.sh: --disk-bus must be virtio, nvme or usb, not '$DISK_BUS'" >&2; exit 2 ;;
esac
((HEADLESS)) && args+=(-no-reboot)
if ((HEADLESS)) && [[ -n $CONSOLE_SOCKET ]]; then
  # The log file gets the output whether or not a client is connected.
  args+=(-display none -monitor none
    -chardev socket,id=console,path="$CONSOLE_SOCKET",server=on,wait=off,logfile="${SERIAL:-$STATE/serial.log}"
    -serial chardev:console)
elif ((HEADLESS)); then
  args+=(-display none -serial "file:${SERIAL:-$STATE/serial.log}" -monitor none)
else
  echo "ClawOS: ssh ${SSH_KEY:+-i $SSH_KEY }-p $SSH_PORT root@127.0.0.1 once booted; Ctrl-a x quits" >&2
  args+=(-nographic -serial mon:stdio)
fi
exec qemu-system-x86_64 "${args[@]}"
