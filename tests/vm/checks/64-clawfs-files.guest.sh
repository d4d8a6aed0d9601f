# shellcheck shell=bash
# fs-engine's file methods: an agent (here the operator acting as one with
# --as, with that agent's rights only) stays inside its own directory
# (RULE-001), and every request, allowed or refused, is in the audit log.
agent_files_confined_and_audited() {
  set -e
  log=/var/log/clawos/clawfs-audit.log
  test "$(stat -c %U:%G:%a $log)" = clawos-fs-engine:clawos-clawfs-audit:660
  printf "# Plan\n" | clawctl fs write --agent kernel-engine -p notes/plan.md
  clawctl fs read --agent kernel-engine notes/plan.md | grep -qx "# Plan"
  clawctl fs ls --agent kernel-engine notes | grep -q " plan.md$"
  if clawctl fs read --agent kernel-engine /clawfs/agents/fs-engine/identity.json 2>/tmp/vm-denied; then exit 1; fi
  grep -q RULE-001 /tmp/vm-denied
  if echo x | clawctl fs write --agent kernel-engine ../fs-engine/planted 2>/dev/null; then exit 1; fi
  test ! -e /clawfs/agents/fs-engine/planted
  if echo x | clawctl fs write --agent kernel-engine workspace.db 2>/dev/null; then exit 1; fi
  clawctl fs rm --agent kernel-engine notes/plan.md
  grep -q "\[INFO\] agent=kernel-engine operation=write path=/clawfs/agents/kernel-engine/notes/plan.md bytes=7 caller=operator$" $log
  grep -q "\[INFO\] agent=kernel-engine operation=read path=/clawfs/agents/kernel-engine/notes/plan.md bytes=7 caller=operator$" $log
  grep -q "\[WARN\] agent=kernel-engine operation=read path=/clawfs/agents/fs-engine/identity.json denied=true reason=.*RULE-001" $log
  grep -q "\[WARN\] agent=kernel-engine operation=write path=../fs-engine/planted denied=true" $log
  grep -q "\[INFO\] agent=kernel-engine operation=delete path=/clawfs/agents/kernel-engine/notes/plan.md caller=operator$" $log
}
check "clawfs: an agent's files stay in its own directory and every request is audited" agent_files_confined_and_audited

# The image's embedder is all-MiniLM-L6-v2, run inside fs-engine: a query
# finds the note it means although they share no word.
minilm_finds_by_meaning() {
  set -e
  clawctl workspace create vm-semantic >/dev/null
  printf "# Pets\n\nMy dog loves chasing the ball across the park every morning.\n" > /tmp/pets.md
  printf "# Finance\n\nThe quarterly budget report shows rising costs and lower revenue.\n" > /tmp/finance.md
  printf "# Weather\n\nHeavy rain and strong winds are expected along the coast tomorrow.\n" > /tmp/weather.md
  clawctl memory index -w vm-semantic /tmp/pets.md /tmp/finance.md /tmp/weather.md >/dev/null
  answer=$(clawctl search -w vm-semantic --json storm forecast)
  echo "$answer" | jq -e ".vector.status == \"ran\" and (.results[0].path | endswith(\"weather.md\"))" >/dev/null || { echo "$answer"; exit 1; }
  clawctl workspace delete vm-semantic >/dev/null
}
check "clawfs: the in-box MiniLM model finds a note that shares no words with the query" minilm_finds_by_meaning

# fs-engine loads the model in the background at idle priority (SCHED_IDLE,
# which its unit's system call filter must allow), not on a search's path:
# restarted, its preload thread (minilm-preload, gone once the model is
# loaded) is caught while it loads and its policy read from the kernel
# (/proc/<pid>/task/<tid>/stat, field 41: 5 is SCHED_IDLE); then the load
# must finish.
model_preloaded_at_idle_priority() {
  since=$(date +%s)
  systemctl restart clawos-fs-engine || exit 1
  pid=$(systemctl show -P MainPID clawos-fs-engine) policy=""
  for _ in $(seq 400); do
    for task in "/proc/$pid/task/"*; do
      test "$(cat "$task/comm" 2>/dev/null)" = minilm-preload && policy=$(awk "{ print \$41 }" "$task/stat" 2>/dev/null) && break 2
    done
    sleep 0.05
  done
  test -n "$policy" || { echo "no minilm-preload thread seen in fs-engine ($pid)"; exit 1; }
  echo "minilm-preload policy $policy"
  test "$policy" = 5 || exit 1
  for _ in $(seq 60); do
    journalctl -u clawos-fs-engine --since "@$since" -o cat | grep -qx "embedding model loaded" && exit 0
    sleep 2
  done
  journalctl -u clawos-fs-engine --since "@$since" -o cat | tail -n 20; exit 1
}
check "clawfs: fs-engine loads the model in a thread at idle priority (SCHED_IDLE), and it loads" model_preloaded_at_idle_priority
