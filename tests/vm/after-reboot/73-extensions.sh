# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The system extensions installed before the reboot (checks/72-extensions.sh):
# merged again by systemd-sysext.service at boot, before the components
# started; then one removed. nodejs and python stay for the update boots
# (tests/vm/update.sh, U3).
check "extensions: after the reboot the installed extensions are merged again, before the components start; remove unmerges one and keeps the rest" vm_ssh '
  set -e
  list=$(clawctl extension list --json)
  echo "$list" | jq -e "[.extensions[] | select(.merged) | .name] == [\"mcp-test-servers\", \"nodejs\", \"python\"]" >/dev/null || { echo "$list"; exit 1; }
  node --version >/dev/null
  merged=$(systemctl show -P ExecMainExitTimestampMonotonic systemd-sysext.service)
  router=$(systemctl show -P ExecMainStartTimestampMonotonic clawos-router.service)
  [ "$merged" -gt 0 ] && [ "$merged" -lt "$router" ] || { echo "merged at $merged us, router started at $router us"; exit 1; }
  clawctl extension remove mcp-test-servers
  list=$(clawctl extension list --json)
  echo "$list" | jq -e "[.extensions[] | .name] == [\"nodejs\", \"python\"] and all(.extensions[]; .merged)" >/dev/null || { echo "$list"; exit 1; }
  test ! -e /usr/lib/clawos-test-mcp
  if clawctl extension remove mcp-test-servers 2>/dev/null; then echo "removed twice"; exit 1; fi'
log "extensions: systemd-sysext merged three at this boot in $(vm_ssh 'echo $(( ($(systemctl show -P ExecMainExitTimestampMonotonic systemd-sysext.service) - $(systemctl show -P ExecMainStartTimestampMonotonic systemd-sysext.service)) / 1000 ))' 2>/dev/null) ms"

# With extensions merged, /usr is an overlay and the eBPF policy also sees
# each file's open in the layer beneath, by that layer's path
# (rootfs-overlay/etc/clawos/ebpf-policy.toml, "/lib/"). A shell moved into
# wasm-daemon's enforced cgroup opens a tool's wasm as the daemon does
# (a redirection: the cgroup may not exec): refused with EPERM, the daemon
# could load no tool after its start's first second.
check "extensions: with /usr an overlay, wasm-daemon's enforced cgroup may open the image's tools through it" vm_ssh '
  findmnt -n -o FSTYPE /usr | grep -qx overlay || { findmnt /usr; exit 1; }
  sh -c "echo \$\$ > /sys/fs/cgroup/clawos.slice/clawos-wasm-daemon.service/daemon/cgroup.procs && : < /usr/lib/clawos/tools/scratchpad-v0.1.0.wasm"'
