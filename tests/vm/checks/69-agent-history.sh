# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# An agent's history and goals (specs/clawfs/README.md, "History",
# "Goals"): each turn that changed its files is one git commit authored by
# the agent, its answer the subject; the operator rolls the files back as a
# new commit; the agent cannot write the repository; a goal's file moves
# with its state and the move is a commit. A scripted provider of
# 59-agent-turns.sh answers on the guest's loopback.

HISTORY_PORT=18089

history_agent_ready() {
  local script
  script=$(jq -cn --argjson r1 "$(tool_call_reply call-h1 file_write '{"path": "notes/plan.md", "content": "v1"}')" \
                  --argjson r2 "$(text_reply "Wrote the plan." 30 3)" \
                  --argjson r3 "$(tool_call_reply call-h2 file_write '{"path": "notes/plan.md", "content": "v2"}')" \
                  --argjson r4 "$(text_reply "Rewrote the plan." 30 3)" \
                  --argjson r5 "$(tool_call_reply call-h3 file_write '{"path": ".git/HEAD", "content": "ref: refs/heads/forged\n"}')" \
                  --argjson r6 "$(text_reply "Tried." 30 1)" \
                  --argjson r7 "$(tool_call_reply call-h4 goal_create '{"title": "Plan the trip", "description": "Dates and bookings."}')" \
                  --argjson r8 "$(text_reply "Started the goal." 30 3)" \
                  --argjson r9 "$(tool_call_reply call-h5 goal_update '{"id": "plan-the-trip", "state": "completed", "note": "booked", "artifact": "notes/plan.md"}')" \
                  --argjson r10 "$(text_reply "Goal done." 30 2)" \
                  '{replies: [$r1, $r2, $r3, $r4, $r5, $r6, $r7, $r8, $r9, $r10]}') || return 1
  scripted_agent vm-hist "$HISTORY_PORT" "$script"
}
check "history: an agent with a scripted provider that writes a file twice, then works on a goal" history_agent_ready

check "history: each turn that wrote a file is one commit authored by the agent with its answer as subject; the operator rolls back as a new commit" vm_ssh '
  clawctl chat --agent vm-hist -m "Write the plan." --json | jq -e ".answer == \"Wrote the plan.\"" >/dev/null || exit 1
  clawctl chat --agent vm-hist -m "Rewrite it." --json | jq -e ".answer == \"Rewrote the plan.\"" >/dev/null || exit 1
  log=$(clawctl agent history vm-hist --json)
  echo "$log" | jq -e "(.commits | length) == 2 and ([.commits[].author] | unique) == [\"vm-hist\"]
                       and (.commits[0].message | startswith(\"Rewrote the plan.\n\")) and .commits[0].files == [\"notes/plan.md\"]
                       and (.commits[1].message | startswith(\"Wrote the plan.\n\")) and any(.commits[1].files[]; . == \"notes/plan.md\")
                       and all(.commits[].files[]; test(\"workspace.db|config.toml|identity.json\") | not)" >/dev/null || { echo "$log"; exit 1; }
  first=$(echo "$log" | jq -r ".commits[1].id")
  clawctl agent rollback vm-hist "${first:0:10}" | grep -q "Roll back to ${first:0:12}: Wrote the plan." || exit 1
  test "$(cat /clawfs/agents/vm-hist/notes/plan.md)" = v1 || exit 1
  test "$(stat -c %a /clawfs/agents/vm-hist/notes/plan.md)" = 640 || { stat /clawfs/agents/vm-hist/notes/plan.md; exit 1; }
  clawctl agent history vm-hist --json | jq -e "(.commits | length) == 3 and .commits[0].author == \"operator\"" >/dev/null || exit 1
  grep -q "agent=vm-hist operation=rollback path=/clawfs/agents/vm-hist caller=operator$" /var/log/clawos/clawfs-audit.log ||
    { grep vm-hist /var/log/clawos/clawfs-audit.log | tail -n 3; exit 1; }'

check "history: the agent cannot write its own repository" vm_ssh '
  head=$(cat /clawfs/agents/vm-hist/.git/HEAD)
  clawctl chat --agent vm-hist -m "Point HEAD elsewhere." --json | jq -e ".answer == \"Tried.\"" >/dev/null || exit 1
  test "$(cat /clawfs/agents/vm-hist/.git/HEAD)" = "$head" || exit 1
  session=$(clawctl session list vm-hist | head -n 1 | cut -d" " -f1)
  clawctl session show vm-hist "$session" --json | jq -e "any(.entries[]; .role == \"tool\" and (.content | test(\"maintained by ClawFS\")))" >/dev/null ||
    { clawctl session show vm-hist "$session" --json; exit 1; }'

check "goals: a goal the agent starts and completes moves from goals/active to goals/completed with its log; the move is a commit" vm_ssh '
  (timeout 60 clawctl events --name goal.changed > /run/clawos-test/goal-events.jsonl 2>/dev/null < /dev/null &)
  sleep 1
  clawctl chat --agent vm-hist -m "Start a goal to plan the trip." --json | jq -e ".answer == \"Started the goal.\"" >/dev/null || exit 1
  test -f /clawfs/agents/vm-hist/goals/active/plan-the-trip.md || { ls -R /clawfs/agents/vm-hist/goals; exit 1; }
  clawctl chat --agent vm-hist -m "It is booked." --json | jq -e ".answer == \"Goal done.\"" >/dev/null || exit 1
  test ! -e /clawfs/agents/vm-hist/goals/active/plan-the-trip.md && test -f /clawfs/agents/vm-hist/goals/completed/plan-the-trip.md ||
    { ls -R /clawfs/agents/vm-hist/goals; exit 1; }
  goal=$(clawctl goal show vm-hist plan-the-trip --json)
  echo "$goal" | jq -e ".state == \"completed\" and .title == \"Plan the trip\" and .artifacts == [\"notes/plan.md\"]
                        and .description == \"Dates and bookings.\" and (.log | length) == 2 and (.log[1] | test(\"active → completed .*: booked$\"))" >/dev/null ||
    { echo "$goal"; exit 1; }
  clawctl goal list vm-hist --state completed --json | jq -e "[.goals[].id] == [\"plan-the-trip\"]" >/dev/null || exit 1
  clawctl goal log vm-hist plan-the-trip | grep -q "vm-hist  Goal plan-the-trip: active → completed" || { clawctl goal log vm-hist plan-the-trip; exit 1; }
  for _ in $(seq 20); do test "$(wc -l < /run/clawos-test/goal-events.jsonl)" -ge 2 && break; sleep 0.5; done
  jq -se "[.[] | .payload.event_data | select(.agent == \"vm-hist\") | [.from, .to]] == [[null, \"active\"], [\"active\", \"completed\"]]" \
    /run/clawos-test/goal-events.jsonl >/dev/null || { cat /run/clawos-test/goal-events.jsonl; exit 1; }
  # fs-engine is re-indexing the goal files just moved (seconds of MiniLM
  # under TCG, past 30 s on a loaded machine): the removal does not wait for
  # it (fs-engine/src/memories.rs).
  systemctl stop clawos-test-vm-hist
  clawctl agent rm vm-hist >/dev/null'
