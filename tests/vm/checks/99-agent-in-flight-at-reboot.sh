# shellcheck shell=bash
# The last thing before the reboot (run.sh powers the box off right after
# the checks): a turn whose WASM tool call (slow-echo, 8 s) is running when
# the power-off begins. agent-loop is stopped first (it is ordered after the
# components it calls), so the turn is cut off with its call in flight;
# after-reboot/61-resume.sh sees it resumed at boot. Its provider is gone
# with the reboot (a transient unit): the resumed turn retries it until the
# after-reboot check starts it again.
REBOOT_PORT=18086
check_in_flight_at_reboot() {
  local script
  script=$(jq -cn --argjson r1 "$(tool_call_reply rb-1 slow-echo '{"text": "across the reboot", "ms": 8000}')" '{replies: [$r1]}') &&
    { vm_ssh 'clawctl tool list --json' | jq -e 'any(.tools[]; .tool_name == "slow-echo")' >/dev/null || install_test_tool slow-echo; } &&
    resume_agent vm-reboot "$REBOOT_PORT" "$script" && record_tool_invoked vm-reboot || return 1
  vm_ssh 'clawctl tool run slow-echo "{\"ms\": 0}" --agent vm-reboot >/dev/null &&
    systemd-run --unit clawos-test-reboot-chat --property=Type=exec clawctl chat --agent vm-reboot -m "Echo across the reboot." --json >/dev/null' &&
    wait_tool_invoked vm-reboot 1
}
check "agent resume: a turn's tool call is running when the box powers off" check_in_flight_at_reboot
