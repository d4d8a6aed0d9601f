# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The scenarios' state across a reboot (checks/71-scenarios.sh): what a
# user of each scenario comes back to after the box was off. Scenario 1's
# symptoms are recalled from memory (1: "memory persists across sessions",
# here across a power cycle), its files and completed goal are there;
# scenario 2's stages are still two commits; scenario 4's daily job is
# still scheduled with its two runs; scenario 7's sub-agent session kept.
check "scenarios after the reboot: memories recalled, workspace files, goal states, history, jobs and sub-agent sessions as they were" vm_ssh '
  set -e
  recall=$(clawctl memory recall --agent vm-s1 --category symptoms --json headache after poor sleep)
  echo "$recall" | jq -e "any(.results[]; .content | contains(\"2026-11-02: headache after poor sleep\"))" >/dev/null || { echo "$recall"; exit 1; }
  grep -q "2026-11-20 skipped lunch" /clawfs/agents/vm-s1/artifacts/doctor-briefing.md
  clawctl goal show vm-s1 headache-research --json | jq -e ".state == \"completed\"" >/dev/null
  clawctl agent history vm-s2 --json | jq -e "(.commits | length) == 2" >/dev/null
  clawctl schedule show vm-s4 cve-check --json | jq -e ".job.next_fire != null and (.runs | length) == 2" >/dev/null
  clawctl session list vm-s7 | grep -q "^d-[0-9a-f]\{32\} "'

# The job that fell due while the box was off (checks/98-schedule-while-off.sh)
# runs once after the boot; vm-s6's provider went with the reboot, so its
# turn may fail: the catch-up is the run, not its answer.
check_caught_up() {
  vm_ssh '
    for _ in $(seq 300); do
      run=$(clawctl schedule show vm-s6 while-off --json 2>/dev/null | jq -c ".runs[0] // empty")
      test -n "$run" && break; sleep 1
    done
    echo "$run" | jq -e ".manual == false and .status != \"missed\" and .status != \"skipped\"" >/dev/null || { clawctl schedule show vm-s6 while-off; exit 1; }
    test "$(clawctl schedule show vm-s6 while-off --json | jq ".runs | length")" -eq 1 || exit 1
    boot=$(( $(date +%s) - $(cut -d. -f1 /proc/uptime) ))
    started=$(echo "$run" | jq -r ".started_at | sub(\"\\\\.[0-9]+\"; \"\") | fromdateiso8601")
    test "$started" -ge "$boot" && echo $((started - boot)) > /run/clawos-test/catch-up.s'
}
check "schedule: a job due while the box was off runs once after the boot, once the clock is trusted" check_caught_up
log "scheduler: boot to the first catch-up run: $(vm_ssh 'cat /run/clawos-test/catch-up.s' 2>/dev/null || echo '?') s after the kernel started ($(vm_ssh 'test -e /run/systemd/timesync/synchronized && echo "the clock synchronised" || journalctl -b -u clawos-scheduler -o cat | grep -o "the clock is not synchronised [0-9]* s after boot" | head -n 1' 2>/dev/null))"
