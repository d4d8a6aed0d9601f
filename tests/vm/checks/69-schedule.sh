# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The scheduler (specs/scheduler/README.md): a job in an agent's
# cron/jobs.toml fires as a turn of its agent, once per slot, also across a
# restart of the scheduler; the run is in the history, the agent's daily log
# and on the event stream. A scripted provider of 59-agent-turns.sh answers.

SCHEDULE_PORT=18087

schedule_agent_ready() {
  scripted_agent vm-sched "$SCHEDULE_PORT" "$(jq -cn --argjson r "$(text_reply "Report written." 30 4)" '{replies: [$r]}')"
}
check "schedule: an agent with a scripted provider for its jobs" schedule_agent_ready

check "schedule: a delay job added with clawctl fires once as a turn of its agent; its run, the daily log line and task_completed record it" vm_ssh '
  (timeout 90 clawctl events --name task_completed --name task_failed --count 1 > /run/clawos-test/schedule-events.jsonl &)
  sleep 1
  clawctl schedule add vm-sched soon --delay 5s --prompt "Write the report." >/dev/null || exit 1
  grep -q "^\[jobs.soon\]" /clawfs/agents/vm-sched/cron/jobs.toml || { cat /clawfs/agents/vm-sched/cron/jobs.toml; exit 1; }
  for _ in $(seq 90); do
    status=$(clawctl schedule show vm-sched soon --json 2>/dev/null | jq -r ".runs[0].status // empty")
    case $status in ok|failed|waiting) break ;; esac
    sleep 1
  done
  show=$(clawctl schedule show vm-sched soon --json)
  echo "$show" | jq -e "(.runs | length) == 1 and .runs[0].status == \"ok\" and .runs[0].message == \"Report written.\"
                        and .runs[0].manual == false and .job.kind == \"delay\" and (.job | has(\"next_fire\") | not)" >/dev/null || { echo "$show"; exit 1; }
  session=$(echo "$show" | jq -r ".runs[0].session_id")
  clawctl session show vm-sched "$session" --json |
    jq -e "[.entries[] | select(.role == \"user\") | .content] == [\"[scheduled job soon, due \" + $(echo "$show" | jq ".runs[0].slot") + \"]\nWrite the report.\"]" >/dev/null ||
    { clawctl session show vm-sched "$session" --json; exit 1; }
  grep -q "job soon: ok (fire $(echo "$show" | jq -r ".runs[0].fire_id[:12]")): Report written.$" /clawfs/agents/vm-sched/logs/$(date -u +%F).md ||
    { cat /clawfs/agents/vm-sched/logs/*.md; exit 1; }
  for _ in $(seq 20); do test -s /run/clawos-test/schedule-events.jsonl && break; sleep 0.5; done
  jq -e "select(.payload.event_name == \"task_completed\") | .sender == \"scheduler\" and .payload.event_data.job == \"soon\" and .payload.event_data.status == \"ok\"" \
    /run/clawos-test/schedule-events.jsonl >/dev/null || { cat /run/clawos-test/schedule-events.jsonl; exit 1; }
  test "$(wc -l < /run/clawos-test/clawos-test-vm-sched.jsonl)" -eq 1'

check "schedule: a scheduler killed and restarted fires no slot twice" vm_ssh '
  systemctl kill -s KILL clawos-scheduler
  for _ in $(seq 30); do sleep 1; clawctl schedule list >/dev/null 2>&1 && break; done
  # One whole pass (15 s) after the restart.
  sleep 17
  clawctl schedule show vm-sched soon --json | jq -e "(.runs | length) == 1" >/dev/null || { clawctl schedule show vm-sched soon; exit 1; }
  test "$(wc -l < /run/clawos-test/clawos-test-vm-sched.jsonl)" -eq 1'

check "schedule: a jobs file with an error is reported with its line and the jobs it held stay scheduled" vm_ssh '
  clawctl schedule add vm-sched daily --cron "0 9 * * *" --tz Europe/London --prompt "Daily." >/dev/null || exit 1
  for _ in $(seq 20); do clawctl schedule list --agent vm-sched --json | jq -e "any(.jobs[]; .job == \"daily\")" >/dev/null && break; sleep 1; done
  printf "\n[jobs.broken]\nprompt = \"x\"\ncron = \"*/5 * * * * *\"\n" >> /clawfs/agents/vm-sched/cron/jobs.toml
  for _ in $(seq 20); do
    list=$(clawctl schedule list --agent vm-sched --json)
    echo "$list" | jq -e "(.file_errors | length) == 1" >/dev/null && break; sleep 1
  done
  line=$(grep -n "^\[jobs.broken\]" /clawfs/agents/vm-sched/cron/jobs.toml | cut -d: -f1)
  echo "$list" | jq -e ".file_errors[0].line == $line and (.file_errors[0].reason | test(\"once a minute\"))
                        and ([.jobs[].job] | sort) == [\"daily\", \"soon\"]
                        and (.jobs[] | select(.job == \"daily\") | .schedule == \"cron 0 9 * * * (Europe/London)\" and (.next_fire | test(\"T0[89]:00:00Z$\")))" >/dev/null ||
    { echo "$list"; exit 1; }
  clawctl schedule list --agent vm-sched | grep -q "cron/jobs.toml, line $line: .*once a minute" || { clawctl schedule list --agent vm-sched; exit 1; }
  # clawctl refuses to write a file the scheduler would refuse.
  out=$(clawctl schedule add vm-sched bad --every 10s --prompt x 2>&1) && { echo "accepted: $out"; exit 1; }
  echo "$out" | grep -q "nothing written" || { echo "$out"; exit 1; }
  clawctl schedule rm vm-sched broken >/dev/null && clawctl schedule rm vm-sched daily >/dev/null &&
    clawctl schedule rm vm-sched soon >/dev/null &&
    systemctl stop clawos-test-vm-sched && clawctl agent rm vm-sched >/dev/null'
