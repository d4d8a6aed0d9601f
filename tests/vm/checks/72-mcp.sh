# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# An agent's MCP server in the booted image (specs/mcp/README.md): the
# reference server-everything (make mcp-servers, from npm), run in the
# guest by the host's Node.js, both brought in over SSH as test tools, over
# Streamable HTTP on the guest's loopback (a remote server, as the box
# supports them today). A scripted model calls its tool; the call is
# offered, run, in the transcript, and waits for approval when the agent is
# supervised; `clawctl mcp` shows what the agent gets; a local server is
# refused while local servers may not start.
# Helpers: 59-agent-turns.sh.

# Ports no other check's provider or server uses (71-scenarios.sh takes up to 18100).
MCP_PORT=18111
MCP_DIR=/run/clawos-test/mcp

# The host's node, with the libraries it links that the image may lack
# (Debian's node links libnode, libuv, ICU, ...; glibc's and the C++
# runtime's own are the image's, newer and compatible).
start_mcp_server() {
  local node lib
  node=$(command -v node) || { echo "no node on the host"; return 1; }
  vm_push "$node" "$MCP_DIR/node" || return 1
  vm_ssh "mkdir -p $MCP_DIR/lib" || return 1
  for lib in $(ldd "$node" | awk '/=> \// { print $3 }' | grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so'); do
    vm_push "$lib" "$MCP_DIR/lib/$(basename "$lib")" || return 1
  done
  tar -C "$OUT" -cf - mcp-servers/node_modules | vm_ssh "tar -xf - -C $MCP_DIR" &&
    vm_ssh "systemd-run --unit clawos-test-mcp --property=Type=exec --setenv=PORT=$MCP_PORT --setenv=LD_LIBRARY_PATH=$MCP_DIR/lib \
              $MCP_DIR/node $MCP_DIR/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js streamableHttp >/dev/null &&
            for _ in \$(seq 150); do (exec 3<>/dev/tcp/127.0.0.1/$MCP_PORT) 2>/dev/null && exit 0; sleep 0.2; done
            journalctl -u clawos-test-mcp -o cat | tail -n 20; exit 1"
}

check_mcp_tool() {
  local script
  # The model calls the tool by its wire name (the APIs refuse dots).
  script=$(jq -cn --argjson r1 "$(tool_call_reply mcp-1 mcp_everything_get-sum '{"a": 2, "b": 3}')" \
                  --argjson r2 "$(text_reply "The sum is 5." 100 4)" \
                  --argjson r3 "$(tool_call_reply mcp-2 mcp_everything_get-sum '{"a": 40, "b": 2}')" \
                  --argjson r4 "$(text_reply "The sum is 42." 100 4)" \
                  '{replies: [$r1, $r2, $r3, $r4]}') &&
    start_mcp_server && scripted_agent vm-mcp 18110 "$script" || return 1
  vm_ssh "printf '\n[mcp.servers.everything]\nurl = \"http://127.0.0.1:$MCP_PORT/mcp\"\n' >> /clawfs/agents/vm-mcp/config.toml" &&
  vm_ssh '
    set -e
    d=/clawfs/agents/vm-mcp
    out=$(clawctl chat --agent vm-mcp -m "Add 2 and 3." --json) || { echo "$out"; exit 1; }
    echo "$out" | jq -e ".status == \"done\" and .tool_calls == 1 and .answer == \"The sum is 5.\"" >/dev/null || { echo "$out"; exit 1; }
    log=/run/clawos-test/clawos-test-vm-mcp.jsonl
    # The model was offered the tool with the server own schema, under a
    # name the providers APIs take, and read its answer.
    sed -n 1p $log | jq -e "any(.body.tools[]; .function.name == \"mcp_everything_get-sum\" and .function.parameters.required == [\"a\", \"b\"])" >/dev/null ||
      { echo "the tool was not offered"; sed -n 1p $log | head -c 2000; exit 1; }
    sed -n 2p $log | jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"mcp-1\")][0].content | contains(\"The sum of 2 and 3 is 5\")" >/dev/null ||
      { echo "the model did not get the result"; sed -n 2p $log | head -c 2000; exit 1; }
    session=$(echo "$out" | jq -r .session_id)
    clawctl session show vm-mcp "$session" --json | jq -e "any(.entries[]; .role == \"tool\" and (.content | contains(\"is 5\")))" >/dev/null
    # What the agent sees, as the operator sees it.
    status=$(clawctl mcp status --agent vm-mcp --json)
    echo "$status" | jq -e ".servers | length == 1 and .[0].server == \"everything\" and .[0].transport == \"http\" and .[0].state == \"connected\"
                           and (.[0].tools | index(\"mcp.everything.get-sum\")) and .[0].refused == []" >/dev/null || { echo "$status"; exit 1; }
    clawctl mcp tools --agent vm-mcp | grep -qx "mcp.everything.get-sum"
    clawctl mcp restart --agent vm-mcp everything >/dev/null
    if clawctl mcp restart --agent vm-mcp nowhere 2>/dev/null; then echo "a server that is not there was restarted"; exit 1; fi

    # Supervised: the call waits for the operator, then runs once.
    sed "s/^level = \"full\"/level = \"supervised\"/" $d/config.toml > /run/clawos-test/mcp.toml && cat /run/clawos-test/mcp.toml > $d/config.toml
    out=$(clawctl chat --agent vm-mcp -m "Add 40 and 2." --json) || true
    echo "$out" | jq -e ".status == \"waiting\" and (.message | contains(\"for mcp.everything.get-sum\"))" >/dev/null || { echo "$out"; exit 1; }
    clawctl approvals list --json > /run/clawos-test/mcp-approvals.json
    jq -e "[.approvals[] | select(.agent == \"vm-mcp\")] | length == 1 and .[0].tool_name == \"mcp.everything.get-sum\" and .[0].permissions == [\"tool\", \"network\"]" \
      /run/clawos-test/mcp-approvals.json >/dev/null || { cat /run/clawos-test/mcp-approvals.json; exit 1; }
    id=$(jq -r "[.approvals[] | select(.agent == \"vm-mcp\")][0].id" /run/clawos-test/mcp-approvals.json)
    out=$(clawctl approvals approve $id --json)
    echo "$out" | jq -e ".status == \"done\" and .answer == \"The sum is 42.\" and .tool_calls == 1" >/dev/null || { echo "$out"; exit 1; }
    sed -n 4p $log | jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"mcp-2\")][0].content | contains(\"is 42\")" >/dev/null'
}
check "mcp: a scripted model calls a tool of an MCP server over Streamable HTTP; offered with the server's schema, answered, in the transcript; clawctl mcp shows it connected; supervised, it waits for approval and runs once" check_mcp_tool

check "mcp: a local MCP server is refused on the box, and clawctl mcp status says why" vm_ssh '
  set -e
  d=/clawfs/agents/vm-mcp
  printf "\n[mcp.servers.local]\ncommand = [\"/usr/bin/true\"]\n" >> $d/config.toml
  status=$(clawctl mcp status --agent vm-mcp --json)
  echo "$status" | jq -e "[.servers[] | select(.server == \"local\")][0] | .state == \"failed\" and .transport == \"stdio\"
                         and (.last_error | contains(\"not started on this box yet\"))" >/dev/null || { echo "$status"; exit 1; }
  # The remote server is still given to the agent.
  echo "$status" | jq -e "[.servers[] | select(.server == \"everything\")][0].state == \"connected\"" >/dev/null
  systemctl stop clawos-test-mcp clawos-test-vm-mcp'
