# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# An agent's memory in the booted image (specs/agent/README.md, "Memory"):
# entries are Markdown in the agent's own files, the index is derived from
# them (an operator's edit over SSH is found within seconds, a rebuild from
# the files alone gives the same answers), forget removes from the file and
# the index, and the model stores and recalls through its tools in a turn
# (the scripted provider of 59-agent-turns.sh, on the guest's loopback).

check "agent memory: clawctl memory store writes an entry into memory.md; get, list, count and recall agree" vm_ssh '
  set -e
  clawctl agent create vm-memory >/dev/null
  file=/clawfs/agents/vm-memory/memory.md
  id=$(clawctl memory store --agent vm-memory --json "The operator keeps the sailing boat Kittiwake at the north pier." | jq -r .id)
  echo "$id" > /run/clawos-test/memory-id
  # Readable Markdown: the entry is a section headed by its time and ID.
  grep -Eq "^## 20[0-9-]+T[0-9:]+Z \[$id\]$" $file && grep -q "^The operator keeps the sailing boat Kittiwake" $file
  test "$(stat -c "%U %a" $file)" = "clawos-fs-engine 640"
  clawctl memory store --agent vm-memory --category daily --json "Checked the bilge pump of Kittiwake." | jq -e ".path | test(\"^logs/20[0-9-]+\\\\.md$\")" >/dev/null
  clawctl memory get --agent vm-memory --json $id | jq -e ".category == \"core\" and (.content | startswith(\"The operator keeps\"))" >/dev/null
  clawctl memory count --agent vm-memory --json | jq -e ".count == 2" >/dev/null
  clawctl memory count --agent vm-memory --category daily --json | jq -e ".count == 1" >/dev/null
  clawctl memory list --agent vm-memory --json | jq -e "(.entries | length) == 2" >/dev/null
  # Other words than the entry: the vector leg (MiniLM) finds it, once
  # fs-engine has embedded it in the background (the store waited for no
  # embedding).
  by_meaning() {
    clawctl memory recall --agent vm-memory --category core --json "where is the yacht moored" |
      jq -e ".vector.status == \"ran\" and .results[0].id == \"$id\"" >/dev/null
  }
  for _ in $(seq 120); do by_meaning && break; sleep 1; done
  by_meaning
  grep -q "agent=vm-memory operation=memory_store path=/clawfs/agents/vm-memory/memory.md caller=operator$" /var/log/clawos/clawfs-audit.log'

check_operator_edit() {
  vm_ssh '
    set -e
    file=/clawfs/agents/vm-memory/memory.md
    found() { clawctl memory recall --agent vm-memory --json "$1" | jq -e --arg w "$2" "any(.results[]; .content | contains(\$w))" >/dev/null; }
    ! found "greenhouse heater" "Thermoquill"
    start=$(date +%s%N)
    printf "\n## Written by the operator\nThe greenhouse heater is a Thermoquill 300.\n" >> $file
    for _ in $(seq 300); do found "greenhouse heater" "Thermoquill" && break; sleep 0.1; done
    found "greenhouse heater" "Thermoquill"
    echo $(( ($(date +%s%N) - start) / 1000000 )) > /run/clawos-test/memory-reindex.ms
    # What the spec promises, whatever the CPU: the re-index begins after
    # 300 ms without another change, 2 s at most. It began when its
    # journal line was written less the time it took (took_ms). How long
    # MiniLM takes to embed is a figure of benches/memory-bench on the
    # host, and of the log line below under TCG, not a bound.
    line=$(journalctl -u clawos-fs-engine -o json --since "@$((start / 1000000000))" F_AGENT=vm-memory F_FILE=memory.md |
      jq -c "select(.MESSAGE == \"memory file re-indexed\")" | tail -n 1)
    [ -n "$line" ] || { echo "no re-index of memory.md in the journal"; exit 1; }
    began=$(echo "$line" | jq -r "(.__REALTIME_TIMESTAMP | tonumber) - (.F_TOOK_MS | tonumber) * 1000")
    waited=$(( (began * 1000 - start) / 1000000 ))
    echo "$waited" > /run/clawos-test/memory-reindex-wait.ms
    test "$waited" -le 2000 || { echo "re-index began $waited ms after the edit: $line"; exit 1; }
    # A file the operator adds, and one the operator deletes.
    mkdir -p /clawfs/agents/vm-memory/memory
    printf "# Boats\n\nThe dinghy Petrel has a torn sail.\n" > /clawfs/agents/vm-memory/memory/boats.md
    for _ in $(seq 100); do found "dinghy sail" "Petrel" && break; sleep 0.1; done
    found "dinghy sail" "Petrel"
    rm /clawfs/agents/vm-memory/memory/boats.md
    for _ in $(seq 100); do found "dinghy sail" "Petrel" || break; sleep 0.1; done
    ! found "dinghy sail" "Petrel"'
}
check "agent memory: an operator's edit of memory.md over SSH is re-indexed from at most 2 s after it (300 ms quiet time) and found by the next recall; an added file is found, a deleted one forgotten" check_operator_edit
log "agent memory: an operator's edit to searchable: $(vm_ssh 'cat /run/clawos-test/memory-reindex.ms' 2>/dev/null || echo '?') ms, the re-index begun after $(vm_ssh 'cat /run/clawos-test/memory-reindex-wait.ms' 2>/dev/null || echo '?') ms (inotify, 300 ms quiet time, MiniLM)"

check "agent memory: a rebuild from the files alone gives the same recall results" vm_ssh '
  set -e
  recall() { clawctl memory recall --agent vm-memory --limit 10 --json "boat pier heater" | jq -S .results; }
  before=$(recall)
  clawctl memory reindex --agent vm-memory --json | jq -e ".files >= 5 and .chunks >= 5" >/dev/null
  # The rebuilt chunks are found by keyword at once and by meaning once
  # fs-engine has embedded them again, in the background.
  for _ in $(seq 120); do test "$before" = "$(recall)" && break; sleep 1; done
  test "$before" = "$(recall)"'

check "agent memory: forget removes the entry from memory.md and from the index; a second forget is ENOENT" vm_ssh '
  set -e
  id=$(cat /run/clawos-test/memory-id)
  clawctl memory forget --agent vm-memory --json $id | jq -e ".id == \"$id\"" >/dev/null
  ! grep -q "$id\|Kittiwake at the north pier" /clawfs/agents/vm-memory/memory.md
  clawctl memory recall --agent vm-memory --json "sailing boat Kittiwake north pier" | jq -e "all(.results[]; .content | contains(\"north pier\") | not)" >/dev/null
  ! clawctl memory forget --agent vm-memory $id 2>/run/clawos-test/forget.err
  grep -qi "no memory entry" /run/clawos-test/forget.err'

check "agent memory: hygiene moves a daily log past its age to archive/ and out of recall" vm_ssh '
  set -e
  d=/clawfs/agents/vm-memory
  printf "# 2020-01-01\n\n## 2020-01-01T08:00:00Z [m0123456789ab]\nThe old ferry timetable was printed.\n" > $d/logs/2020-01-01.md
  clawctl memory count --agent vm-memory --category daily --json | jq -e ".count == 2" >/dev/null
  clawctl memory hygiene --agent vm-memory --json | jq -e ".archived == [\"logs/2020-01-01.md\"]" >/dev/null
  test -f $d/archive/logs/2020-01-01.md && test ! -e $d/logs/2020-01-01.md
  clawctl memory recall --agent vm-memory --json "ferry timetable" | jq -e "all(.results[]; .path != \"logs/2020-01-01.md\" and .path != \"archive/logs/2020-01-01.md\")" >/dev/null'

check_model_memory_tools() {
  local script
  script=$(jq -cn --argjson r1 "$(tool_call_reply mem-1 memory_store '{"content": "The operator prefers tea without sugar.", "category": "core"}')" \
                  --argjson r2 "$(tool_call_reply mem-2 memory_recall '{"query": "how does the operator take tea"}')" \
                  --argjson r3 "$(text_reply "Noted: tea, no sugar." 100 5)" \
                  '{replies: [$r1, $r2, $r3]}') &&
    scripted_agent vm-memtools 18083 "$script" || return 1
  vm_ssh '
    set -e
    out=$(clawctl chat --agent vm-memtools -m "Remember: I take my tea without sugar." --json)
    echo "$out" | jq -e ".status == \"done\" and .tool_calls == 2" >/dev/null || { echo "$out"; exit 1; }
    grep -q "^The operator prefers tea without sugar.$" /clawfs/agents/vm-memtools/memory.md
    # The recall result went back to the model with the entry it stored.
    sed -n 3p /run/clawos-test/clawos-test-vm-memtools.jsonl |
      jq -e "[.body.messages[] | select(.role == \"tool\" and .tool_call_id == \"mem-2\")][0].content | fromjson | any(.[]; .content | test(\"tea without sugar\"))" >/dev/null
    grep -q "agent=vm-memtools operation=memory_store path=/clawfs/agents/vm-memtools/memory.md caller=agent-loop$" /var/log/clawos/clawfs-audit.log
    clawctl agent show vm-memtools | jq -e "any(.tools[]; . == \"memory_recall\")" >/dev/null'
}
check "agent memory: in a turn the model stores a memory and recalls it through its tools, each call through fs-engine as the agent" check_model_memory_tools

vm_ssh 'systemctl stop clawos-test-vm-memtools; clawctl agent rm vm-memtools; clawctl agent rm vm-memory' >/dev/null 2>&1 || true
