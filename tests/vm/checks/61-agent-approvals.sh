# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Permissions and approvals in the booted image (specs/agent/README.md,
# "Permissions and approvals"): a supervised agent's file_write waits for
# the operator; security-agent keeps the approval in policy.db; approve runs
# the call once and the turn goes on, deny tells the model; a session with a
# call waiting takes no new message. One approval is left waiting across
# the reboot (after-reboot/61-approvals.sh answers it).

check_approvals() {
  local script
  script=$(jq -cn --argjson r1 "$(tool_call_reply ap-1 file_write '{"path": "notes/approved.md", "content": "approved-content-7731"}')" \
                  --argjson r2 "$(text_reply "Saved." 100 2)" \
                  --argjson r3 "$(tool_call_reply ap-2 file_write '{"path": "notes/denied.md", "content": "denied-content-7732"}')" \
                  --argjson r4 "$(text_reply "Understood, not saved." 100 4)" \
                  --argjson r5 "$(tool_call_reply ap-3 file_write '{"path": "notes/after-reboot.md", "content": "reboot-content-7733"}')" \
                  '{replies: [$r1, $r2, $r3, $r4, $r5]}') &&
    scripted_agent vm-approve 18084 "$script" || return 1
  vm_ssh '
    set -e
    d=/clawfs/agents/vm-approve
    # Supervised: the operator edits the config over SSH; the next turn reads it.
    # Its approvals wait three days: the scenarios (71-scenarios.sh) move the
    # clock a day on while the last one waits across the reboot.
    sed "s/^level = \"full\"/level = \"supervised\"\napproval_expires_minutes = 4320/" $d/config.toml > /run/clawos-test/approve.toml && cat /run/clawos-test/approve.toml > $d/config.toml
    grep -q "^level = \"supervised\"" $d/config.toml
    out=$(clawctl chat --agent vm-approve -m "Save the approved text." --json) || true
    # The notice names the tool and quotes its arguments: what the operator is asked to allow.
    echo "$out" | jq -e ".status == \"waiting\" and (.message | contains(\"for file_write {\") and contains(\"notes/approved.md\") and contains(\"approved-content-7731\") and test(\"clawctl approvals approve a[0-9a-f]{10}\"))" >/dev/null || { echo "$out"; exit 1; }
    session=$(echo "$out" | jq -r .session_id)
    test ! -e $d/notes/approved.md
    clawctl approvals list --json > /run/clawos-test/approvals.json
    jq -e "[.approvals[] | select(.agent == \"vm-approve\")] | length == 1 and .[0].state == \"pending\" and .[0].tool_name == \"file_write\"
           and .[0].arguments.path == \"notes/approved.md\" and .[0].permissions == [\"file_write\"] and .[0].session_id == \"$session\"" /run/clawos-test/approvals.json >/dev/null
    id=$(jq -r "[.approvals[] | select(.agent == \"vm-approve\")][0].id" /run/clawos-test/approvals.json)
    # The session waits: a new message is refused until the call is answered.
    if clawctl chat --agent vm-approve --session "$session" -m "hello?" 2>/run/clawos-test/refused; then echo "a waiting session took a message"; exit 1; fi
    grep -q "waits for the operator" /run/clawos-test/refused
    # The approvals live where no agent or tool can write.
    test "$(stat -c "%U %a" /clawfs/vault/policy.db)" = "clawos-security-agent 600"
    out=$(clawctl approvals approve $id --json)
    echo "$out" | jq -e ".status == \"done\" and .answer == \"Saved.\" and .tool_calls == 1" >/dev/null || { echo "$out"; exit 1; }
    test "$(cat $d/notes/approved.md)" = approved-content-7731
    clawctl approvals list --all --json | jq -e "any(.approvals[]; .id == \"$id\" and .state == \"used\")" >/dev/null
    # Answered once: a second answer is refused.
    if clawctl approvals deny $id 2>/dev/null; then echo "an approval was answered twice"; exit 1; fi
    session_show=$(clawctl session show vm-approve "$session" --json)
    echo "$session_show" | jq -e "[.entries[].role] == [\"user\", \"assistant\", \"notice\", \"tool\", \"assistant\"]" >/dev/null || { echo "$session_show"; exit 1; }

    out=$(clawctl chat --agent vm-approve -m "Save the denied text." --json) || true
    id=$(clawctl approvals list --json | jq -r "[.approvals[] | select(.agent == \"vm-approve\")][0].id")
    out=$(clawctl approvals deny $id --json)
    echo "$out" | jq -e ".status == \"done\" and .answer == \"Understood, not saved.\"" >/dev/null || { echo "$out"; exit 1; }
    test ! -e $d/notes/denied.md
    sed -n 4p /run/clawos-test/clawos-test-vm-approve.jsonl |
      jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"ap-2\")][0].content | test(\"denied\")" >/dev/null ||
      { echo "the model was not told of the denial"; sed -n 4p /run/clawos-test/clawos-test-vm-approve.jsonl; exit 1; }
    # The components journal each decision and never the arguments (the
    # scripted provider, test code outside the box, may log what it got).
    # tracing-journald keeps each field as a journal field (DECISION=...).
    journalctl -b -u clawos-security-agent -o verbose | grep -q "DECISION=Deny" || { echo "no denial in the journal"; exit 1; }
    units=$(for c in agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router scheduler; do echo "-u clawos-$c"; done)
    if journalctl -b -o verbose $units | grep -q "approved-content-7731\|denied-content-7732"; then
      echo "a tool argument is in a component journal"; exit 1
    fi

    # One left waiting across the reboot.
    out=$(clawctl chat --agent vm-approve -m "Save after the reboot." --json) || true
    echo "$out" | jq -e ".status == \"waiting\"" >/dev/null || { echo "$out"; exit 1; }'
}
check "agent approvals: a supervised agent's file_write waits, the notice quoting its arguments; approve runs it once and the turn goes on, deny tells the model; a waiting session takes no message" check_approvals
