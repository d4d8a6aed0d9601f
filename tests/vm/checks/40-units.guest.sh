# shellcheck shell=bash
# systemd reports no failed unit and every ClawOS unit is active.

no_failed_units() { test -z "$(systemctl --failed --no-legend --plain)" || { systemctl --failed; false; }; }
check "units: no failed units" no_failed_units

clawos_units_active() {
  local unit rc=0
  for unit in $(systemctl list-unit-files --no-legend --plain "clawos-*" | awk '$2 == "enabled" { print $1 }'); do
    [ "$(systemctl show -P Type "$unit")" = oneshot ] && continue
    systemctl is-active -q "$unit" || { echo "$unit is $(systemctl is-active "$unit")"; rc=1; }
  done
  return $rc
}
check "units: every enabled ClawOS socket and long-running service is active" clawos_units_active

host_key_made_here() { test -s /var/lib/clawos/ssh/ssh_host_ed25519_key && ! ls /etc/ssh/ssh_host_* 2>/dev/null; }
check "ssh: host key was generated on this box, not baked into the image" host_key_made_here

# The key's directory is the root's alone; the directory above it must stay
# passable, or no component reaches its state directory
# (clawos-ssh-hostkey.service makes it with StateDirectory=).
host_key_directory_modes() {
  test "$(stat -c "%a %U" /var/lib/clawos/ssh)" = "700 root" && test "$(stat -c "%a %U" /var/lib/clawos)" = "755 root"
}
check "ssh: the host key's directory is 0700, /var/lib/clawos above it 0755" host_key_directory_modes
