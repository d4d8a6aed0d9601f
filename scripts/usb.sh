#!/usr/bin/env bash
# `make usb DEV=/dev/sdX`: writes the built image (out/clawos.raw) to a USB
# stick or a server's disk with bmaptool, after a confirmation that names
# the device's model and size. Refuses a device that is not a whole disk,
# holds a mounted file system (this machine's own root above all) or is
# smaller than the image. README.md, "Flashing a USB stick or a server".
source "$(dirname "$0")/lib.sh"
DEV=${1:-}
[[ -n $DEV ]] || die "usage: make usb DEV=/dev/sdX (lsblk lists the disks)"
[[ -f $OUT/clawos.raw && -f $OUT/clawos.bmap ]] || die "no image in $OUT: run make image"
[[ -b $DEV ]] || die "$DEV is not a block device"
[[ $(lsblk -ndo TYPE "$DEV") == disk || $(lsblk -ndo TYPE "$DEV") == loop ]] || die "$DEV is a $(lsblk -ndo TYPE "$DEV"), not a whole disk"
mounted=$(lsblk -nro MOUNTPOINTS "$DEV" | grep -v '^$' || true)
[[ -z $mounted ]] || die "$DEV has mounted file systems ($(echo "$mounted" | tr '\n' ' ')): not writing over them"
size=$(lsblk -bndo SIZE "$DEV")
(( size >= $(stat -c %s "$OUT/clawos.raw") )) || die "$DEV ($(lsblk -ndo SIZE "$DEV")) is smaller than the image"
model=$(lsblk -ndo VENDOR,MODEL "$DEV" | xargs)
echo "This erases everything on $DEV: ${model:-unknown model}, $(lsblk -ndo SIZE "$DEV" | xargs)."
read -rp "Type the device's name ($DEV) to write ClawOS to it: " answer
[[ $answer == "$DEV" ]] || die "not confirmed: nothing written"
bmaptool copy --bmap "$OUT/clawos.bmap" "$OUT/clawos.raw" "$DEV"
sync
log "ClawOS written to $DEV. On first boot it makes its slot B and data partition in the rest of the disk."
