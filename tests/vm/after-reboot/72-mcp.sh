# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Agent vm-mcp-local's local servers (checks/72-mcp.sh) after the reboot:
# none runs until an agent needs it. Then `files`, whose program is Node.js
# from a system extension (merged again at boot), starts in its unit as
# before; `local`, whose program (the probe, pushed into /run before the
# reboot) is gone, is refused by the launcher and gets no unit.
# 73-extensions.sh runs after this file: the extensions are all still here.
check "mcp: after the reboot no MCP server runs until it is used; then the one run by an extension's Node.js starts in its unit, the one whose program is gone is refused by the launcher and gets no unit" vm_ssh '
  set -e
  units() { systemctl list-units --no-legend --plain "clawos-mcp-*_*" | cut -d" " -f1; }
  test -z "$(units)" || { units; exit 1; }
  if pgrep -f "server-[e]verything/dist/index.js|server-[f]ilesystem/dist/index.js"; then echo "a server runs"; exit 1; fi
  for _ in $(seq 120); do
    status=$(clawctl mcp status --agent vm-mcp-local --json)
    echo "$status" | jq -e "[.servers[] | select(.server == \"files\")][0].state == \"connected\"" >/dev/null && break
    sleep 1
  done
  echo "$status" | jq -e "([.servers[] | select(.server == \"files\")][0].state == \"connected\")
                         and ([.servers[] | select(.server == \"local\")][0] | .state == \"failed\"
                              and (.last_error | contains(\"refused: command:\") and contains(\"not an executable file on this box\")))" >/dev/null ||
    { echo "$status"; exit 1; }
  test "$(units)" = clawos-mcp-vm-mcp-local_files.service || { units; exit 1; }
  clawctl agent rm vm-mcp-local >/dev/null'
