# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Agents' MCP servers in the booted image (specs/mcp/README.md): the
# reference servers (make mcp-servers, from npm) and a Python server
# (mcp-server-time, from PyPI), run in the guest by the Node.js and Python
# of the system extensions 72-extensions.sh installed, the servers
# themselves from the test's extension (mcp-test-servers, $TEST_MCP).
# Remote: over Streamable HTTP on the guest's loopback, a scripted model
# calls its tool and the Python server's (over stdio);
# the call is offered, run, in the transcript, and waits for approval when
# the agent is supervised; `clawctl mcp` shows what the agent gets. Local:
# each server in its sandbox unit, started by clawos-mcp-launch: what it
# can see and reach, a crash and a hang, no process outliving its
# connection, the filesystem server against the unit's read-only view.
# Helpers: 59-agent-turns.sh.

# Ports no other check's provider or server uses (71-scenarios.sh takes up to 18100).
MCP_PORT=18111
# The probe (below), pushed in: gone after the reboot.
MCP_DIR=/run/clawos-test/mcp
EVERYTHING=$TEST_MCP/node_modules/@modelcontextprotocol/server-everything/dist/index.js

# Up to 120 s for it to listen: Node.js's first start reads its modules
# through dm-verity and erofs's decompression, both emulated here (57 s
# once, in a hand run beside a cargo build).
start_mcp_server() {
  vm_ssh "systemd-run --unit clawos-test-mcp --property=Type=exec --setenv=PORT=$MCP_PORT /usr/bin/node $EVERYTHING streamableHttp >/dev/null &&
            for _ in \$(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/$MCP_PORT) 2>/dev/null && exit 0; sleep 0.2; done
            journalctl -u clawos-test-mcp -o cat | tail -n 20; exit 1"
}

check_mcp_tool() {
  local script
  # The model calls the tool by its wire name (the APIs refuse dots).
  script=$(jq -cn --argjson r1 "$(tool_call_reply mcp-1 mcp_everything_get-sum '{"a": 2, "b": 3}')" \
                  --argjson r2 "$(text_reply "The sum is 5." 100 4)" \
                  --argjson t1 "$(tool_call_reply time-1 mcp_time_get_current_time '{"timezone": "Europe/Paris"}')" \
                  --argjson t2 "$(text_reply "It is time." 100 4)" \
                  --argjson r3 "$(tool_call_reply mcp-2 mcp_everything_get-sum '{"a": 40, "b": 2}')" \
                  --argjson r4 "$(text_reply "The sum is 42." 100 4)" \
                  '{replies: [$r1, $r2, $t1, $t2, $r3, $r4]}') &&
    start_mcp_server && scripted_agent vm-mcp 18110 "$script" || return 1
  # The Python server over stdio, in its sandbox unit like 72's local ones.
  vm_ssh "printf '\n[mcp.servers.everything]\nurl = \"http://127.0.0.1:$MCP_PORT/mcp\"\n[mcp.servers.time]\ncommand = [\"/usr/bin/python3\", \"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\nenv = { PYTHONPATH = \"$TEST_MCP/python\" }\nstart_timeout_s = 120\n' >> /clawfs/agents/vm-mcp/config.toml" &&
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
    # The Python server: its tool offered and answered.
    out=$(clawctl chat --agent vm-mcp -m "What time is it in Paris?" --json) || { echo "$out"; exit 1; }
    echo "$out" | jq -e ".status == \"done\" and .tool_calls == 1 and .answer == \"It is time.\"" >/dev/null || { echo "$out"; exit 1; }
    sed -n 3p $log | jq -e "any(.body.tools[]; .function.name == \"mcp_time_get_current_time\")" >/dev/null
    sed -n 4p $log | jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"time-1\")][0].content | contains(\"Europe/Paris\") and contains(\"datetime\")" >/dev/null ||
      { echo "the model did not get the time"; sed -n 4p $log | head -c 2000; exit 1; }
    # What the agent sees, as the operator sees it.
    status=$(clawctl mcp status --agent vm-mcp --json)
    echo "$status" | jq -e "[.servers[] | [.server, .transport, .state]] == [[\"everything\", \"http\", \"connected\"], [\"time\", \"stdio\", \"connected\"]]
                           and (.servers[0].tools | index(\"mcp.everything.get-sum\")) and .servers[0].refused == []" >/dev/null || { echo "$status"; exit 1; }
    systemctl is-active -q clawos-mcp-vm-mcp_time.service
    clawctl mcp tools --agent vm-mcp | grep -qx "mcp.everything.get-sum"
    list=$(clawctl mcp list --agent vm-mcp)
    echo "$list" | grep -qx "everything  http  http://127.0.0.1:[0-9]*/mcp" && echo "$list" | grep -qx "time  stdio  /usr/bin/python3" ||
      { echo "mcp list: $list"; exit 1; }
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
    sed -n 6p $log | jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"mcp-2\")][0].content | contains(\"is 42\")" >/dev/null'
}
check "mcp: a scripted model calls a tool of an MCP server over Streamable HTTP and one of a Python server over stdio; offered with the server's schema, answered, in the transcript; clawctl mcp lists and shows both connected; supervised, a call waits for approval and runs once" check_mcp_tool

# The audit trail: each MCP call has its tool-call record in vm-mcp's
# database, under its MCP name, with its arguments, result and session,
# as a WASM tool's call has (59-agent-turns.sh).
check_mcp_tool_call_records() {
  local db; db=$(mktemp -d)
  vm_copy_agent_db vm-mcp "$db" || { rm -rf "$db"; return 1; }
  python3 - "$db/workspace.db" <<'PY'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "SELECT c.name, c.parameters, c.result, c.error, m.session_id FROM tool_calls c"
    " LEFT JOIN clawos_tool_call_meta m ON m.call_id = c.id ORDER BY c.id").fetchall()
assert [r[0] for r in rows] == ["mcp.everything.get-sum", "mcp.time.get_current_time", "mcp.everything.get-sum"], rows
assert [json.loads(r[1]) for r in rows] == [{"a": 2, "b": 3}, {"timezone": "Europe/Paris"}, {"a": 40, "b": 2}], rows
assert "is 5" in rows[0][2] and "Europe/Paris" in rows[1][2] and "is 42" in rows[2][2], rows
assert all(r[3] is None and r[4] for r in rows), rows
PY
  local status=$?; rm -rf "$db"; return $status
}
check "mcp: each MCP call has its tool-call record in the agent's database: its MCP name, arguments, result and session" check_mcp_tool_call_records

# Local servers: the same reference server over standard input and output,
# started by agent-loop through the sandbox launcher (clawos-mcp-launch) as
# a transient unit of its own. Agent vm-mcp-local (autonomy full) has two:
# `local` with no network and a secret variable from the vault, `net`
# granted 127.0.0.1 only. Each is started by probe.sh, which first records
# from inside the unit what it is, what it can reach and a digest of its
# secret, then runs the server.
LOCAL_PORT=18112
# The filesystem server's (check_filesystem_server) state directory.
FILES_STATE=/var/lib/clawos-mcp/vm-mcp-local/files
LOCAL_UNITS='clawos-mcp-vm-mcp-local_*'

# Under emulation one server alone started in about 6 s (the cold start
# this file prints), but two at once, after the probe's connection attempts
# (up to 3 s each), passed the default 30 s once: a start limit of 120 s.
local_servers_table() { # ADDRESS: the guest's own address, probed as the box's sshd
  local command="command = [\"$MCP_DIR/probe.sh\", \"/usr/bin/node\", \"$EVERYTHING\", \"stdio\"]"
  printf '[mcp.servers.local]\n%s\nenv = { PROBE = "127.0.0.1:22 %s:22 1.1.1.1:443" }\nsecret_env = { PROBE_SECRET = "mcp-test-probe" }\ncall_timeout_s = 5\nstart_timeout_s = 120\n' \
    "$command" "$1"
  printf '[mcp.servers.net]\n%s\nenv = { PROBE = "127.0.0.1:22 %s:22" }\nnetwork_allow = ["127.0.0.1"]\nstart_timeout_s = 120\n' \
    "$command" "$1"
}

check_local_server() {
  local script address
  script=$(jq -cn --argjson r1 "$(tool_call_reply local-1 mcp_local_get-sum '{"a": 1, "b": 2}')" \
                  --argjson r2 "$(text_reply "The sum is 3." 100 4)" \
                  --argjson r3 "$(tool_call_reply local-2 mcp_local_trigger-long-running-operation '{"duration": 30, "steps": 30}')" \
                  --argjson r4 "$(text_reply "The server was killed." 100 4)" \
                  --argjson r5 "$(tool_call_reply local-3 mcp_local_trigger-long-running-operation '{"duration": 30, "steps": 1}')" \
                  --argjson r6 "$(text_reply "The server hung." 100 4)" \
                  --argjson r7 "$(tool_call_reply files-1 mcp_files_write_file "{\"path\": \"$FILES_STATE/note.txt\", \"content\": \"written in the sandbox\"}")" \
                  --argjson r8 "$(tool_call_reply files-2 mcp_files_write_file '{"path": "/usr/share/zoneinfo/clawos-note.txt", "content": "x"}')" \
                  --argjson r9 "$(tool_call_reply files-3 mcp_files_list_allowed_directories '{}')" \
                  --argjson r10 "$(text_reply "Files done." 100 4)" \
                  '{replies: [$r1, $r2, $r3, $r4, $r5, $r6, $r7, $r8, $r9, $r10]}') &&
    vm_push "$REPO/tests/mcp-servers/probe.sh" "$MCP_DIR/probe.sh" &&
    address=$(vm_ssh "ip -4 -o addr show scope global | awk '{ print \$4 }' | cut -d/ -f1 | head -n1") && [[ -n $address ]] &&
    scripted_agent vm-mcp-local "$LOCAL_PORT" "$script" &&
    vm_push <(local_servers_table "$address") /run/clawos-test/mcp-local.toml || return 1
  vm_ssh "ADDRESS=$address LOCAL_UNITS='$LOCAL_UNITS'"'
    set -e
    d=/clawfs/agents/vm-mcp-local
    canary=mcp-probe-canary-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
    echo "$canary" | clawctl secret set mcp-test-probe >/dev/null
    cat /run/clawos-test/mcp-local.toml >> $d/config.toml
    out=$(clawctl chat --agent vm-mcp-local -m "Add 1 and 2." --json) || { echo "$out"; exit 1; }
    echo "$out" | jq -e ".status == \"done\" and .tool_calls == 1 and .answer == \"The sum is 3.\"" >/dev/null || { echo "$out"; exit 1; }
    sed -n 2p /run/clawos-test/clawos-test-vm-mcp-local.jsonl |
      jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"local-1\")][0].content | contains(\"is 3\")" >/dev/null
    status=$(clawctl mcp status --agent vm-mcp-local --json)
    echo "$status" | jq -e "[.servers[] | .state] == [\"connected\", \"connected\"]" >/dev/null || { echo "$status"; exit 1; }
    unit=clawos-mcp-vm-mcp-local_local.service
    # The unit: a dynamic user, the launcher'"'"'s limits and confinement,
    # in the MCP servers'"'"' slice, bound to agent-loop.
    systemctl show $unit -p DynamicUser -p ProtectSystem -p PrivateNetwork -p NoNewPrivileges -p MemoryMax -p TasksMax \
      -p CPUQuotaPerSecUSec -p Slice -p BindsTo -p UID > /run/clawos-test/mcp-unit.txt
    for want in DynamicUser=yes ProtectSystem=strict PrivateNetwork=yes NoNewPrivileges=yes MemoryMax=536870912 TasksMax=64 \
                CPUQuotaPerSecUSec=1s Slice=clawos-mcp.slice; do
      grep -qx "$want" /run/clawos-test/mcp-unit.txt || { echo "$unit: not $want"; cat /run/clawos-test/mcp-unit.txt; exit 1; }
    done
    grep -q "^BindsTo=.*clawos-agent-loop.service" /run/clawos-test/mcp-unit.txt
    uid=$(sed -n "s/^UID=//p" /run/clawos-test/mcp-unit.txt)
    # What the server found from inside: its own user, no /clawfs, a
    # read-only /usr, nothing of the network; `net` reaches the one
    # address granted, not the box'"'"'s own address.
    probe=/var/lib/private/clawos-mcp/vm-mcp-local
    expect() { grep -qx "$2" $probe/$1/probe || { echo "$1: not \"$2\""; cat $probe/$1/probe; exit 1; }; }
    expect local "uid $uid"; test "$uid" -ge 61184
    expect local "/clawfs hidden"; expect local "/usr read-only"
    expect local "127.0.0.1:22 closed"; expect local "$ADDRESS:22 closed"; expect local "1.1.1.1:443 closed"
    expect net "127.0.0.1:22 open"; expect net "$ADDRESS:22 closed"
    # The secret variable reached the server, and its value is nowhere
    # else: not in the agent'"'"'s config, the unit, a command line or the
    # journal (of the launcher, agent-loop, the server'"'"'s unit).
    expect local "secret $(printf %s "$canary" | sha256sum | cut -d" " -f1)"
    expect net "secret none"
    # (From a file: grep'"'"'s own arguments are in what ps lists.)
    printf %s "$canary" > /run/clawos-test/mcp-canary
    if { cat $d/config.toml; systemctl show $unit; cat /run/systemd/transient/$unit; ps -eo args; journalctl -b -o cat; } 2>/dev/null |
      grep -F -f /run/clawos-test/mcp-canary; then echo "the secret variable was seen outside the server"; exit 1; fi
    test "$(systemctl list-units --no-legend --plain "$LOCAL_UNITS" | wc -l)" = 2'
}
check "mcp: a local MCP server runs as a transient unit of its own (dynamic user, limits, no /clawfs, read-only /usr, no network but what is granted, its secret variable from the vault and seen nowhere else); a scripted model calls its tool" check_local_server
log "mcp: systemd-analyze security of a server's unit: $(vm_ssh 'systemd-analyze security --no-pager clawos-mcp-vm-mcp-local_local.service | tail -n1' 2>/dev/null)"

# The servers running for vm-mcp-local, as "units processes": each unit
# holds one server, and no server process runs outside a unit. A server
# process is node running the entry point (systemd-run's own command line,
# in the launcher's unit, names them too, after its options; [n]: nor does
# this pattern match the shell running pgrep).
count_local() {
  vm_ssh "echo \$(systemctl list-units --no-legend --plain '$LOCAL_UNITS' | wc -l) \$(pgrep -fc '^/usr/bin/[n]ode $EVERYTHING stdio')"
}
# until_count WANT: waits up to 60 s for count_local to say WANT (a server
# starts in 10 to 30 s under emulation).
until_count() {
  local now
  for _ in $(seq 120); do now=$(count_local) && [[ $now == "$1" ]] && return 0; sleep 0.5; done
  echo "units and server processes: $now (want $1)"; return 1
}
main_pid() { vm_ssh "systemctl show -P MainPID clawos-mcp-vm-mcp-local_$1.service"; }

check_local_server_failures() {
  local before
  before=$(main_pid local) || return 1
  # Killed mid-call: the call fails and says so; the next turn starts it
  # again. Until then its progress notifications are the turn's events.
  vm_ssh '(timeout 120 clawctl events --name tool.progress > /run/clawos-test/mcp-progress.jsonl 2>/dev/null < /dev/null &)
    sleep 1
    (clawctl chat --agent vm-mcp-local -m "Run the long operation." --json > /run/clawos-test/mcp-killed.json 2>&1 &)
    for _ in $(seq 100); do [ "$(wc -l < /run/clawos-test/clawos-test-vm-mcp-local.jsonl)" -ge 3 ] && break; sleep 0.2; done
    sleep 3; systemctl kill -s KILL clawos-mcp-vm-mcp-local_local.service
    for _ in $(seq 100); do jq -e .status /run/clawos-test/mcp-killed.json >/dev/null 2>&1 && break; sleep 0.3; done
    jq -e ".status == \"done\" and .answer == \"The server was killed.\"" /run/clawos-test/mcp-killed.json >/dev/null || { cat /run/clawos-test/mcp-killed.json; exit 1; }
    sed -n 4p /run/clawos-test/clawos-test-vm-mcp-local.jsonl |
      jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"local-2\")][0].content | contains(\"connection closed\") and contains(\"started again\")" >/dev/null
    jq -se "[.[] | .payload | select(.event_name == \"tool.progress\") | .event_data
             | select(.agent == \"vm-mcp-local\" and .tool_name == \"mcp.local.trigger-long-running-operation\" and .total == 30)] | length >= 1" \
      /run/clawos-test/mcp-progress.jsonl >/dev/null || { echo "no progress event"; cat /run/clawos-test/mcp-progress.jsonl; exit 1; }' || return 1
  until_count "1 1" || return 1
  # Silent past its call_timeout_s (5 s): a hang, stopped and started again.
  vm_ssh 'out=$(clawctl chat --agent vm-mcp-local -m "Run it again." --json) || { echo "$out"; exit 1; }
    echo "$out" | jq -e ".status == \"done\" and .answer == \"The server hung.\"" >/dev/null || { echo "$out"; exit 1; }
    sed -n 6p /run/clawos-test/clawos-test-vm-mcp-local.jsonl |
      jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"local-3\")][0].content | contains(\"no answer within 5 s\")" >/dev/null' || return 1
  until_count "1 1" || return 1
  # Both connected again once the backoff has passed.
  vm_ssh 'for _ in $(seq 60); do
      clawctl mcp status --agent vm-mcp-local --json | jq -e "[.servers[] | .state] == [\"connected\", \"connected\"]" >/dev/null && exit 0
      sleep 1
    done; clawctl mcp status --agent vm-mcp-local; exit 1' &&
    until_count "2 2" && [[ $(main_pid local) != "$before" ]]
}
check "mcp: a local server's progress is published as the turn's events; killed mid-call and silent past its time limit, it is reported to the model, stopped and started again" check_local_server_failures

check_no_orphans() {
  local before
  before=$(main_pid local) || return 1
  # A restart: the old unit is gone, one new one runs. How long the new
  # one takes from the restart to its tools listed, its unit's start and
  # Node.js's included, is printed (under emulation).
  vm_ssh 'start=$(date +%s%N); clawctl mcp restart --agent vm-mcp-local local >/dev/null
    for _ in $(seq 120); do
      clawctl mcp status --agent vm-mcp-local --json | jq -e "[.servers[] | select(.server == \"local\")][0].state == \"connected\"" >/dev/null &&
        { echo $(( ($(date +%s%N) - start) / 1000000 )) > /run/clawos-test/mcp-cold-start-ms; exit 0; }
      sleep 0.5
    done; exit 1' && until_count "2 2" && [[ $(main_pid local) != "$before" ]] || return 1
  before=$(main_pid local)
  # A config edit: `net` removed, `local` changed; one unit, one process.
  vm_ssh 'd=/clawfs/agents/vm-mcp-local
    sed -e "/^\[mcp.servers.net\]/,\$d" -e "s/^call_timeout_s = 5/call_timeout_s = 6/" $d/config.toml > /run/clawos-test/mcp-edit.toml &&
    cat /run/clawos-test/mcp-edit.toml > $d/config.toml && clawctl mcp status --agent vm-mcp-local >/dev/null' &&
    until_count "1 1" && [[ $(main_pid local) != "$before" ]] || return 1
  # agent-loop crashes: its servers stop with it; it starts them again.
  vm_ssh 'systemctl kill -s KILL clawos-agent-loop.service' && until_count "0 0" || return 1
  vm_ssh 'for _ in $(seq 60); do systemctl is-active -q clawos-agent-loop && clawctl mcp status --agent vm-mcp-local >/dev/null 2>&1 && exit 0; sleep 1; done; exit 1' &&
    until_count "1 1"
}
check "mcp: no server outlives its connection: after a restart, a config edit and a crash of agent-loop, each (agent, server) has one unit and no process runs outside it" check_no_orphans
log "mcp: a local server's cold start under its unit, from the restart to its tools listed: $(vm_ssh 'cat /run/clawos-test/mcp-cold-start-ms' 2>/dev/null) ms"
# The reference filesystem server, allowed its state directory, a system
# directory and the agent's own directory: the unit's view decides what it
# gets of them. Writing in its state directory works; in /usr/share the
# write fails (read-only); /clawfs is not there for it at all.
check_filesystem_server() {
  local fs_entry=$TEST_MCP/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
  vm_push <(printf '[mcp.servers.files]\ncommand = ["/usr/bin/node", "%s", "%s", "/usr/share/zoneinfo", "/clawfs/agents/vm-mcp-local"]\nstart_timeout_s = 120\n' \
      "$fs_entry" "$FILES_STATE") /run/clawos-test/mcp-files.toml || return 1
  vm_ssh "FILES_STATE=$FILES_STATE"'
    set -e
    cat /run/clawos-test/mcp-files.toml >> /clawfs/agents/vm-mcp-local/config.toml
    out=$(clawctl chat --agent vm-mcp-local -m "Write a note, then try /usr/share." --json) || { echo "$out"; exit 1; }
    echo "$out" | jq -e ".status == \"done\" and .tool_calls == 3 and .answer == \"Files done.\"" >/dev/null || { echo "$out"; exit 1; }
    log=/run/clawos-test/clawos-test-vm-mcp-local.jsonl
    result() { sed -n "$1p" $log | jq -r "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"$2\")][0].content"; }
    result 8 files-1 | grep -q "Successfully wrote" || { result 8 files-1; exit 1; }
    result 9 files-2 | grep -qi "read-only file system" || { echo "a write in /usr/share: $(result 9 files-2)"; exit 1; }
    dirs=$(result 10 files-3)
    echo "$dirs" | grep -q "clawos-mcp/vm-mcp-local/files" && echo "$dirs" | grep -q "/usr/share/zoneinfo" &&
      ! echo "$dirs" | grep -q "/clawfs" || { echo "allowed: $dirs"; exit 1; }
    test "$(cat /var/lib/private/clawos-mcp/vm-mcp-local/files/note.txt)" = "written in the sandbox"'
}
check "mcp: the reference filesystem server in its unit writes its state directory, not /usr/share (read-only), and does not see /clawfs" check_filesystem_server
vm_ssh 'systemctl stop clawos-test-mcp clawos-test-vm-mcp clawos-test-vm-mcp-local' >/dev/null 2>&1 || true
