# shellcheck shell=bash
# The turn whose tool call was running at the power-off (checks/99-agent-in-
# flight-at-reboot.sh) was resumed by agent-loop at boot: the call ran again
# with its idempotency key, or, when wasm-daemon finished it while the box
# stopped, was answered from its record; either way it ran to its end once.
# Once its provider answers again (started here) the turn ends; the
# transcript holds one result for the call.
check_resumed_after_reboot() {
  local session rows
  start_provider clawos-test-vm-reboot "$REBOOT_PORT" "$(jq -cn --argjson r1 "$(text_reply "Done after the reboot." 100 4)" '{replies: [$r1]}')" || return 1
  session=$(vm_ssh 'clawctl session list vm-reboot | cut -d" " -f1') || return 1
  turn_ended_with vm-reboot "$session" "Done after the reboot." || return 1
  vm_ssh "set -e
    out=\$(clawctl session show vm-reboot $session --json)
    echo \"\$out\" | jq -e '[.entries[].role] == [\"user\", \"assistant\", \"tool\", \"assistant\"]
                           and (.entries[2].content | fromjson | .echo == \"across the reboot\")' >/dev/null || { echo \"\$out\"; exit 1; }
    journalctl -b -u clawos-agent-loop -o cat | grep -q 'resuming the turn from its checkpoint' || { echo 'no resume in this boot'\''s journal'; exit 1; }" || return 1
  rows=$(slow_echo_rows vm-reboot "$session/2/rb-1") || return 1
  # The warm-up call and the turn's call, which ran to its end once.
  [[ $rows == "2 1" ]] || { echo "slow-echo rows, rows with the call's key: $rows (want 2 1)"; return 1; }
}
check "agent resume: a turn cut off by the reboot mid tool call resumes at boot; the call ran to its end once and has one result" check_resumed_after_reboot
log "agent resume: the call in flight at the reboot $(vm_ssh 'journalctl -b -u clawos-wasm-daemon -o cat | grep -q "answered from the call recorded" && echo "had finished as the box stopped (answered from its record)" || echo "ran again after the boot"' 2>/dev/null)"
vm_ssh 'systemctl stop clawos-test-vm-reboot; clawctl agent rm vm-reboot' >/dev/null 2>&1 || true
