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
