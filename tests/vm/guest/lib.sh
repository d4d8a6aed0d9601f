# shellcheck shell=bash
# The guest's side of the boot checks: sourced by run.sh inside the booted
# image, before the check files it runs. The host reads what these print
# (guest_checks, tests/vm/lib.sh), one record a line:
#   @@check <TAB> ok|FAIL <TAB> seconds <TAB> name   a check's result
#   @@out <TAB> text                                 the last lines a failed check printed
#   @@log <TAB> text                                 a figure worth the run's log
# Anything else a file prints is shown as it is.

# check NAME FUNCTION [ARG...]: runs FUNCTION and reports it. The function
# runs as a background job of its own, in a subshell: `exit` there ends the
# check, not the file, and `set -e` inside it works as written (within
# `out=$(...) || ...` bash would ignore it).
check() {
  local name=$1 out status=0 t0=$SECONDS
  shift
  out=$(mktemp)
  "$@" > "$out" 2>&1 < /dev/null &
  wait "$!" || status=$?
  if ((status == 0)); then
    printf '@@check\tok\t%s\t%s\n' "$((SECONDS - t0))" "$name"
  else
    printf '@@check\tFAIL\t%s\t%s\n' "$((SECONDS - t0))" "$name"
    tail -n 30 "$out" | sed 's/^/@@out\t/'
  fi
  rm -f "$out"
}

# log TEXT: a line for the run's log on the host.
log() { printf '@@log\t%s\n' "$*"; }

# clawfs_no_integrity_error: no read of a sector of /clawfs whose integrity
# tag was never written this boot (specs/clawfs/encryption.md, "First boot:
# no wipe"): dm-crypt logs each one it refuses.
clawfs_no_integrity_error() {
  local errors
  errors=$(journalctl -k -b -o cat | grep -c 'INTEGRITY AEAD ERROR') || true
  echo "integrity errors in this boot's kernel log: $errors"
  [ "$errors" = 0 ]
}
