# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The scheduler (specs/scheduler/README.md): a job in an agent's
# cron/jobs.toml fires as a turn of its agent, once per slot, also across a
# restart of the scheduler; the run is in the history, the agent's daily log
# and on the event stream. The agent schedules work and notifies the
# operator with its own tools; a heartbeat with a checklist runs a turn and
# raises a notification, one with an empty checklist costs no model call.
# Scripted providers of 59-agent-turns.sh answer.

SCHEDULE_PORT=18087
SCHEDULE_TOOLS_PORT=18088

# vm-sched: one reply (its delay job's turn); a heartbeat every minute over
# an empty checklist must not ask for a second. vm-sched-tools: its turn
# schedules a job that notifies, then its heartbeat reports the disk.
schedule_agents_ready() {
  local tools
  tools=$(jq -cn --argjson r1 "$(tool_call_reply call-s1 schedule_add '{"name": "ping", "delay": "5s", "prompt": "Ping the operator."}')" \
                 --argjson r2 "$(text_reply "Scheduled." 30 2)" \
                 --argjson r3 "$(tool_call_reply call-s2 notify '{"title": "Ping done", "body": "All good.", "level": "warning"}')" \
                 --argjson r4 "$(text_reply "Notified." 30 2)" \
                 --argjson r5 "$(text_reply "The disk is 91% full: clean up needed." 30 9)" \
                 '{replies: [$r1, $r2, $r3, $r4, $r5]}') || return 1
  scripted_agent vm-sched "$SCHEDULE_PORT" "$(jq -cn --argjson r "$(text_reply "Report written." 30 4)" '{replies: [$r]}')" &&
    scripted_agent vm-sched-tools "$SCHEDULE_TOOLS_PORT" "$tools" &&
    vm_ssh 'printf "[heartbeat]\nevery = \"1m\"\n" | clawctl fs write --parents /clawfs/agents/vm-sched/cron/jobs.toml &&
            printf "# Heartbeat\n<!-- nothing to check yet -->\n- [ ]\n" | clawctl fs write /clawfs/agents/vm-sched/HEARTBEAT.md &&
            printf "[heartbeat]\nevery = \"1m\"\n" | clawctl fs write --parents /clawfs/agents/vm-sched-tools/cron/jobs.toml &&
            printf "# Heartbeat\n- Check the disk.\n" | clawctl fs write /clawfs/agents/vm-sched-tools/HEARTBEAT.md'
}
check "schedule: two agents with scripted providers, each with a heartbeat every minute" schedule_agents_ready

check "schedule: the agent's schedule_add tool writes a job into its cron/jobs.toml; the job runs and its notify tool raises a notification clawctl shows" vm_ssh '
  out=$(clawctl chat --agent vm-sched-tools -m "Ping me in five seconds." --json) || { echo "$out"; exit 1; }
  echo "$out" | jq -e ".status == \"done\" and .answer == \"Scheduled.\"" >/dev/null || { echo "$out"; exit 1; }
  grep -q "^\[jobs.ping\]" /clawfs/agents/vm-sched-tools/cron/jobs.toml && grep -q "^\[heartbeat\]" /clawfs/agents/vm-sched-tools/cron/jobs.toml ||
    { cat /clawfs/agents/vm-sched-tools/cron/jobs.toml; exit 1; }
  for _ in $(seq 60); do
    clawctl schedule show vm-sched-tools ping --json 2>/dev/null | jq -e ".runs[0].status == \"ok\"" >/dev/null && break; sleep 1
  done
  list=$(clawctl notifications --agent vm-sched-tools --json)
  echo "$list" | jq -e "[.notifications[] | select(.source == \"agent\")] | length == 1 and .[0].title == \"Ping done\"
                        and .[0].body == \"All good.\" and .[0].level == \"warning\" and (.[0] | has(\"read_at\") | not)" >/dev/null ||
    { echo "$list"; clawctl schedule show vm-sched-tools ping; exit 1; }
  clawctl notifications | grep -q "warning vm-sched-tools \[agent\] (unread): Ping done" || { clawctl notifications; exit 1; }
  id=$(echo "$list" | jq "[.notifications[] | select(.source == \"agent\")][0].id")
  clawctl notifications --read "$id" --json | jq -e ".read_at != null" >/dev/null &&
    ! clawctl notifications --agent vm-sched-tools --json | jq -e "any(.notifications[]; .id == $id)" >/dev/null'

check "schedule: a delay job added with clawctl fires once as a turn of its agent; its run, the daily log line and task_completed record it" vm_ssh '
  (timeout 90 clawctl events --name task_completed --name task_failed > /run/clawos-test/schedule-events.jsonl 2>/dev/null < /dev/null &)
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
  for _ in $(seq 20); do grep -q "\"soon\"" /run/clawos-test/schedule-events.jsonl && break; sleep 0.5; done
  jq -se "any(.[]; .sender == \"scheduler\" and .payload.event_name == \"task_completed\" and .payload.event_data.job == \"soon\"
                   and .payload.event_data.status == \"ok\")" /run/clawos-test/schedule-events.jsonl >/dev/null ||
    { cat /run/clawos-test/schedule-events.jsonl; exit 1; }
  test "$(wc -l < /run/clawos-test/clawos-test-vm-sched.jsonl)" -eq 1'

check "schedule: a scheduler killed and restarted fires no slot twice" vm_ssh '
  systemctl kill -s KILL clawos-scheduler
  for _ in $(seq 30); do sleep 1; clawctl schedule list >/dev/null 2>&1 && break; done
  # One whole pass (15 s) after the restart.
  sleep 17
  clawctl schedule show vm-sched soon --json | jq -e "(.runs | length) == 1" >/dev/null || { clawctl schedule show vm-sched soon; exit 1; }
  clawctl schedule show vm-sched-tools ping --json | jq -e "(.runs | length) == 1" >/dev/null || { clawctl schedule show vm-sched-tools ping; exit 1; }
  test "$(wc -l < /run/clawos-test/clawos-test-vm-sched.jsonl)" -eq 1'

# Each edit is read within 3 s (inotify), not at the next pass: the
# scheduler passes at least every 15 s, and the edits follow one another.
check "schedule: a jobs file with an error is reported with its line within 3 s of the edit, and the jobs it held stay scheduled" vm_ssh '
  clawctl schedule add vm-sched daily --cron "0 9 * * *" --tz Europe/London --prompt "Daily." >/dev/null || exit 1
  for _ in $(seq 12); do clawctl schedule list --agent vm-sched --json | jq -e "any(.jobs[]; .job == \"daily\")" >/dev/null && break; sleep 0.25; done
  clawctl schedule list --agent vm-sched --json | jq -e "any(.jobs[]; .job == \"daily\")" >/dev/null || { echo "the added job not read within 3 s"; exit 1; }
  printf "\n[jobs.broken]\nprompt = \"x\"\ncron = \"*/5 * * * * *\"\n" >> /clawfs/agents/vm-sched/cron/jobs.toml
  for _ in $(seq 12); do
    list=$(clawctl schedule list --agent vm-sched --json)
    echo "$list" | jq -e "(.file_errors | length) == 1" >/dev/null && break; sleep 0.25
  done
  line=$(grep -n "^\[jobs.broken\]" /clawfs/agents/vm-sched/cron/jobs.toml | cut -d: -f1)
  echo "$list" | jq -e ".file_errors[0].line == $line and (.file_errors[0].reason | test(\"once a minute\"))
                        and ([.jobs[].job] | sort) == [\"daily\", \"heartbeat\", \"soon\"]
                        and (.jobs[] | select(.job == \"daily\") | .schedule == \"cron 0 9 * * * (Europe/London)\" and (.next_fire | test(\"T0[89]:00:00Z$\")))" >/dev/null ||
    { echo "$list"; exit 1; }
  clawctl schedule list --agent vm-sched | grep -q "cron/jobs.toml, line $line: .*once a minute" || { clawctl schedule list --agent vm-sched; exit 1; }
  # clawctl refuses to write a file the scheduler would refuse.
  out=$(clawctl schedule add vm-sched bad --every 10s --prompt x 2>&1) && { echo "accepted: $out"; exit 1; }
  echo "$out" | grep -q "nothing written" || { echo "$out"; exit 1; }
  clawctl schedule rm vm-sched broken >/dev/null && clawctl schedule rm vm-sched daily >/dev/null'

check "schedule: a heartbeat with a checklist runs a turn and its answer is a notification; one with an empty checklist asks no model" vm_ssh '
  for _ in $(seq 90); do
    clawctl notifications --agent vm-sched-tools --json | jq -e "any(.notifications[]; .source == \"heartbeat\")" >/dev/null && break; sleep 1
  done
  # The first heartbeat got the last scripted reply; later ones (a minute
  # apart) find the script spent and fail, which is a notification too.
  list=$(clawctl notifications --agent vm-sched-tools --all --json)
  echo "$list" | jq -e "[.notifications[] | select(.source == \"heartbeat\")] | last | .level == \"info\"
                        and .title == \"heartbeat of vm-sched-tools: ok\" and .body == \"The disk is 91% full: clean up needed.\"" >/dev/null ||
    { echo "$list"; exit 1; }
  sed -n 5p /run/clawos-test/clawos-test-vm-sched-tools.jsonl |
    jq -e "[.body.messages[] | select(.role == \"user\")][-1].content | startswith(\"[heartbeat, due \") and contains(\"- Check the disk.\")" >/dev/null ||
    { sed -n 5p /run/clawos-test/clawos-test-vm-sched-tools.jsonl; exit 1; }
  # vm-sched passed a heartbeat slot too, over its empty checklist: no run, no request.
  journalctl -b -u clawos-scheduler F_AGENT=vm-sched -o cat | grep -q "heartbeat: nothing on the checklist, no turn" || exit 1
  clawctl schedule list --agent vm-sched --json | jq -e ".jobs[] | select(.job == \"heartbeat\") | (.last_run | not)" >/dev/null || exit 1
  test "$(wc -l < /run/clawos-test/clawos-test-vm-sched.jsonl)" -eq 1 || { cat /run/clawos-test/clawos-test-vm-sched.jsonl; exit 1; }
  # Paused first: a heartbeat turn starting now would make the removal
  # refuse ("a turn is running").
  for agent in vm-sched vm-sched-tools; do
    clawctl agent pause $agent >/dev/null && systemctl stop clawos-test-$agent || exit 1
  done
  sleep 2
  for agent in vm-sched vm-sched-tools; do clawctl agent rm $agent >/dev/null || exit 1; done'
