# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Checkpoints and resume in the booted image (specs/agent/README.md,
# "Checkpoints and resume"): agent-loop is killed with SIGKILL while a turn's
# WASM tool call runs (slow-echo, a test tool brought in over SSH); systemd
# restarts it and it resumes the turn from its checkpoint. First with
# wasm-daemon alive, which finishes the call and records it with its
# idempotency key, so the resumed turn gets that record and the tool runs
# once; then with wasm-daemon killed too, so the call never finished and
# runs again, once. Either way the transcript holds one result per call and
# the agent's tool_calls one row per key. The reboot with a call in flight
# is 99-agent-in-flight-at-reboot.sh and after-reboot/61-resume.sh.

RESUME_PORT=18085

# resume_agent NAME PORT SCRIPT: a scripted agent (59-agent-turns.sh) whose
# provider requests are retried for a few minutes, so a turn resumed before
# its provider is up (at boot) reaches it, and whose turn may take 10 minutes.
resume_agent() {
  scripted_agent "$1" "$2" "$3" &&
    vm_ssh "d=/clawfs/agents/$1
      sed -e 's/^max_retries = 0/max_retries = 200\nbackoff_base_ms = 1000\nbackoff_max_ms = 3000/' \
          -e 's/^\[limits\]/[limits]\nmax_seconds = 600/' \$d/config.toml > /run/clawos-test/$1-resume.toml &&
      cat /run/clawos-test/$1-resume.toml > \$d/config.toml &&
      clawctl ipc call agent-loop agent_show '{\"agent\": \"$1\"}' | jq -e '.state == \"idle\" and .limits.max_seconds == 600' >/dev/null"
}

# record_tool_invoked AGENT: records the router's tool.invoked events into
# /run/clawos-test/events-AGENT.jsonl from now on (for ten minutes).
record_tool_invoked() {
  # Detached from the SSH session (no stdin, stdout or stderr of its own), or
  # the session would wait for it.
  vm_ssh "(timeout 600 clawctl events --name tool.invoked > /run/clawos-test/events-$1.jsonl 2>/dev/null < /dev/null &) && sleep 1"
}

# wait_tool_invoked AGENT N: until the recorded stream shows AGENT's Nth
# tool.invoked; then a moment more, so the call is in wasm-daemon's hands.
wait_tool_invoked() {
  vm_ssh "for _ in \$(seq 300); do
      n=\$(jq -c 'select(.payload.event_name == \"tool.invoked\" and .payload.event_data.agent == \"$1\")' /run/clawos-test/events-$1.jsonl 2>/dev/null | wc -l)
      [ \"\$n\" -ge $2 ] && sleep 1.5 && exit 0; sleep 0.2
    done; echo 'no tool.invoked for $1'; exit 1"
}

# turn_ended_with AGENT SESSION TEXT: waits until the session's last entry is TEXT.
turn_ended_with() {
  vm_ssh "for _ in \$(seq 240); do
      clawctl session show $1 $2 --json 2>/dev/null | jq -e --arg t '$3' '.entries[-1].content == \$t' >/dev/null && exit 0; sleep 0.5
    done; clawctl session show $1 $2 --json; exit 1"
}

# slow_echo_rows AGENT KEY: how many tool_calls rows of slow-echo the agent's
# database holds, and how many of them carry KEY, as "ROWS KEYED".
slow_echo_rows() {
  local db status
  db=$(mktemp -d)
  vm_copy_agent_db "$1" "$db" || { rm -rf "$db"; return 1; }
  python3 - "$db/workspace.db" "$2" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT COUNT(*) FROM tool_calls WHERE name = 'slow-echo'").fetchone()[0]
keyed = db.execute("SELECT COUNT(*) FROM clawos_tool_call_key k JOIN tool_calls c ON c.id = k.call_id WHERE c.name = 'slow-echo' AND k.idempotency_key = ?", (sys.argv[2],)).fetchone()[0]
print(rows, keyed)
PY
  status=$?; rm -rf "$db"; return $status
}

resume_ready() {
  local script
  script=$(jq -cn --argjson r1 "$(tool_call_reply rs-1 slow-echo '{"text": "after the kill", "ms": 6000}')" \
                  --argjson r2 "$(text_reply "Resumed after the kill." 100 4)" \
                  --argjson r3 "$(tool_call_reply rs-2 slow-echo '{"text": "after both", "ms": 6000}')" \
                  --argjson r4 "$(text_reply "Resumed after both." 100 4)" \
                  '{replies: [$r1, $r2, $r3, $r4]}') &&
    install_test_tool slow-echo && resume_agent vm-resume "$RESUME_PORT" "$script" || return 1
  # Compiled before the timed turns (a tool compiles at its first call).
  vm_ssh 'clawctl tool run slow-echo "{\"text\": \"warm\", \"ms\": 0}" --agent vm-resume | jq -e ".echo == \"warm\"" >/dev/null' &&
    record_tool_invoked vm-resume
}
check "agent resume: slow-echo installs from the host and an agent is configured to call it" resume_ready

check_resume_after_kill() {
  local session rows
  vm_ssh 'echo $(systemctl show -P NRestarts clawos-agent-loop) > /run/clawos-test/resume-restarts
    systemd-run --unit clawos-test-resume-chat --property=Type=exec clawctl chat --agent vm-resume -m "Echo slowly." --json >/dev/null' || return 1
  wait_tool_invoked vm-resume 1 || return 1
  vm_ssh 'date +%s%N > /run/clawos-test/resume-killed && systemctl kill -s KILL clawos-agent-loop' || return 1
  session=$(vm_ssh 'for _ in $(seq 60); do s=$(clawctl session list vm-resume 2>/dev/null | cut -d" " -f1) && [ -n "$s" ] && echo "$s" && exit 0; sleep 0.5; done; exit 1') || return 1
  echo "$session" > "$VMS/resume-session"
  turn_ended_with vm-resume "$session" "Resumed after the kill." || return 1
  vm_ssh "set -e
    test \$(systemctl show -P NRestarts clawos-agent-loop) -eq \$((\$(cat /run/clawos-test/resume-restarts) + 1))
    out=\$(clawctl session show vm-resume $session --json)
    echo \"\$out\" | jq -e '[.entries[].role] == [\"user\", \"assistant\", \"tool\", \"assistant\"]
                           and (.entries[2].content | fromjson | .echo == \"after the kill\")' >/dev/null || { echo \"\$out\"; exit 1; }
    journalctl -b -u clawos-agent-loop -o cat | grep -q 'resuming the turn from its checkpoint' || { echo 'no resume in the journal'; exit 1; }
    # The model was asked again only for the answer after the call.
    test \$(wc -l < /run/clawos-test/clawos-test-vm-resume.jsonl) -eq 2" || return 1
  rows=$(slow_echo_rows vm-resume "$session/2/rs-1") || return 1
  # The warm-up call is the first row; the turn's call ran once.
  [[ $rows == "2 1" ]] || { echo "slow-echo rows, rows with the call's key: $rows (want 2 1)"; return 1; }
}
check "agent resume: agent-loop killed (SIGKILL) during a tool call resumes the turn; the finished call is taken from its record, not run twice" check_resume_after_kill
# From the kill to the resumed turn running again (systemd's RestartSec=1
# and the daemon's start included), from the journal's timestamps.
RESUME_MS=$(vm_ssh 'at=$(journalctl -b -u clawos-agent-loop -o short-unix | grep "the resumed turn runs again" | tail -n 1 | cut -d" " -f1)
  echo $(( (${at/./} / 1000) - $(cat /run/clawos-test/resume-killed) / 1000000 ))' 2>/dev/null) || true
log "agent resume: from kill -9 of agent-loop to the resumed turn running: ${RESUME_MS:-?} ms"

check_resume_after_both_killed() {
  local session rows
  session=$(cat "$VMS/resume-session") || return 1
  vm_ssh "systemd-run --unit clawos-test-resume-chat-2 --property=Type=exec clawctl chat --agent vm-resume --session $session -m 'Again, slowly.' --json >/dev/null" || return 1
  wait_tool_invoked vm-resume 2 || return 1
  # The tool dies with wasm-daemon before it answers: no record of it.
  vm_ssh 'systemctl kill -s KILL clawos-wasm-daemon clawos-agent-loop' || return 1
  turn_ended_with vm-resume "$session" "Resumed after both." || return 1
  vm_ssh "out=\$(clawctl session show vm-resume $session --json)
    echo \"\$out\" | jq -e '[.entries[].role] == [\"user\", \"assistant\", \"tool\", \"assistant\", \"user\", \"assistant\", \"tool\", \"assistant\"]
                           and (.entries[6].content | fromjson | .echo == \"after both\")' >/dev/null || { echo \"\$out\"; exit 1; }" || return 1
  rows=$(slow_echo_rows vm-resume "$session/6/rs-2") || return 1
  [[ $rows == "3 1" ]] || { echo "slow-echo rows, rows with the call's key: $rows (want 3 1)"; return 1; }
}
check "agent resume: agent-loop and wasm-daemon killed during a tool call: the interrupted call runs again exactly once" check_resume_after_both_killed
# The chats whose connection the kills cut ended failed; they are the test's.
vm_ssh 'systemctl stop clawos-test-vm-resume; systemctl reset-failed "clawos-test-resume-chat*"; clawctl agent rm vm-resume' >/dev/null 2>&1 || true
