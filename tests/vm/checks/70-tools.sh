# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# WASM tools through the wasm-daemon (issue 6): a real call, a limit, a denial.

# The hostile tools are test code the image does not carry (tests/tools,
# built by make tools into out/test-tools): installed the way an operator
# installs any tool (install_test_tool, tests/vm/lib.sh).
TEST_TOOLS=(spin-forever memory-bomb huge-output fork-bomb path-escape)
install_test_tools() {
  local tool
  for tool in "${TEST_TOOLS[@]}"; do
    install_test_tool "$tool" || return 1
  done
  # Each listed as installed, under its name, with the definition's grants and limits.
  vm_ssh 'clawctl tool list --json' | jq -e --slurpfile want "$OUT/test-tools/registry.json" '
    [.tools[] | select(.source == "installed")] as $have
    | all($ARGS.positional[]; . as $t | ($want[0].tools[] | select(.tool_id == $t)) as $w
        | any($have[]; .tool_name == $t and .capabilities == $w.capabilities and .memory_limit_mb == $w.memory_limit_mb
              and .cpu_quota_percent == $w.cpu_quota_percent and .timeout_seconds == $w.timeout_seconds))' --args "${TEST_TOOLS[@]}"
}
check "tools: the hostile test tools install from the host with their own capabilities and limits" install_test_tools
check "tools: text-stats runs through execute_tool" \
  vm_ssh 'clawctl ipc call wasm-daemon execute_tool '"'"'{"tool_name":"text-stats","arguments":{"text":"one two\nthree"},"agent":"wasm-agent"}'"'"' | jq -e ".result.words == 3"'
# The image's tools were compiled at image build (specs/toolhost/README.md,
# "Precompiled cache"): each has its artifact on the root, and the daemon,
# which has loaded every one by now, wrote none of them to its cache,
# where a compile at boot would have put it.
check "tools: the image's tools load from the artifacts compiled at image build, none compiled at boot" vm_ssh '
  for h in $(jq -r ".tools[].wasm_hash | ltrimstr(\"sha256:\")" /usr/lib/clawos/tools/registry.json); do
    ls /usr/lib/clawos/tools/precompiled/$h-*.cwasm >/dev/null || exit 1
    if ls /var/lib/clawos/wasm-daemon/cache/$h-* 2>/dev/null; then echo "compiled at boot: $h"; exit 1; fi
  done
  loaded=$(journalctl -b -u clawos-wasm-daemon -o cat | grep -c "tool loaded")
  [ "$loaded" -ge "$(jq ".tools | length" /usr/lib/clawos/tools/registry.json)" ] || { echo "$loaded tools loaded"; exit 1; }'
check "tools: spin-forever is stopped by its 2 s timeout and the daemon keeps serving" vm_ssh '
  restarts=$(systemctl show -P NRestarts clawos-wasm-daemon)
  # A first call compiles the tool if it is not compiled yet (tens of seconds
  # on a slow emulated boot): only the second is timed.
  clawctl ipc call wasm-daemon execute_tool "{\"tool_name\":\"spin-forever\",\"agent\":\"wasm-agent\"}" >/dev/null 2>&1
  start=$(date +%s)
  out=$(clawctl ipc call wasm-daemon execute_tool "{\"tool_name\":\"spin-forever\",\"agent\":\"wasm-agent\"}" 2>&1)
  echo "$out"; echo "$out" | grep -q "ETIMEOUT.*timed out after 2s" || exit 1
  test $(( $(date +%s) - start )) -lt 10 || { echo "the timeout took too long"; exit 1; }
  clawctl ipc call wasm-daemon execute_tool "{\"tool_name\":\"text-stats\",\"arguments\":{\"text\":\"x\"},\"agent\":\"wasm-agent\"}" | jq -e ".result.bytes == 1" &&
    test "$(systemctl show -P NRestarts clawos-wasm-daemon)" = "$restarts"'
# The tool cgroups (specs/toolhost/README.md, cgroup v2): the call's thread
# runs in daemon/tool-<id> with cpu.max at the tool's cpu_quota_percent (5 %
# for spin-forever), so two seconds of spinning get about 0.1 s of CPU and
# the cgroup counts the throttling; pids.max is the concurrent calls' bound
# (the kernel applies it to threads created in the cgroup, which WASI gives
# a tool no way to do, so it is read back, not driven).
check "tools: a spinning tool's thread is held to its cpu.max in its own threaded cgroup (throttled, at most 0.5 s of CPU in a 2 s call)" vm_ssh '
  cg=/sys/fs/cgroup/clawos.slice/clawos-wasm-daemon.service/daemon/tool-spin-forever
  test "$(cat $cg/cgroup.type)" = threaded && test "$(cat $cg/cpu.max)" = "5000 100000" && test "$(cat $cg/pids.max)" = 32 ||
    { echo "$cg: $(cat $cg/cgroup.type) cpu.max $(cat $cg/cpu.max) pids.max $(cat $cg/pids.max)"; exit 1; }
  cpu() { awk -v k=$1 "\$1 == k { print \$2 }" $cg/cpu.stat; }
  usage=$(cpu usage_usec) throttled=$(cpu nr_throttled)
  clawctl ipc call wasm-daemon execute_tool "{\"tool_name\":\"spin-forever\",\"agent\":\"wasm-agent\"}" 2>&1 | grep -q ETIMEOUT || exit 1
  used=$(( $(cpu usage_usec) - usage )); throttled=$(( $(cpu nr_throttled) - throttled ))
  echo "spin-forever: ${used} us of CPU in its call, throttled $throttled times"
  test $used -gt 0 && test $used -le 500000 && test $throttled -ge 1'
# pids.max driven, not read back: no WASM tool can start a thread, so
# clawos-pids-probe (tests/vm/pids-probe, test code the image does not
# carry) stands in for a tool's thread that could, in tool-spin-forever's
# cgroup, and starts threads until the kernel refuses one.
check_tool_pids_max() {
  vm_push "${CARGO_TARGET_DIR:-$REPO/target}/release/clawos-pids-probe" /run/clawos-test/clawos-pids-probe || return 1
  vm_ssh '
    cg=/sys/fs/cgroup/clawos.slice/clawos-wasm-daemon.service/daemon/tool-spin-forever
    refusals() { awk "\$1 == \"max\" { print \$2 }" $cg/pids.events; }
    before=$(refusals)
    out=$(/run/clawos-test/clawos-pids-probe $cg) || { echo "$out"; exit 1; }
    echo "$out"
    echo "$out" | jq -e ".eagain and .pids_max == \"32\" and .pids_current == .pids_max and .started >= 1" >/dev/null &&
      test "$(refusals)" -gt "$before" && test "$(cat $cg/pids.current)" = 0'
}
check "tools: a tool's cgroup refuses a task past its pids.max (32): threads started in it until clone fails with EAGAIN, counted in pids.events" check_tool_pids_max
check "tools: scratchpad notes survive a daemon restart (kept in the agent's workspace)" vm_ssh '
  clawctl tool run scratchpad "{\"op\":\"set\",\"key\":\"plan\",\"value\":\"boot check\"}" --agent wasm-agent >/dev/null || exit 1
  systemctl restart clawos-wasm-daemon || exit 1
  clawctl tool run scratchpad "{\"op\":\"get\",\"key\":\"plan\"}" --agent wasm-agent | jq -e ".value == \"boot check\""'
check "tools: file-read is refused a path outside its prefix" \
  vm_ssh 'clawctl ipc call wasm-daemon execute_tool '"'"'{"tool_name":"file-read","arguments":{"path":"/clawfs/vault/x"},"agent":"wasm-agent"}'"'"' 2>&1 | grep -q capability_denied'
# A tool's file writes go to the ClawFS audit log as fs-engine's do (the
# unit may append to it): here a refused one, which needs no writable workspace.
check "tools: a tool's refused write is in the ClawFS audit log" vm_ssh '
  clawctl tool run file-write "{\"path\":\"/clawfs/vault/planted\",\"text\":\"x\"}" --agent wasm-agent 2>&1 | grep -q capability_denied || exit 1
  test ! -e /clawfs/vault/planted &&
    grep -q "\[WARN\] agent=wasm-agent operation=write path=/clawfs/vault/planted denied=true reason=.* caller=tool:file-write$" /var/log/clawos/clawfs-audit.log'
# fork-bomb holds by construction: WASI offers a tool no way to start a
# process or a thread, so the check is that each attempt fails and says so.
check "tools: the hostile tools are contained with their own errors (fork-bomb finds no process or thread to start) and the daemon is never restarted" vm_ssh '
  restarts=$(systemctl show -P NRestarts clawos-wasm-daemon)
  run() { clawctl tool run "$1" --agent wasm-agent 2>&1; }
  run memory-bomb | grep -q "out_of_memory" || { run memory-bomb; exit 1; }
  run huge-output | grep -q "invalid_output.*exceeds" || { run huge-output; exit 1; }
  run fork-bomb | jq -e ".processes_started == 0 and .threads_started == 0" >/dev/null || { run fork-bomb; exit 1; }
  clawctl tool run path-escape "{\"paths\":[\"/clawfs/workspaces/../vault/master-key.enc\"]}" --agent wasm-agent 2>&1 | grep -q capability_denied || exit 1
  test "$(systemctl show -P NRestarts clawos-wasm-daemon)" = "$restarts"'
# "Seccomp: 2" holds for every unit with systemd's SystemCallFilter=, so the
# count of filters is what shows the daemon's own: one more than systemd
# gave it, on every thread (TSYNC), as its start-up log says.
check "tools: the daemon runs under its own seccomp filter on every thread: one filter more than systemd's" vm_ssh '
  pid=$(systemctl show -P MainPID clawos-wasm-daemon)
  line=$(journalctl -b -u clawos-wasm-daemon -o cat | grep "seccomp filter installed" | tail -n 1); echo "$line"
  before=$(echo "$line" | sed -n "s/.*filters per thread: \([0-9]*\) -> \([0-9]*\)).*/\1/p")
  after=$(echo "$line" | sed -n "s/.*filters per thread: \([0-9]*\) -> \([0-9]*\)).*/\2/p")
  [ -n "$before" ] && [ "$after" = $((before + 1)) ] || exit 1
  for task in /proc/$pid/task/*; do
    n=$(sed -n "s/^Seccomp_filters:[[:space:]]*//p" $task/status)
    [ "$n" = "$after" ] || { echo "thread ${task##*/}: $n filters, not $after"; exit 1; }
  done
  echo "$(ls /proc/$pid/task | wc -l) threads, each under $after filters"'
# specs/toolhost/seccomp.md, "Checking the filter": the daemon's binary,
# as shipped, installs its filter in a child process on this kernel and
# calls ptrace; the child dies of SIGSYS and the kernel's audit record of
# the kill (journald's audit transport or the kernel log) names it.
check "tools: wasm-daemon's seccomp filter kills an unlisted system call (ptrace) with SIGSYS in the booted kernel, and the kill's audit record is in the journal" vm_ssh '
  out=$(clawos-wasm-daemon --check-seccomp) || { echo "$out"; exit 1; }
  echo "$out"
  pid=$(echo "$out" | sed -n "s/.*killed process \([0-9]*\) .*/\1/p")
  test -n "$pid" || exit 1
  for _ in $(seq 20); do
    journalctl -b -o cat | grep -E "(type=1326|SECCOMP) .*pid=$pid .*sig=31 .*syscall=101" && exit 0
    sleep 0.5
  done
  journalctl -b -o cat | grep -E "type=1326|SECCOMP" | tail -n 3; exit 1'

# web-fetch is install-only: its network grant is the operator's choice. A
# test server on the host (QEMU user networking: 10.0.2.2 is the host's
# loopback) answers with the path and the Authorization header it received,
# so the tool's view of an injected credential can be checked, and logs
# path, Authorization, Host and Accept-Encoding as the request arrived.
TOOLS_HTTP_PORT=$(free_port)
TOOLS_HTTP_LOG="$OUT/vm/tools-http.log"
: > "$TOOLS_HTTP_LOG"
python3 - "$TOOLS_HTTP_PORT" "$TOOLS_HTTP_LOG" <<'PY' &
import http.server, json, sys
port, log = int(sys.argv[1]), sys.argv[2]
class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        with open(log, "a") as f:
            f.write(f"{self.path}|{auth}|{self.headers.get('Host', '')}|{self.headers.get('Accept-Encoding', '')}\n")
        body = json.dumps({"path": self.path, "authorization": auth}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Echo).serve_forever()
PY
TOOLS_HTTP_PID=$!
TOOLS_TOKEN="vmtest-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
check "tools: clawctl tool install shows the grants and installs web-fetch into /clawfs/tools" vm_ssh "
  printf %s '$TOOLS_TOKEN' | clawctl secret set tool-vmtest-token || exit 1
  printf '[[credential]]\nhost = \"10.0.2.2:$TOOLS_HTTP_PORT\"\nheader = \"authorization\"\nsecret = \"tool-vmtest-token\"\nformat = \"Bearer {secret}\"\ntools = [\"web-fetch\"]\n' > /clawfs/tools/credentials.toml
  out=\$(clawctl tool install /usr/lib/clawos/tools/web-fetch-v0.1.0.wasm --definition /usr/lib/clawos/tools/web-fetch.json \
    --grant network:outbound:10.0.2.2:$TOOLS_HTTP_PORT --yes) || { echo \"\$out\"; exit 1; }
  echo \"\$out\" | grep -q '^  network:outbound:10.0.2.2:$TOOLS_HTTP_PORT\$' || { echo \"\$out\"; exit 1; }
  clawctl tool list | grep -q '^web-fetch .* installed ' && test -f /clawfs/tools/binaries/web-fetch-v0.1.0.wasm"
# The rule above names no scheme, so it is an https rule: a plain-http URL
# to the same host and port gets no credential (specs/toolhost/README.md,
# "HTTP"), and the Host and Accept-Encoding the tool sets are replaced.
tools_fetch_over_plain_http() {
  local out
  out=$(vm_ssh "clawctl tool run web-fetch '{\"url\":\"http://10.0.2.2:$TOOLS_HTTP_PORT/bare\",\"headers\":{\"Host\":\"attacker-app.example\",\"Accept-Encoding\":\"deflate\"}}' --agent wasm-agent") || { echo "$out"; return 1; }
  echo "$out"
  jq -e '.status == 200 and (.body | fromjson | .path == "/bare" and .authorization == "")' <<<"$out" >/dev/null &&
    grep -qx "/bare||10.0.2.2:$TOOLS_HTTP_PORT|identity" "$TOOLS_HTTP_LOG"
}
check "tools: an https credential rule sends nothing over plain http, and a tool's Host and Accept-Encoding headers are replaced" tools_fetch_over_plain_http
# The server logged the real token; the tool saw the whole header value
# (Bearer and token) replaced by the marker.
tools_fetch_with_credential() {
  local out
  vm_ssh "sed -i 's/^header = /scheme = \"http\"\\nheader = /' /clawfs/tools/credentials.toml" || return 1
  out=$(vm_ssh "clawctl tool run web-fetch '{\"url\":\"http://10.0.2.2:$TOOLS_HTTP_PORT/hello\"}' --agent wasm-agent") || { echo "$out"; return 1; }
  echo "$out"
  jq -e '.status == 200 and (.body | fromjson | .path == "/hello" and .authorization == "[REDACTED]")' <<<"$out" >/dev/null &&
    ! grep -q "$TOOLS_TOKEN" <<<"$out" &&
    grep -qx "/hello|Bearer $TOOLS_TOKEN|10.0.2.2:$TOOLS_HTTP_PORT|identity" "$TOOLS_HTTP_LOG"
}
check "tools: web-fetch reaches the granted host with the credential of an explicit http rule, which the tool only sees redacted" tools_fetch_with_credential
check "tools: web-fetch is refused a host it was not granted, and nothing reaches it" vm_ssh "
  clawctl tool run web-fetch '{\"url\":\"http://10.0.2.2:$((TOOLS_HTTP_PORT + 1))/\"}' --agent wasm-agent 2>&1 | grep -q 'capability_denied.*not a granted'"
check "tools: a component whose bytes differ from the pinned hash is refused" vm_ssh "
  hash=\$(sha256sum /usr/lib/clawos/tools/text-stats-v0.1.0.wasm | cut -d' ' -f1)
  printf '{\"wasm_hash\": \"sha256:%s\", \"capabilities\": [\"network:outbound:10.0.2.2\"]}' \$hash > /run/pinned.json
  cp /usr/lib/clawos/tools/web-fetch-v0.1.0.wasm /run/web-fetch-v0.2.0.wasm
  clawctl tool install /run/web-fetch-v0.2.0.wasm --definition /run/pinned.json --yes 2>&1 | grep -q 'wasm_hash'"
check "tools: clawctl tool rm removes the installed tool" vm_ssh '
  clawctl tool rm web-fetch && ! clawctl tool list | grep -q "^web-fetch " &&
    clawctl tool run web-fetch "{}" --agent wasm-agent 2>&1 | grep -q "unknown tool" &&
    test ! -e /clawfs/tools/binaries/web-fetch-v0.1.0.wasm'
kill "$TOOLS_HTTP_PID" 2>/dev/null || true

# memory-recall is install-only too: which workspaces it may search is the
# operator's grant; fs-engine answers through the daemon.
check "tools: memory-recall finds indexed memory in its granted workspace and is refused another" vm_ssh '
  set -e
  clawctl workspace create vm-recall >/dev/null
  printf "# Birds\nThe kingfisher dives for minnows.\n" > /tmp/vm-recall.md
  clawctl memory index -w vm-recall /tmp/vm-recall.md >/dev/null
  clawctl tool install /usr/lib/clawos/tools/memory-recall-v0.1.0.wasm --definition /usr/lib/clawos/tools/memory-recall.json \
    --grant memory:search:vm-recall --yes >/dev/null
  out=$(clawctl tool run memory-recall "{\"workspace\":\"vm-recall\",\"query\":\"kingfisher\"}" --agent wasm-agent)
  echo "$out"
  echo "$out" | jq -e "any(.results[]; .path | endswith(\"vm-recall.md\")) and (.keyword_leg | startswith(\"ran\"))" >/dev/null
  clawctl tool run memory-recall "{\"workspace\":\"default\",\"query\":\"x\"}" --agent wasm-agent 2>&1 | grep -q capability_denied
  clawctl tool rm memory-recall >/dev/null'

# The data partition outlives this boot (the reboot tests): the test tools go
# again. Not a check: removal is checked above with web-fetch.
vm_ssh "for t in ${TEST_TOOLS[*]}; do clawctl tool rm \$t; done" >/dev/null 2>&1 || true
