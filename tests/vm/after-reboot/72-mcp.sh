# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Agent vm-mcp-local's local servers (checks/72-mcp.sh) after the reboot:
# none runs until an agent needs it, and then the launcher refuses it, its
# program (pushed into /run before the reboot) being gone: no unit is made.
check "mcp: after the reboot no MCP server runs until it is used; one whose program is gone is refused by the launcher, and no unit is left" vm_ssh '
  set -e
  units() { systemctl list-units --no-legend --plain "clawos-mcp-*_*"; }
  test -z "$(units)" || { units; exit 1; }
  if pgrep -f "server-everything/dist/[i]ndex.js"; then echo "a server runs"; exit 1; fi
  status=$(clawctl mcp status --agent vm-mcp-local --json)
  echo "$status" | jq -e "[.servers[] | select(.server == \"local\")][0] | .state == \"failed\"
                         and (.last_error | contains(\"refused: command:\") and contains(\"not an executable file on this box\"))" >/dev/null ||
    { echo "$status"; exit 1; }
  test -z "$(units)" || { units; exit 1; }
  clawctl agent rm vm-mcp-local >/dev/null'
