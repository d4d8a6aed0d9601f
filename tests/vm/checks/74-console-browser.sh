# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The web console in a real browser (specs/console/README.md, "Tested in a
# browser"): Debian's Chromium, driven through chromedriver by
# tests/vm/console-browser on the host, through the SSH tunnel
# 73-console.sh opened (this file closes it). The browser runs its steps
# once, each a line of results.jsonl with screenshots beside it
# ($OUT/vm/console/browser); each check below asserts one step, and what
# the guest shows after it.
BROWSER_DIR=$CONSOLE_DIR/browser
BROWSER_TOKENS=(amber birch cedar dune ember fjord)
# A second between words: more than a word's way to the page under emulation,
# so the page shows each before the next leaves.
BROWSER_EVENT_MS=1000
BROWSER_WRITE=written-from-console-5521

# words_reply DELAY_MS WORD...: an answer streamed a word an event, DELAY_MS apart.
words_reply() {
  local delay=$1 events=() word; shift
  events+=("$(chunk "$(jq -cn --arg t "$1" '{role: "assistant", content: $t}')")"); shift
  for word in "$@"; do events+=("$(chunk "$(jq -cn --arg t " $word" '{content: $t}')")"); done
  jq -cn --argjson d "$delay" '{status: 200, event_delay_ms: $d, events: ($ARGS.positional + ["[DONE]"])}' \
    --args "${events[@]}" "$(chunk '{}' '"stop"')"
}

browser_agents_ready() {
  local chat approve
  chat=$(jq -cn --argjson r1 "$(words_reply "$BROWSER_EVENT_MS" "${BROWSER_TOKENS[@]}")" '{replies: [$r1]}') &&
  approve=$(jq -cn --argjson r1 "$(tool_call_reply br-1 file_write "$(jq -cn --arg c "$BROWSER_WRITE" '{path: "notes/console.md", content: $c}')")" \
                   --argjson r2 "$(text_reply "Saved." 100 2)" '{replies: [$r1, $r2]}') &&
    scripted_agent vm-browser 18120 "$chat" &&
    scripted_agent vm-browser-approve 18121 "$approve" || return 1
  vm_ssh 'set -e
    d=/clawfs/agents/vm-browser-approve
    sed "s/^level = \"full\"/level = \"supervised\"/" $d/config.toml > /run/clawos-test/browser-approve.toml
    cat /run/clawos-test/browser-approve.toml > $d/config.toml
    grep -q "^level = \"supervised\"" $d/config.toml
    printf "The note before the console.\n" > $d/notes.md'
}

# The browser's steps, once: chromedriver on the host's loopback, the login
# link from clawctl, the ssh command that prints the console's RSS while
# ten pages are open.
browser_run() {
  local link driver_port rss_command status=0
  # The console idle, as the browser finds it: curl's requests of
  # 73-console.sh served, no page open.
  vm_ssh 'ps -o rss= -C clawos-console' | tr -d ' ' > "$BROWSER_DIR/rss-idle"
  link=$(vm_ssh 'clawctl console --json --port '"$CONSOLE_PORT" | jq -r .url) || return 1
  driver_port=$(free_port)
  chromedriver --port="$driver_port" --allowed-ips=127.0.0.1 > "$BROWSER_DIR/chromedriver.log" 2>&1 &
  local driver=$!
  for _ in $(seq 50); do (echo > "/dev/tcp/127.0.0.1/$driver_port") 2>/dev/null && break; sleep 0.2; done
  printf -v rss_command '%q ' ssh -i "$KEY" -p "$VM_PORT" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR -o BatchMode=yes root@127.0.0.1 'ps -o rss= -C clawos-console'
  "${CARGO_TARGET_DIR:-$REPO/target}/release/clawos-console-browser" --webdriver "http://127.0.0.1:$driver_port" \
    --base "http://localhost:$CONSOLE_PORT" --login "$link" --box-name "$(vm_ssh cat /proc/sys/kernel/hostname)" \
    --chat-agent vm-browser --tokens "$(IFS=,; echo "${BROWSER_TOKENS[*]}")" \
    --approve-agent vm-browser-approve --write-content "$BROWSER_WRITE" --pause-agent kernel-engine \
    --while-open "$rss_command" --out "$BROWSER_DIR" > "$BROWSER_DIR/run.log" 2>&1 || status=$?
  kill "$driver" 2>/dev/null; wait "$driver" 2>/dev/null
  # A failed step is its own check's failure; a run that reported no step is this one's.
  [[ -s $BROWSER_DIR/results.jsonl ]] || { echo "exit $status"; cat "$BROWSER_DIR/run.log"; return 1; }
}

# browser_step STEP: the step's line passed (slurped: jq -e over lines
# judges by the last line's output, which another step's line leaves empty).
browser_step() {
  jq -se --arg s "$1" 'any(.[]; .step == $s and .ok)' "$BROWSER_DIR/results.jsonl" > /dev/null ||
    { jq -sr --arg s "$1" '[.[] | select(.step == $s)][0].detail // "the step reported no line"' "$BROWSER_DIR/results.jsonl"; return 1; }
}
browser_figure() { jq -r --arg s "$1" "select(.step == \$s) | .figures.$2" "$BROWSER_DIR/results.jsonl"; }

# The words left the provider an event apart (its events log, the guest's
# clock) and were shown as they came: each shown after it left and before
# the last one left, so the answer streamed, not arrived at once. The
# guest's clock against the host's: the midpoint of the shortest of five
# SSH round trips (the error is at most half of it).
check_browser_chat() {
  browser_step chat || return 1
  local before guest after offset rtt=999999
  for _ in 1 2 3 4 5; do
    before=$(date +%s%3N); guest=$(vm_ssh 'date +%s%3N') || return 1; after=$(date +%s%3N)
    if ((after - before < rtt)); then rtt=$((after - before)); offset=$((guest - (before + after) / 2)); fi
  done
  vm_ssh 'cat /run/clawos-test/clawos-test-vm-browser.events.jsonl' > "$BROWSER_DIR/provider-events.jsonl" || return 1
  jq -n --slurpfile sent "$BROWSER_DIR/provider-events.jsonl" --argjson shown "$(browser_figure chat shown_ms)" \
    --argjson offset "$offset" --argjson n "${#BROWSER_TOKENS[@]}" --argjson rtt "$rtt" '
    [$sent[] | select(.reply == 0 and .event < $n) | .at_ms - $offset] as $left
    | [range($n) | $shown[.] - $left[.]] as $latency
    | {latency_ms: $latency, rtt_ms: $rtt, left_host_ms: $left, shown_ms: $shown}
    | if ($left | length) == $n and all($latency[]; . > -($rtt / 2)) and $shown[$n - 2] < $left[$n - 1] then . else error("not streamed: \(.)") end' \
    > "$BROWSER_DIR/latency.json" || { cat "$BROWSER_DIR/latency.json"; return 1; }
}

check_browser_approve() {
  browser_step approve || return 1
  vm_ssh 'set -e
    test "$(cat /clawfs/agents/vm-browser-approve/notes/console.md)" = '"$BROWSER_WRITE"'
    clawctl approvals list --all --json | jq -e "any(.approvals[]; .agent == \"vm-browser-approve\" and .state == \"used\")" >/dev/null'
}

# The edit went through fs-engine as the agent's write, in the audit log
# as the console's, with LF line ends (the browser sends CR LF).
check_browser_memory() {
  browser_step memory || return 1
  vm_ssh 'set -e
    f=/clawfs/agents/vm-browser/memory.md
    grep -qx "The console wrote quokka-4412 here." $f
    ! grep -q $'"'"'\r'"'"' $f
    grep -q "agent=vm-browser operation=write path=/clawfs/agents/vm-browser/memory.md bytes=[0-9]* caller=console$" /var/log/clawos/clawfs-audit.log'
}

check_browser_refusals() {
  browser_step refusals || return 1
  [[ $(agent_state kernel-engine) == idle ]] || { echo "another site's form paused kernel-engine"; return 1; }
}

mkdir -p "$BROWSER_DIR"; rm -f "$BROWSER_DIR"/*.png "$BROWSER_DIR/results.jsonl" "$BROWSER_DIR/rss-idle"
check "console browser: two scripted agents for the browser, one streaming word by word, one supervised" browser_agents_ready
check "console browser: Chromium (chromedriver) runs its steps through the tunnel and reports each" browser_run
check "console browser: the link logs in (the overview, the session cookie unreadable by scripts)" browser_step login
check "console browser: a chat's answer streams into the page word by word as the provider sends it, and the turn ends" check_browser_chat
check "console browser: a supervised file write waits, its diff on the approvals page; approved, the turn finishes and the file is written" check_browser_approve
check "console browser: memory.md edited in the page is saved as the agent's write (audited as the console's) and found by search with both legs' scores" check_browser_memory
check "console browser: every page opens with its heading and labelled controls, the chat's context window lists its parts, and the pages fit a 390 px window" browser_step pages
check "console browser: ten pages open at once, the console's RSS read while they are" browser_step ten-pages
check "console browser: a rebinding name (421), another site's form (403) and no cookie (the login page) are refused; nothing paused" check_browser_refusals
kill "$CONSOLE_TUNNEL" 2>/dev/null || true
[[ ! -s $CONSOLE_DIR/overview-seconds ]] ||
  log "console: the overview over the tunnel in $(cat "$CONSOLE_DIR/overview-seconds") s (curl's time_total; the console already started by the login)"
if [[ -s $BROWSER_DIR/results.jsonl ]]; then
  log "console browser: the first page load (link, redirect, overview) $(browser_figure login first_load_ms) ms (Navigation Timing); the console's RSS idle $(cat "$BROWSER_DIR/rss-idle") KiB, with ten pages open $(browser_figure ten-pages while_open) KiB"
  [[ ! -s $BROWSER_DIR/latency.json ]] ||
    log "console browser: a word from leaving the provider to shown in the page, ms: $(jq -c .latency_ms "$BROWSER_DIR/latency.json") (the clocks matched to ±$(jq '.rtt_ms / 2' "$BROWSER_DIR/latency.json") ms)"
fi
