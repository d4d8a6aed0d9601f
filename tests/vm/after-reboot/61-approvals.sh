# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# An approval asked for before the reboot (checks/61-agent-approvals.sh)
# is still waiting after it; approving it runs the call and the turn goes
# on. The scripted provider is a transient unit: started again here with
# the one answer the continued turn needs.
check_approval_after_reboot() {
  start_provider clawos-test-vm-approve 18084 "$(jq -cn --argjson r1 "$(text_reply "Saved after the reboot." 100 4)" '{replies: [$r1]}')" || return 1
  vm_ssh '
    set -e
    id=$(clawctl approvals list --json | jq -r "[.approvals[] | select(.agent == \"vm-approve\" and .tool_name == \"file_write\")][0].id")
    test -n "$id" && test "$id" != null
    out=$(clawctl approvals approve $id --json)
    echo "$out" | jq -e ".status == \"done\" and .answer == \"Saved after the reboot.\"" >/dev/null || { echo "$out"; exit 1; }
    test "$(cat /clawfs/agents/vm-approve/notes/after-reboot.md)" = reboot-content-7733'
}
check "agent approvals: an approval asked for before the reboot waits after it, and approving it continues the turn" check_approval_after_reboot
vm_ssh 'systemctl stop clawos-test-vm-approve; clawctl agent rm vm-approve' >/dev/null 2>&1 || true
