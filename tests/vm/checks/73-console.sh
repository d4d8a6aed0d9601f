# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The web console (specs/console/README.md), reached as an operator reaches
# it: `clawctl console` on the box prints a one-time link, and an `ssh -L`
# tunnel from the host forwards a local port to the console's Unix socket.
# Requests are curl's, over that tunnel: the login, the overview, the
# agents page's pause and resume (checked with clawctl), and each refusal;
# a browser's follow (74-console-browser.sh).
CONSOLE_SOCKET=/run/clawos-console/console.sock
CONSOLE_DIR=$OUT/vm/console
# A check runs in a subshell (check): the session's cookie is handed on in
# a file, and the tunnel is opened and closed out here.
CONSOLE_PORT="" CONSOLE_TUNNEL=""
console_cookie() { cat "$CONSOLE_DIR/cookie"; }

# Every TCP listener beyond loopback is sshd's. UDP has no listeners, but a
# bound socket beyond loopback is reachable too: only systemd-networkd's
# DHCP clients (68, and 546 for DHCPv6) may have one.
check_console_listeners() {
  vm_ssh 'ss -Htlnp; echo --; ss -Hulnp' > "$CONSOLE_DIR/listeners.txt" || return 1
  awk '
    /^--$/ { udp = 1; next }
    { n = split($4, at, ":"); port = at[n]; address = substr($4, 1, length($4) - length(port) - 1) }
    address ~ /^(127\.[0-9.]+|\[::1\])(%lo)?$/ { next }
    !udp && $0 ~ /users:\(\("sshd",/ { next }
    udp && (port == 68 || port == 546) && $0 ~ /users:\(\("systemd-network",/ { next }
    { print "listens beyond loopback: " $0; bad = 1 }
    END { exit bad }
  ' "$CONSOLE_DIR/listeners.txt" || { cat "$CONSOLE_DIR/listeners.txt"; return 1; }
  grep -q 'users:(("sshd",' "$CONSOLE_DIR/listeners.txt"
}

check_console_socket() {
  vm_ssh 'set -e
    test "$(stat -c "%U %G %a" '"$CONSOLE_SOCKET"')" = "root root 600"
    test "$(stat -c "%U %a" /run/clawos-console/logins)" = "clawos-console 700"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups socat -T 2 - UNIX-CONNECT:'"$CONSOLE_SOCKET"' </dev/null 2>&1) && { echo "nobody connected"; exit 1; }
    echo "$out" | grep -q "Permission denied" || { echo "$out"; exit 1; }
    # Nothing made a listener of its own for it: the socket is systemd'"'"'s.
    ! ss -Htlnp | grep -q clawos-console'
}

# console_curl ARGS...: curl through the tunnel; headers to $CONSOLE_DIR/head.
console_curl() {
  curl -sS --max-time 60 -D "$CONSOLE_DIR/head" -o "$CONSOLE_DIR/body" -w '%{http_code} %{time_total}' "$@"
}

console_header() { tr -d '\r' < "$CONSOLE_DIR/head" | awk -v name="$1" 'tolower($0) ~ "^" name ":" { sub(/^[^:]*: */, ""); print }'; }

check_console_login() {
  local link status ssh_line
  link=$(vm_ssh 'clawctl console --json --port '"$CONSOLE_PORT") || return 1
  ssh_line=$(jq -r .ssh <<<"$link")
  [[ $ssh_line == "ssh -N -L $CONSOLE_PORT:$CONSOLE_SOCKET root@"* ]] || { echo "printed: $ssh_line"; return 1; }
  for _ in $(seq 60); do
    (echo > "/dev/tcp/127.0.0.1/$CONSOLE_PORT") 2>/dev/null && break
    kill -0 "$CONSOLE_TUNNEL" 2>/dev/null || { echo "the tunnel ended"; cat "$CONSOLE_DIR/tunnel.log"; return 1; }
    sleep 0.5
  done
  status=$(console_curl "$(jq -r .url <<<"$link")") || return 1
  [[ $status == 303\ * ]] || { echo "login: $status"; cat "$CONSOLE_DIR/head"; return 1; }
  local cookie
  cookie=$(console_header set-cookie)
  [[ $cookie == clawos_console=* && $cookie == *"; HttpOnly"* && $cookie == *"; SameSite=Strict"* ]] || { echo "cookie: $cookie"; return 1; }
  echo "${cookie%%;*}" > "$CONSOLE_DIR/cookie"
  status=$(console_curl "$(jq -r .url <<<"$link")") || return 1
  [[ $status == 403\ * ]] || { echo "the link worked twice: $status"; return 1; }
}

check_console_overview() {
  local status healthy
  status=$(console_curl -H "Cookie: $(console_cookie)" "http://localhost:$CONSOLE_PORT/") || return 1
  cp "$CONSOLE_DIR/body" "$CONSOLE_DIR/overview.html"
  [[ $status == 200\ * ]] || { echo "overview: $status"; return 1; }
  echo "${status#* }" > "$CONSOLE_DIR/overview-seconds"
  healthy=$(grep -c '<td class="health-healthy">healthy</td>' "$CONSOLE_DIR/body")
  ((healthy == 8)) || { echo "$healthy components healthy"; grep '<tr>' "$CONSOLE_DIR/body"; return 1; }
  console_header content-security-policy | grep -q "default-src 'none'; script-src 'self'" || { cat "$CONSOLE_DIR/head"; return 1; }
}

# console_post PATH [HEADERS...]: a form's POST through the tunnel.
console_post() {
  local path=$1; shift
  console_curl -X POST -H "Content-Length: 0" "$@" "http://localhost:$CONSOLE_PORT$path"
}

agent_state() { vm_ssh 'clawctl agent list' | awk -v a="$1" '$1 == a { print $2 }'; }

check_console_agents() {
  local status
  status=$(console_curl -H "Cookie: $(console_cookie)" "http://localhost:$CONSOLE_PORT/agents") || return 1
  cp "$CONSOLE_DIR/body" "$CONSOLE_DIR/agents.html"
  [[ $status == 200\ * ]] || { echo "agents: $status"; return 1; }
  grep -q '<th scope="row"><a href="/chat/kernel-engine">kernel-engine</a></th>' "$CONSOLE_DIR/body" || { echo "kernel-engine is not listed"; return 1; }
  [[ $(agent_state kernel-engine) == idle ]] || { echo "kernel-engine: $(agent_state kernel-engine)"; return 1; }
  status=$(console_post /agents/kernel-engine/pause -H "Cookie: $(console_cookie)" -H "Origin: http://localhost:$CONSOLE_PORT") || return 1
  [[ $status == 303\ * && $(console_header location) == /agents ]] || { echo "pause: $status"; return 1; }
  [[ $(agent_state kernel-engine) == paused ]] || { echo "after pause: $(agent_state kernel-engine)"; return 1; }
  status=$(console_curl -H "Cookie: $(console_cookie)" "http://localhost:$CONSOLE_PORT/agents") || return 1
  grep -q 'aria-label="Resume kernel-engine"' "$CONSOLE_DIR/body" || { echo "no resume button"; return 1; }
  status=$(console_post /agents/kernel-engine/resume -H "Cookie: $(console_cookie)" -H "Origin: http://localhost:$CONSOLE_PORT") || return 1
  [[ $status == 303\ * ]] || { echo "resume: $status"; return 1; }
  [[ $(agent_state kernel-engine) == idle ]] || { echo "after resume: $(agent_state kernel-engine)"; return 1; }
}

# The overview's live list: the router's events as server-sent events
# (an agent created and removed meanwhile shows up by name). curl writes
# to a file, so the check's own output does not wait for it.
check_console_events() {
  curl -sS -N --max-time 60 -H "Cookie: $(console_cookie)" "http://localhost:$CONSOLE_PORT/events" \
    > "$CONSOLE_DIR/events.txt" 2>&1 < /dev/null &
  local curl=$! found=1
  sleep 2
  vm_ssh 'clawctl agent create vm-console-events >/dev/null && clawctl agent rm vm-console-events >/dev/null' || { kill "$curl"; return 1; }
  for _ in $(seq 60); do
    grep -q 'agent.created <code>.*vm-console-events' "$CONSOLE_DIR/events.txt" && { found=0; break; }
    sleep 0.5
  done
  kill "$curl" 2>/dev/null; wait "$curl" 2>/dev/null
  ((found == 0)) || { echo "no agent.created event streamed:"; head -c 2000 "$CONSOLE_DIR/events.txt"; return 1; }
  grep -q '^event: event$' "$CONSOLE_DIR/events.txt"
}

# Each refusal changes nothing: the agent a refused pause names stays idle.
check_console_refusals() {
  local status url="http://localhost:$CONSOLE_PORT"
  status=$(console_curl -H "Host: evil.example:$CONSOLE_PORT" -H "Cookie: $(console_cookie)" "$url/") || return 1
  [[ $status == 421\ * ]] || { echo "another Host: $status"; return 1; }
  status=$(console_post /agents/kernel-engine/pause -H "Cookie: $(console_cookie)" -H "Origin: http://evil.example") || return 1
  [[ $status == 403\ * ]] || { echo "another Origin: $status"; return 1; }
  status=$(console_post /agents/kernel-engine/pause -H "Cookie: $(console_cookie)") || return 1
  [[ $status == 403\ * ]] || { echo "no Origin: $status"; return 1; }
  status=$(console_curl -H "Cookie: $(console_cookie)" -H "Sec-Fetch-Site: cross-site" "$url/agents") || return 1
  [[ $status == 403\ * ]] || { echo "cross-site: $status"; return 1; }
  status=$(console_post /agents/kernel-engine/pause -H "Origin: http://localhost:$CONSOLE_PORT") || return 1
  [[ $status == 401\ * ]] || { echo "no cookie: $status"; return 1; }
  [[ $(agent_state kernel-engine) == idle ]] || { echo "a refused request paused it"; return 1; }
}

mkdir -p "$CONSOLE_DIR"; : > "$CONSOLE_DIR/cookie"; rm -f "$CONSOLE_DIR/overview-seconds"
CONSOLE_PORT=$(free_port)
# The tunnel as `clawctl console` prints it (its login check compares), to
# the VM's forwarded SSH port; its output to a file, not to a check's.
ssh -i "$KEY" -p "$VM_PORT" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
  -o BatchMode=yes -o ExitOnForwardFailure=yes -N -L "$CONSOLE_PORT:$CONSOLE_SOCKET" root@127.0.0.1 \
  > "$CONSOLE_DIR/tunnel.log" 2>&1 < /dev/null &
CONSOLE_TUNNEL=$!
check "console: no TCP listener beyond loopback but sshd's, no UDP socket beyond it but the DHCP clients'" check_console_listeners
check "console: its socket is root's alone (0600), nobody is refused it, its logins' directory the console user's (0700)" check_console_socket
check "console: through clawctl's ssh -L tunnel, the one-time link opens a session (HttpOnly, SameSite=Strict) and fails the second time" check_console_login
check "console: the overview over the tunnel shows the eight components healthy, with the strict Content-Security-Policy" check_console_overview
check "console: the agents page pauses and resumes kernel-engine, as clawctl agent list then shows" check_console_agents
check "console: the overview's live stream carries the router's events as they happen (an agent created meanwhile)" check_console_events
check "console: another Host (421), another or no Origin (403), a cross-site fetch (403), no cookie (401) are refused and pause nothing" check_console_refusals
# The tunnel stays open for the browser's checks (74-console-browser.sh),
# which close it.
