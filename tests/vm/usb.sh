# shellcheck shell=bash
# `make usb` (scripts/usb.sh) on the host, before the boots: written to a
# loop device standing in for a USB stick, after the confirmation.

usb_writes_the_image_after_confirmation() {
  local target="$VMS/usb-stick.img" dev out rc=0
  mkdir -p "$VMS"; rm -f "$target"; truncate -s 2G "$target"
  dev=$(losetup --find --show "$target") || { echo "no loop device"; return 1; }
  # A wrong answer: refused, nothing written.
  if out=$(echo /dev/not-this-one | bash "$REPO/scripts/usb.sh" "$dev" 2>&1); then
    echo "wrote without the device's name typed: $out"; rc=1
  fi
  grep -q "This erases everything on $dev: .*, 2G\\." <<<"$out" || { echo "the confirmation did not name the device and its size: $out"; rc=1; }
  cmp -s -n 1048576 /dev/zero "$dev" || { echo "a refused write changed the device"; rc=1; }
  if ! echo "$dev" | bash "$REPO/scripts/usb.sh" "$dev" >"$VMS/usb.log" 2>&1; then
    echo "make usb failed:"; tail -n 5 "$VMS/usb.log"; rc=1
  elif ! cmp -n "$(stat -c %s "$IMAGE")" "$IMAGE" "$dev"; then
    echo "the device does not hold the image byte for byte"; rc=1
  fi
  losetup -d "$dev"; rm -f "$target"
  return $rc
}
check "usb: make usb writes out/clawos.raw byte for byte (bmaptool) only after the device's name is typed back" \
  usb_writes_the_image_after_confirmation
