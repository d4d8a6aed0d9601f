# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Just before the reboot (only 99-agent-in-flight-at-reboot.sh comes
# between this and the power-off): a job due while the box is off, an `at` job of
# vm-s6 (71-scenarios.sh) 150 s from now, with `once` and a grace that
# covers a slow boot. After the boot the scheduler trusts the clock (time
# sync, or clock_wait_seconds after boot), finds the slot missed and runs
# it once: after-reboot/62-scenarios.sh checks the run and prints how long
# after boot it started (specs/scheduler/README.md, "Missed runs").
check "schedule: a job falls due while the box is off (an at job 150 s from now, just before the power-off)" vm_ssh '
  clawctl schedule add vm-s6 while-off --at "$(date -u -d "+150 seconds" +%FT%TZ)" --missed once --grace 30m --prompt "Catch up." >/dev/null &&
  for _ in $(seq 30); do
    clawctl schedule show vm-s6 while-off --json 2>/dev/null | jq -e ".job.next_fire != null and (.runs | length) == 0" >/dev/null && exit 0
    sleep 1
  done
  clawctl schedule show vm-s6 while-off; exit 1'
