#!/bin/bash
# Started as a local MCP server in the booted image (tests/vm/checks/72-mcp.sh):
# records in its state directory what the sandbox gives it, seen from
# inside the unit, then runs the server it is given ("$@").
#   uid N                        its user
#   /clawfs hidden|visible       whether /clawfs can be listed
#   /usr read-only|writable      whether a file can be made in /usr
#   HOST:PORT open|closed        a TCP connection to each of $PROBE
#   secret SHA256|none           a digest of $PROBE_SECRET, never its value
{
  echo "uid $(id -u)"
  if ls /clawfs >/dev/null 2>&1; then echo "/clawfs visible"; else echo "/clawfs hidden"; fi
  if touch /usr/.mcp-probe 2>/dev/null; then echo "/usr writable"; else echo "/usr read-only"; fi
  for target in $PROBE; do
    if timeout 3 bash -c "exec 3<>/dev/tcp/${target%:*}/${target##*:}" 2>/dev/null; then
      echo "$target open"
    else
      echo "$target closed"
    fi
  done
  if [[ -n ${PROBE_SECRET:-} ]]; then echo "secret $(printf %s "$PROBE_SECRET" | sha256sum | cut -d' ' -f1)"; else echo "secret none"; fi
} > "$STATE_DIRECTORY/probe"
exec "$@"
