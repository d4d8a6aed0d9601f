#!/usr/bin/env bash
# `make test`: every test, one step after the other (make lint,
# test-scripts, test-unit, test-pg, test-ebpf-vm, test-vm), stopping at the
# first that fails. Each step's time goes into out/test-times.tsv beside
# the boot suite's phases and checks (tests/vm/run.sh writes them there,
# CLAWOS_TEST_TIMES), and the end prints them all with what grew since the
# last run (times-report.sh; the last run's figures are kept in the cache,
# which outlives a clone).
source "$(dirname "$0")/lib.sh"
export CLAWOS_TEST_TIMES="$OUT/test-times.tsv"
: > "$CLAWOS_TEST_TIMES"
status=0
for step in lint test-scripts test-unit test-pg test-ebpf-vm test-vm; do
  t0=$SECONDS
  make --no-print-directory -C "$REPO" "$step" || status=$?
  printf 'step\t%s\t%s\n' "$((SECONDS - t0))" "make $step" >> "$CLAWOS_TEST_TIMES"
  ((status == 0)) || { warn "make $step failed"; break; }
done
echo
bash "$REPO/scripts/times-report.sh" "$CLAWOS_TEST_TIMES" "$CACHE/test-times/make-test.tsv"
echo "make test: $SECONDS s in all"
exit "$status"
