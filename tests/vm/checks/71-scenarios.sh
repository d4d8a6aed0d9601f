# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The ten user scenarios of the product brief (clawser-prd §7) as an
# appliance lives them: each agent's model is a scripted provider on the
# guest's loopback (deterministic replies, 59-agent-turns.sh's helpers),
# everything else is the box's own: agent-loop, fs-engine, memory, the
# scheduler, security-agent's approvals, the web-fetch tool. A scenario's
# "Tests" are asserted where they apply to a box without a browser; each
# assertion names the step it covers ("1.3": scenario 1, step 3). What the
# scripted model is given back (its tool results, in the provider's
# request log) shows what the box found for it: a recall's entries, a page.
# after-reboot/62-scenarios.sh checks that their state survived a reboot.

# The pages the agents fetch (scenarios 1, 3, 4, 8), served by a scripted
# provider with no replies on the host, reached from the guest as
# 10.0.2.2 (QEMU's user network). Not in the guest: the box's eBPF policy
# refuses a tool any connection to the box's own addresses
# (specs/toolhost/README.md), so web-fetch is granted this address
# literally, like any service of the operator's network.
SCENARIO_WEB_PORT=$(free_port)
SCENARIO_WEB="http://10.0.2.2:$SCENARIO_WEB_PORT"
jq -n '{replies: [], pages: {
  "/headaches": "Tension headaches: triggered by poor sleep and skipped meals; see a doctor if they recur weekly.",
  "/tokyo-weather": "Tokyo in April: 12-19 C, cherry blossoms peak in the first week.",
  "/tokyo-hotels": "Yanaka Ryokan: 14,000 yen a night. Shinjuku Tower: 32,000 yen a night.",
  "/cve-feed": "CVE-2026-0001: libfoo before 1.3 allows a heap overflow.",
  "/wasm-article": "WebAssembly tail calls cut interpreter dispatch overhead by 30%."}}' > "$OUT/vm/scenario-pages.json"
"${CARGO_TARGET_DIR:-$REPO/target}/release/clawos-scripted-provider" --script "$OUT/vm/scenario-pages.json" \
  --listen "127.0.0.1:$SCENARIO_WEB_PORT" >/dev/null &
SCENARIO_WEB_PID=$!

# Script building: one reply per line, then `replies` gathers them.
call() { tool_call_reply "$@" && echo; }
say() { text_reply "$1" 60 "${2:-8}" && echo; }
replies() { jq -cs '{replies: .}'; }

# scenario_agent NAME PORT SCRIPT [AUTONOMY [EXTRA_TOML]]: agent NAME with
# its own scripted provider (59-agent-turns.sh's scripted_agent), at
# autonomy level AUTONOMY (full by default), EXTRA_TOML appended.
scenario_agent() {
  start_provider "clawos-test-$1" "$2" "$3" &&
    vm_ssh "sed -e s/$SCRIPTED_PORT/$2/ -e 's/^level = \"full\"/level = \"${4:-full}\"/' /run/clawos-test/scripted.toml > /run/clawos-test/$1.toml &&
            printf '%b' '${5:-}' >> /run/clawos-test/$1.toml &&
            clawctl agent create $1 --config /run/clawos-test/$1.toml >/dev/null"
}

# web-fetch installed with a grant for exactly the page server; the
# guest-side helpers the checks below source.
scenarios_ready() {
    vm_push <(cat <<'GUEST'
# The scenarios' helpers in the guest (tests/vm/checks/71-scenarios.sh).
# result AGENT CALL: what the model was given as the result of call CALL.
result() {
  jq -rs --arg c "$2" '[.[].body.messages[]? | select(.role == "tool" and .tool_call_id == $c) | .content][0] // ""' \
    "/run/clawos-test/clawos-test-$1.jsonl"
}
# chat AGENT MESSAGE [SESSION]: one turn, its outcome as JSON.
chat() { clawctl chat --agent "$1" -m "$2" ${3:+--session "$3"} --json; }
# expect JSON FILTER: fails, printing JSON and FILTER, unless FILTER holds.
expect() { printf '%s\n' "$1" | jq -e "$2" >/dev/null || { printf '%s\n' "$1"; echo "expected: $2"; return 1; }; }
# contains TEXT PART [WHAT]: fails, saying so, unless TEXT contains PART.
contains() { [[ $1 == *"$2"* ]] || { echo "${3:-text} lacks \"$2\": $1"; return 1; }; }
# wait_runs AGENT JOB N: until job JOB has N runs that are no longer running.
wait_runs() {
  for _ in $(seq 120); do
    clawctl schedule show "$1" "$2" --json 2>/dev/null |
      jq -e "[.runs[] | select(.status != \"started\")] | length >= $3" >/dev/null && return 0
    sleep 1
  done
  clawctl schedule show "$1" "$2"; return 1
}
# slot_s RUN_JSON: a run's slot, seconds since the epoch.
slot_s() { jq -r '.slot | sub("\\.[0-9]+"; "") | fromdateiso8601' <<<"$1"; }
GUEST
    ) /run/clawos-test/scenario.sh &&
    vm_ssh "clawctl tool install /usr/lib/clawos/tools/web-fetch-v0.1.0.wasm --definition /usr/lib/clawos/tools/web-fetch.json \
              --grant network:outbound:10.0.2.2:$SCENARIO_WEB_PORT --yes >/dev/null"
}
check "scenarios: web-fetch installed with a grant for exactly the scenarios' page server" scenarios_ready

# 1. Health investigation: a goal and its workspace, symptoms remembered in
# one session and recalled in another, research through web_fetch, a
# briefing, the goal completed.
scenario_1() {
  local script
  script=$({ call s1-1 goal_create '{"title": "Headache research", "description": "Track and research my recurring headaches.", "state": "active"}'
             call s1-2 file_write '{"path": "artifacts/symptom-log.md", "content": "# Symptom log\n- 2026-11-02: headache after poor sleep, 4 hours\n"}'
             call s1-3 memory_store '{"content": "Symptom 2026-11-02: headache after poor sleep, lasted 4 hours", "category": "symptoms"}'
             say "Goal set up; first symptom logged."
             call s1-4 memory_recall '{"query": "headache poor sleep", "category": "symptoms"}'
             call s1-5 memory_store '{"content": "Symptom 2026-11-20: headache after skipping lunch", "category": "symptoms"}'
             call s1-6 web-fetch "{\"url\": \"$SCENARIO_WEB/headaches\"}"
             call s1-7 file_write '{"path": "artifacts/doctor-briefing.md", "content": "# Briefing\n- 2026-11-02 poor sleep\n- 2026-11-20 skipped lunch\nAsk: tension headaches?\n"}'
             say "Briefing ready."
             call s1-8 memory_store '{"content": "Diagnosis 2026-11-27: tension headaches", "category": "core"}'
             call s1-9 goal_update '{"id": "headache-research", "state": "completed", "note": "diagnosed: tension headaches", "artifact": "artifacts/doctor-briefing.md"}'
             say "Noted the diagnosis; goal completed."; } | replies) || return 1
  scenario_agent vm-s1 18091 "$script" || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s1
    # 1.1-1.3: the goal, its workspace, the first symptom (session one).
    out=$(chat vm-s1 "Help me track and research my recurring headaches. Last night: headache after poor sleep.")
    expect "$out" ".status == \"done\""
    test -f $d/goals/active/headache-research.md && test -f $d/artifacts/symptom-log.md
    # 1.3-1.6: a later session (a new one, as after closing every tab)
    # recalls the first symptom, stores the new one, researches, briefs.
    out=$(chat vm-s1 "Another headache today, after skipping lunch. What do we know?")
    expect "$out" ".status == \"done\" and .answer == \"Briefing ready.\""
    contains "$(result vm-s1 s1-4)" "2026-11-02: headache after poor sleep" "the recall (1.4)"
    contains "$(result vm-s1 s1-6)" "triggered by poor sleep and skipped meals" "the fetched page (1.5)"
    grep -q "2026-11-20 skipped lunch" $d/artifacts/doctor-briefing.md
    # 1.7: the diagnosis remembered, the goal archived as completed.
    expect "$(chat vm-s1 "The doctor says: tension headaches.")" ".answer == \"Noted the diagnosis; goal completed.\""
    test ! -e $d/goals/active/headache-research.md
    expect "$(clawctl goal show vm-s1 headache-research --json)" ".state == \"completed\" and .artifacts == [\"artifacts/doctor-briefing.md\"]"
    expect "$(clawctl memory count --agent vm-s1 --category symptoms --json)" ".count == 2"'
}
check "scenario 1 (health investigation): symptoms recalled in a later session, research fetched, a briefing written, the goal completed" scenario_1

# 2. Long-running code refactoring: the project in the agent's directory,
# a plan, each stage one commit with the agent's own message, the work
# going on in the same session after agent-loop restarted (the next day).
scenario_2() {
  local script
  script=$({ call s2-1 file_list '{"path": "project/auth"}'
             call s2-2 file_read '{"path": "project/auth/session.rs"}'
             call s2-3 file_write '{"path": "artifacts/jwt-migration-plan.md", "content": "# Plan\n1. token generation\n2. middleware\n"}'
             call s2-4 file_write '{"path": "project/auth/session.rs", "content": "pub fn token() -> Jwt { Jwt::sign(claims()) }\n"}'
             say "Stage 1: token generation now signs JWTs."
             call s2-5 file_write '{"path": "project/auth/middleware.rs", "content": "pub fn check(r: &Request) -> bool { Jwt::verify(r.bearer()) }\n"}'
             call s2-6 file_write '{"path": "artifacts/jwt-migration-summary.md", "content": "# Summary\nSessions replaced by JWTs in two stages.\n"}'
             say "Stage 2: the middleware verifies JWTs."; } | replies) || return 1
  scenario_agent vm-s2 18092 "$script" || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s2
    # 2.1: the operator puts the project where the agent works.
    printf "pub fn token() -> SessionId { SessionId::new() }\n" | clawctl fs write --parents $d/project/auth/session.rs
    printf "pub fn check(r: &Request) -> bool { r.session().is_some() }\n" | clawctl fs write $d/project/auth/middleware.rs
    # 2.3-2.7: reads the code, plans, refactors token generation.
    out=$(chat vm-s2 "Migrate authentication from sessions to JWT, stage by stage.")
    expect "$out" ".status == \"done\""
    session=$(echo "$out" | jq -r .session_id)
    contains "$(result vm-s2 s2-1)" "session.rs" "the listing (2.3)"
    contains "$(result vm-s2 s2-2)" "SessionId::new()" "the read (2.3)"
    # 2.8-2.9: the next day (agent-loop restarted), the same session goes on.
    systemctl restart clawos-agent-loop
    for _ in $(seq 30); do clawctl agent list >/dev/null 2>&1 && break; sleep 1; done
    expect "$(chat vm-s2 "Continue with the middleware." "$session")" ".status == \"done\""
    jq -se ".[5].body.messages | any(.[]; .role == \"tool\" and .tool_call_id == \"s2-2\")" /run/clawos-test/clawos-test-vm-s2.jsonl >/dev/null ||
      { echo "the second day'"'"'s request lacks the first day'"'"'s work (2.9)"; exit 1; }
    # 2.10-2.11: each stage one commit, in the agent'"'"'s words.
    log=$(clawctl agent history vm-s2 --json)
    expect "$log" "(.commits | length) == 2
      and (.commits[1].message | startswith(\"Stage 1: token generation now signs JWTs.\n\"))
      and (.commits[1].files | index(\"project/auth/session.rs\") != null and index(\"artifacts/jwt-migration-plan.md\") != null)
      and (.commits[0].message | startswith(\"Stage 2: the middleware verifies JWTs.\n\"))
      and .commits[0].files == [\"artifacts/jwt-migration-summary.md\", \"project/auth/middleware.rs\"]"
    grep -q "Jwt::verify" $d/project/auth/middleware.rs'
}
check "scenario 2 (code refactoring): the project read and changed in the agent's directory, each stage its own commit, the session going on after a restart" scenario_2

# 3. Trip co-planning: research, an itinerary and its second version, a
# preference remembered and recalled by a job the agent scheduled, the
# goal completed.
scenario_3() {
  local script
  script=$({ call s3-1 goal_create '{"title": "Tokyo trip", "description": "5 days in April.", "state": "active"}'
             call s3-2 web-fetch "{\"url\": \"$SCENARIO_WEB/tokyo-weather\"}"
             call s3-3 file_write '{"path": "artifacts/tokyo-itinerary-v1.md", "content": "# Tokyo v1\nDay 1: Shinjuku\n"}'
             say "Itinerary v1 drafted."
             call s3-4 memory_store '{"content": "Prefers quieter neighborhoods for the Tokyo trip", "category": "preferences"}'
             call s3-5 file_write '{"path": "artifacts/tokyo-itinerary-v2.md", "content": "# Tokyo v2\nDay 1: Yanaka\n"}'
             call s3-6 schedule_add '{"name": "hotel-prices", "delay": "5s", "prompt": "Check hotel prices for the Tokyo trip."}'
             say "v2 written; I will check hotel prices."
             call s3-7 memory_recall '{"query": "neighborhood preference Tokyo", "category": "preferences"}'
             call s3-8 web-fetch "{\"url\": \"$SCENARIO_WEB/tokyo-hotels\"}"
             call s3-9 file_write '{"path": "artifacts/tokyo-hotels.md", "content": "# Hotels\nYanaka Ryokan: 14,000 yen (quiet)\n"}'
             say "Hotel prices updated."
             call s3-10 goal_update '{"id": "tokyo-trip", "state": "completed", "artifact": "artifacts/tokyo-itinerary-v2.md"}'
             say "Trip planned."; } | replies) || return 1
  scenario_agent vm-s3 18093 "$script" || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s3
    # 3.1-3.4
    expect "$(chat vm-s3 "Plan a 5-day trip to Tokyo in April.")" ".answer == \"Itinerary v1 drafted.\""
    contains "$(result vm-s3 s3-2)" "cherry blossoms" "the weather page (3.3)"
    test -f $d/goals/active/tokyo-trip.md
    # 3.5-3.7: feedback remembered, v2, a reminder scheduled.
    expect "$(chat vm-s3 "I prefer quieter neighborhoods.")" ".answer == \"v2 written; I will check hotel prices.\""
    # 3.8: the job fires after its delay; its turn recalls the preference.
    wait_runs vm-s3 hotel-prices 1
    show=$(clawctl schedule show vm-s3 hotel-prices --json)
    expect "$show" ".runs[0].status == \"ok\" and .runs[0].message == \"Hotel prices updated.\" and .job.kind == \"delay\""
    contains "$(result vm-s3 s3-7)" "quieter neighborhoods" "the job'"'"'s recall (3.8)"
    grep -q "Yanaka Ryokan" $d/artifacts/tokyo-hotels.md
    # 3.9: approved; the goal completes and its file moves.
    expect "$(chat vm-s3 "The plan is approved.")" ".answer == \"Trip planned.\""
    test -f $d/goals/completed/tokyo-trip.md && test ! -e $d/goals/active/tokyo-trip.md
    # Both versions kept, each in the commit that wrote it.
    log=$(clawctl agent history vm-s3 --json)
    expect "$log" "any(.commits[]; .files | index(\"artifacts/tokyo-itinerary-v1.md\") != null)
      and any(.commits[]; (.files | index(\"artifacts/tokyo-itinerary-v2.md\") != null) and (.files | index(\"artifacts/tokyo-itinerary-v1.md\") == null))"
    test -f $d/artifacts/tokyo-itinerary-v1.md && test -f $d/artifacts/tokyo-itinerary-v2.md'
}
check "scenario 3 (trip planning): a delay job the agent scheduled fires and recalls a remembered preference; both itinerary versions kept; the goal completed" scenario_3

# 4. Security audit sentinel: a daily cron job, fired on two days by a
# faked clock (time sync stopped, the wall clock set just before each
# slot, then put back); the second day's run finds the CVE already known
# in memory and raises no second notification.
scenario_4() {
  local script now slot
  now=$(vm_ssh 'date +%s') || return 1
  slot=$(( (now / 60 + 3) * 60 ))
  script=$({ call s4-1 file_read '{"path": "project/Cargo.toml"}'
             call s4-2 memory_store '{"content": "Dependencies: libfoo 1.2, serde 1.0", "category": "dependencies"}'
             call s4-3 schedule_add "{\"name\": \"cve-check\", \"cron\": \"$(date -u -d "@$slot" +'%-M %-H') * * *\", \"tz\": \"UTC\", \"prompt\": \"Check for new CVEs.\"}"
             say "Daily CVE check scheduled."
             call s4-4 web-fetch "{\"url\": \"$SCENARIO_WEB/cve-feed\"}"
             call s4-5 memory_recall '{"query": "known CVE libfoo", "category": "cves"}'
             call s4-6 memory_store '{"content": "Known: CVE-2026-0001 in libfoo, fixed in 1.3", "category": "cves"}'
             call s4-7 file_write '{"path": "artifacts/security-report.md", "content": "# Security report\n- CVE-2026-0001 (libfoo 1.2): upgrade to 1.3\n"}'
             call s4-8 notify '{"title": "New vulnerability in libfoo", "body": "CVE-2026-0001: upgrade to 1.3.", "level": "warning"}'
             say "New: CVE-2026-0001."
             call s4-9 web-fetch "{\"url\": \"$SCENARIO_WEB/cve-feed\"}"
             call s4-10 memory_recall '{"query": "known CVE libfoo", "category": "cves"}'
             say "No new CVEs: CVE-2026-0001 is known."; } | replies) || return 1
  scenario_agent vm-s4 18094 "$script" || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s4
    printf "[dependencies]\nlibfoo = \"1.2\"\nserde = \"1.0\"\n" | clawctl fs write --parents $d/project/Cargo.toml
    # 4.1-4.4
    expect "$(chat vm-s4 "Monitor my project'"'"'s dependencies for security vulnerabilities.")" ".answer == \"Daily CVE check scheduled.\""
    contains "$(result vm-s4 s4-1)" "libfoo" "the manifest read (4.2)"
    # The scheduler has read the job before the clock moves.
    for _ in $(seq 30); do clawctl schedule show vm-s4 cve-check --json 2>/dev/null | jq -e ".job.kind == \"cron\"" >/dev/null && break; sleep 1; done
    expect "$(clawctl schedule show vm-s4 cve-check --json)" ".job.next_fire != null and (.runs | length) == 0"' || return 1
  # 4.5-4.7 on day one, then day two. The clock is put back from the
  # guest's own monotonic clock, whatever happens in between.
  vm_ssh "echo \$(date +%s) \$(cut -d' ' -f1 /proc/uptime) > /run/clawos-test/clock &&
          systemctl is-active -q systemd-timesyncd && touch /run/clawos-test/timesyncd; systemctl stop systemd-timesyncd;
          date -s @$((slot - 5)) >/dev/null" || return 1
  vm_ssh ". /run/clawos-test/scenario.sh; wait_runs vm-s4 cve-check 1 && date -s @$((slot + 86400 - 5)) >/dev/null && wait_runs vm-s4 cve-check 2"
  local waited=$?
  vm_ssh 'read -r real uptime < /run/clawos-test/clock
          date -s @$(awk -v r="$real" -v u="$uptime" "{ printf \"%d\", r + \$1 - u }" /proc/uptime) >/dev/null
          if test -e /run/clawos-test/timesyncd; then systemctl start systemd-timesyncd; fi' || return 1
  (( waited == 0 )) || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s4
    runs=$(clawctl schedule show vm-s4 cve-check --json)
    # 4.5: one run a day, at its slot.
    expect "$runs" "(.runs | length) == 2 and ([.runs[].status] | unique) == [\"ok\"]
      and .runs[1].message == \"New: CVE-2026-0001.\" and .runs[0].message == \"No new CVEs: CVE-2026-0001 is known.\""
    test $(( $(slot_s "$(jq -c ".runs[0]" <<<"$runs")") - $(slot_s "$(jq -c ".runs[1]" <<<"$runs")") )) -eq 86400
    # 4.6: the finding in memory and the report; day two recalls it as known.
    contains "$(result vm-s4 s4-10)" "Known: CVE-2026-0001" "day two'"'"'s recall (4.8: new vs known)"
    grep -q "CVE-2026-0001" $d/artifacts/security-report.md
    # 4.7: one notification, on day one only.
    expect "$(clawctl notifications --agent vm-s4 --all --json)" "[.notifications[] | select(.source == \"agent\")] | length == 1
      and .[0].title == \"New vulnerability in libfoo\" and .[0].level == \"warning\""'
}
check "scenario 4 (security sentinel): a daily cron job runs on two days of a faked clock; the second finds the CVE known in memory; one notification" scenario_4

# 5. Writing companion: characters and plot threads as artifacts and
# memories; a contradiction in a later chapter flagged from memory; the
# story bible kept current; open threads answered from the files.
scenario_5() {
  local script
  script=$({ call s5-1 goal_create '{"title": "Novel", "description": "Track characters, plots, themes.", "state": "active"}'
             call s5-2 file_write '{"path": "artifacts/characters/alex.md", "content": "# Alex\n- eyes: brown (chapter 3)\n"}'
             call s5-3 file_write '{"path": "artifacts/plot-threads/missing-letter.md", "content": "# The missing letter\nstatus: open\n"}'
             call s5-4 memory_store '{"content": "Alex has brown eyes (chapter 3)", "category": "characters"}'
             call s5-5 file_write '{"path": "artifacts/story-bible.md", "content": "# Story bible\n- Alex: brown eyes (ch. 3)\n- Thread: the missing letter (open)\n"}'
             say "Story bible started."
             call s5-6 memory_recall '{"query": "Alex eyes", "category": "characters"}'
             call s5-7 file_write '{"path": "artifacts/story-bible.md", "content": "# Story bible\n- Alex: brown eyes (ch. 3); blue in ch. 7?\n- Thread: the missing letter (open)\n- Chapter 7: the storm\n"}'
             say "In chapter 3, Alex had brown eyes; now you say blue."
             call s5-8 file_list '{"path": "artifacts/plot-threads"}'
             call s5-9 file_read '{"path": "artifacts/plot-threads/missing-letter.md"}'
             say "Open: the missing letter."; } | replies) || return 1
  scenario_agent vm-s5 18095 "$script" || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s5
    # 5.1-5.4, 5.6
    expect "$(chat vm-s5 "Help me write a novel. Chapter 3: Alex, brown-eyed, finds the letter is missing.")" ".answer == \"Story bible started.\""
    # 5.5: a later session; the detail stored then is recalled now.
    expect "$(chat vm-s5 "Chapter 7: Alex looked at her with his blue eyes during the storm.")" \
      ".answer == \"In chapter 3, Alex had brown eyes; now you say blue.\""
    contains "$(result vm-s5 s5-6)" "Alex has brown eyes (chapter 3)" "the recall (5.5)"
    grep -q "Chapter 7: the storm" $d/artifacts/story-bible.md
    # 5.7: the open threads, from the files.
    expect "$(chat vm-s5 "What unresolved plot threads do I have?")" ".answer == \"Open: the missing letter.\""
    contains "$(result vm-s5 s5-8)" "missing-letter.md" "the threads listed (5.7)"
    contains "$(result vm-s5 s5-9)" "status: open" "the thread read (5.7)"
    test -f $d/artifacts/characters/alex.md'
}
check "scenario 5 (writing companion): a contradiction flagged from a detail remembered in an earlier session; the story bible kept current; open threads found" scenario_5

# 6. Skill learning: a misconception remembered, two spaced reviews the
# agent schedules at set times that fire at them, progress accumulating
# across the reviews.
scenario_6() {
  local script now
  now=$(vm_ssh 'date +%s') || return 1
  script=$({ call s6-1 file_write '{"path": "artifacts/rust-curriculum.md", "content": "# Rust\n1. ownership\n2. lifetimes\n"}'
             call s6-2 memory_store '{"content": "Misconception: thinks lifetimes extend how long a value lives", "category": "misconceptions"}'
             call s6-3 schedule_add "{\"name\": \"review-1\", \"at\": \"$(date -u -d "@$((now + 20))" +%FT%TZ)\", \"prompt\": \"Spaced review of lifetimes.\"}"
             call s6-4 schedule_add "{\"name\": \"review-2\", \"at\": \"$(date -u -d "@$((now + 30))" +%FT%TZ)\", \"prompt\": \"Second review of lifetimes.\"}"
             say "Curriculum set; reviews scheduled."
             call s6-5 memory_recall '{"query": "lifetimes misconception", "category": "misconceptions"}'
             call s6-6 file_write '{"path": "artifacts/rust-progress.md", "content": "lifetimes: reviewed 1\n"}'
             say "Reviewed lifetimes once."
             call s6-7 file_read '{"path": "artifacts/rust-progress.md"}'
             call s6-8 file_write '{"path": "artifacts/rust-progress.md", "content": "lifetimes: reviewed 2, mastered\n"}'
             say "Lifetimes mastered."; } | replies) || return 1
  scenario_agent vm-s6 18096 "$script" || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s6
    # 6.1-6.5
    expect "$(chat vm-s6 "Teach me Rust. I think lifetimes make values live longer.")" ".answer == \"Curriculum set; reviews scheduled.\""
    # 6.5-6.6: each review at its time, the second 10 s after the first.
    wait_runs vm-s6 review-1 1; wait_runs vm-s6 review-2 1
    one=$(clawctl schedule show vm-s6 review-1 --json | jq -c ".runs[0]"); two=$(clawctl schedule show vm-s6 review-2 --json | jq -c ".runs[0]")
    expect "$one" ".status == \"ok\" and .message == \"Reviewed lifetimes once.\""
    expect "$two" ".status == \"ok\" and .message == \"Lifetimes mastered.\""
    test $(( $(slot_s "$two") - $(slot_s "$one") )) -eq 10
    for run in "$one" "$two"; do
      test "$(jq -r ".started_at | sub(\"\\\\.[0-9]+\"; \"\") | fromdateiso8601" <<<"$run")" -ge "$(slot_s "$run")"
    done
    contains "$(result vm-s6 s6-5)" "lifetimes extend how long a value lives" "the review'"'"'s recall (6.6)"
    # 6.7: progress accumulates across the reviews.
    contains "$(result vm-s6 s6-7)" "reviewed 1" "the second review'"'"'s read (6.7)"
    grep -q "reviewed 2, mastered" $d/artifacts/rust-progress.md'
}
check "scenario 6 (skill learning): two spaced reviews fire at their times, 10 s apart; the misconception recalled; progress accumulates" scenario_6

# 7. Research lab: evidence stored by category and kept in step with the
# evidence matrix; the assessment delegated to a read-only sub-agent that
# recalls by category, cannot write, and whose cost is the parent's.
scenario_7() {
  local script
  script=$({ call s7-1 memory_store '{"content": "Evidence: a 2024 trial found fasting improved recall", "category": "evidence-pro"}'
             call s7-2 memory_store '{"content": "Evidence: a 2025 study found fasting slowed reaction time", "category": "evidence-con"}'
             call s7-3 file_write '{"path": "artifacts/evidence-matrix.md", "content": "| pro | con | neutral |\n|---|---|---|\n| a 2024 trial found fasting improved recall | a 2025 study found fasting slowed reaction time | |\n"}'
             say "Evidence stored and matrix updated."
             call s7-4 delegate '{"task": "Sum up the evidence by category.", "tools": ["memory_recall", "file_read"], "autonomy": "read-only", "max_steps": 4}'
             call s7-5 file_write '{"path": "artifacts/evidence-matrix.md", "content": "erased"}'
             call s7-6 memory_recall '{"query": "fasting evidence", "category": "evidence-pro"}'
             say "Pro: 2024 trial (recall up). Con: see the matrix."
             say "Mixed evidence. Gap: no data on sleep deprivation."; } | replies) || return 1
  scenario_agent vm-s7 18097 "$script" || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s7
    # 7.1-7.5
    expect "$(chat vm-s7 "Research whether intermittent fasting affects cognition. Two papers: ...")" ".answer == \"Evidence stored and matrix updated.\""
    (timeout 60 clawctl events --name subagent.started --name subagent.ended > /run/clawos-test/s7-events.jsonl 2>/dev/null < /dev/null &)
    sleep 1
    # 7.6-7.7: the assessment, through a sub-agent.
    out=$(chat vm-s7 "What is the current assessment?")
    expect "$out" ".status == \"done\" and .answer == \"Mixed evidence. Gap: no data on sleep deprivation.\" and .tool_calls == 1"
    sub=$(result vm-s7 s7-4)
    contains "$sub" "Pro: 2024 trial (recall up)" "the sub-agent'"'"'s answer, the delegate result"
    session=$(sed -n "s/^sub-agent session \(d-[0-9a-f]*\): done after 3 steps and 2 tool calls.*/\1/p" <<<"$sub")
    test -n "$session" || { echo "$sub"; exit 1; }
    # Its scope: no file_write (the parent'"'"'s tool, not given), recall by category.
    contains "$(result vm-s7 s7-5)" "there is no tool \`file_write\`" "the sub-agent'"'"'s write"
    grep -q "erased" $d/artifacts/evidence-matrix.md && { echo "the sub-agent wrote"; exit 1; }
    pro=$(result vm-s7 s7-6)
    contains "$pro" "2024 trial" "the pro recall (7.6)"
    [[ $pro != *"2025 study"* ]] || { echo "the pro recall returned con evidence: $pro"; exit 1; }
    # Its transcript is its own session; its spend is the parent turn'"'"'s.
    expect "$(clawctl session show vm-s7 "$session" --json)" "[.entries[].role] == [\"user\", \"assistant\", \"tool\", \"assistant\", \"tool\", \"assistant\"]"
    spent=$(sed -n "1s/.*(\([0-9]*\) tokens, .*/\1/p" <<<"$sub")
    expect "$out" ".input_tokens + .output_tokens > $spent and $spent > 0"
    for _ in $(seq 20); do grep -q subagent.ended /run/clawos-test/s7-events.jsonl && break; sleep 0.5; done
    jq -se "any(.[]; .payload.event_name == \"subagent.ended\" and .payload.event_data.session_id == \"$session\" and .payload.event_data.status == \"done\")" \
      /run/clawos-test/s7-events.jsonl >/dev/null || { cat /run/clawos-test/s7-events.jsonl; exit 1; }
    # The matrix in step with memory: both stored pieces of evidence are in it.
    test "$(clawctl memory list --agent vm-s7 --limit 50 --json | jq "[.entries[] | select(.category | startswith(\"evidence-\"))] | length")" -eq 2
    clawctl memory list --agent vm-s7 --limit 50 --json | jq -r ".entries[] | select(.category | startswith(\"evidence-\")) | .content | sub(\"^Evidence: \"; \"\")" |
      while read -r evidence; do grep -qF "$evidence" $d/artifacts/evidence-matrix.md || { echo "not in the matrix: $evidence"; exit 1; }; done'
}
check "scenario 7 (research lab): evidence by category in step with the matrix; the assessment by a read-only sub-agent (delegate) whose scope and cost are checked" scenario_7

# 8. Browsing augmentation: a page read through web_fetch, connected to an
# active goal; the save into the project's notes waits for the operator
# and, approved, keeps what the file held.
scenario_8() {
  local script
  script=$({ call s8-1 web-fetch "{\"url\": \"$SCENARIO_WEB/wasm-article\"}"
             call s8-2 goal_list '{}'
             call s8-3 file_read '{"path": "artifacts/wasm-research.md"}'
             call s8-4 file_write '{"path": "artifacts/wasm-research.md", "content": "# WASM research\n- interpreter design notes\n- tail calls cut dispatch overhead by 30%\n"}'
             say "Saved the finding to wasm-research.md."; } | replies) || return 1
  scenario_agent vm-s8 18098 "$script" supervised '[permissions]\ntool = "auto_grant"\nnetwork = "auto_grant"\n' || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s8
    printf "# WASM research\n- interpreter design notes\n" | clawctl fs write --parents $d/artifacts/wasm-research.md
    clawctl ipc call fs-engine goal_create "{\"agent\": \"vm-s8\", \"title\": \"Clawser project\", \"description\": \"A WASM agent runtime.\"}" >/dev/null
    # 8.1-8.5: the page, the goals it relates to, the offer to save.
    out=$(chat vm-s8 "I am reading '"$SCENARIO_WEB"'/wasm-article; anything for my projects?") || true
    expect "$out" ".status == \"waiting\""
    contains "$(result vm-s8 s8-1)" "tail calls cut interpreter dispatch overhead" "the page (8.2)"
    contains "$(result vm-s8 s8-2)" "clawser-project" "the goals (8.3)"
    # 8.6: nothing written before the operator says so.
    test "$(cat $d/artifacts/wasm-research.md)" = "$(printf "# WASM research\n- interpreter design notes")"
    id=$(clawctl approvals list --json | jq -r "[.approvals[] | select(.agent == \"vm-s8\")][0] | select(.tool_name == \"file_write\") | .id")
    expect "$(clawctl approvals approve "$id" --json)" ".status == \"done\" and .answer == \"Saved the finding to wasm-research.md.\""
    grep -q "^- interpreter design notes$" $d/artifacts/wasm-research.md && grep -q "tail calls" $d/artifacts/wasm-research.md'
}
check "scenario 8 (browsing augmentation): a fetched page related to an active goal; the save waits for approval and keeps the file's content" scenario_8

# 9. Digital maintenance: a scheduled scan finds duplicates across
# directories, suggests the move by a notification, and its write to the
# maintenance log waits for the operator (the job waits; nothing moved).
scenario_9() {
  local script
  script=$({ call s9-1 file_list '{"path": "docs"}'
             call s9-2 file_list '{"path": "old"}'
             call s9-3 file_read '{"path": "docs/cv-2024.md"}'
             call s9-4 file_read '{"path": "old/cv-2024-copy.md"}'
             call s9-5 notify '{"title": "Duplicate CVs", "body": "docs/cv-2024.md and old/cv-2024-copy.md are the same: move both to drafts/cv/?"}'
             call s9-6 file_write '{"path": "artifacts/maintenance-log.md", "content": "- scan: duplicate CVs found, move to drafts/cv/ suggested\n"}'
             say "Scan done; one suggestion."; } | replies) || return 1
  scenario_agent vm-s9 18099 "$script" supervised || return 1
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s9
    printf "# CV\nJane Doe, engineer\n" | clawctl fs write --parents $d/docs/cv-2024.md
    printf "# CV\nJane Doe, engineer\n" | clawctl fs write --parents $d/old/cv-2024-copy.md
    # 9.1-9.2: the periodic scan is a job.
    clawctl schedule add vm-s9 scan --delay 5s --prompt "Scan the workspace for duplicates and renewals." >/dev/null
    wait_runs vm-s9 scan 1
    expect "$(clawctl schedule show vm-s9 scan --json)" ".runs[0].status == \"waiting\""
    # 9.3: the same content found in two directories.
    contains "$(result vm-s9 s9-3)" "Jane Doe, engineer" "the first copy read (9.3)"
    test "$(result vm-s9 s9-3)" = "$(result vm-s9 s9-4)"
    # 9.4: a suggestion, not a change: the files are where they were.
    expect "$(clawctl notifications --agent vm-s9 --json)" "any(.notifications[]; .title == \"Duplicate CVs\")"
    test -f $d/docs/cv-2024.md && test -f $d/old/cv-2024-copy.md && test ! -e $d/artifacts/maintenance-log.md
    # 9.6: approved, the log records the action.
    id=$(clawctl approvals list --json | jq -r "[.approvals[] | select(.agent == \"vm-s9\" and .tool_name == \"file_write\")][0].id")
    expect "$(clawctl approvals approve "$id" --json)" ".status == \"done\" and .answer == \"Scan done; one suggestion.\""
    grep -q "duplicate CVs found" $d/artifacts/maintenance-log.md'
}
check "scenario 9 (digital maintenance): a scheduled scan finds duplicates across directories, suggests by notification, and its log write waits for approval" scenario_9

# 10. Corporate lockdown: read-only autonomy, the remote provider reached
# only through the company's HTTP proxy with a key from the vault, and no
# write anywhere: the agent still reads and answers.
scenario_10() {
  local script
  script=$({ call s10-1 file_read '{"path": "notes.md"}'
             call s10-2 file_write '{"path": "notes.md", "content": "overwritten"}'
             call s10-3 file_write '{"path": "../vm-s1/soul.md", "content": "planted"}'
             call s10-4 memory_store '{"content": "lockdown"}'
             say "Your notes: quarterly review on Friday. I cannot change anything here."; } | replies) || return 1
  start_provider clawos-test-vm-s10 18100 "$script" || return 1
  vm_ssh 'set -e
    head -c 24 /dev/urandom | od -An -tx1 | tr -d " \n" > /run/clawos-test/s10.key
    clawctl secret set provider-s10 < /run/clawos-test/s10.key
    cat > /run/clawos-test/vm-s10.toml <<EOF
[model]
provider = "corp"
model = "corp-1"
max_retries = 0
[autonomy]
level = "read-only"
[providers.corp]
kind = "openai"
base_url = "http://provider.invalid:18100/v1"
proxy = "http://127.0.0.1:18100"
api_key_secret = "provider-s10"
EOF
    clawctl agent create vm-s10 --config /run/clawos-test/vm-s10.toml >/dev/null
    printf "quarterly review on Friday\n" | clawctl fs write /clawfs/agents/vm-s10/notes.md'
  vm_ssh '. /run/clawos-test/scenario.sh; set -e; d=/clawfs/agents/vm-s10; key=$(cat /run/clawos-test/s10.key)
    # 10.3-10.5: the agent works: it reads and answers.
    out=$(chat vm-s10 "Summarize my notes.")
    expect "$out" ".status == \"done\" and .answer == \"Your notes: quarterly review on Friday. I cannot change anything here.\""
    contains "$(result vm-s10 s10-1)" "quarterly review" "the read"
    # 10.4: every request went through the proxy, with the vault key.
    jq -se --arg auth "Bearer $key" "length == 5 and all(.[]; .proxied_to == \"provider.invalid:18100\" and (.headers | any(.[]; .[0] == \"authorization\" and .[1] == \$auth)))" \
      /run/clawos-test/clawos-test-vm-s10.jsonl >/dev/null || { jq -c "{proxied_to, path}" /run/clawos-test/clawos-test-vm-s10.jsonl; exit 1; }
    # 10.6: no write, inside its directory or out, and nothing waits for approval.
    for call in s10-2 s10-3 s10-4; do contains "$(result vm-s10 $call)" "error: not run" "$call"; done
    test "$(cat $d/notes.md)" = "quarterly review on Friday" && ! grep -q planted /clawfs/agents/vm-s1/soul.md
    expect "$(clawctl approvals list --json)" "all(.approvals[]; .agent != \"vm-s10\")"
    # The key is in no file of the agent'"'"'s, its transcript or the journal.
    ! grep -rqF "$key" $d /run/clawos-test/vm-s10.toml
    session=$(echo "$out" | jq -r .session_id)
    ! clawctl session show vm-s10 "$session" --json | grep -qF "$key"
    ! journalctl -b -o cat | grep -qF "$key"'
}
check "scenario 10 (corporate lockdown): a read-only agent reaches its remote provider only through an HTTP proxy, with its key from the vault, and writes nothing" scenario_10
kill "$SCENARIO_WEB_PID" 2>/dev/null || true
