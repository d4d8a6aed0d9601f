#!/usr/bin/env bash
# run.sh FILE...: runs guest check files (NN-name.guest.sh, paths relative to
# this directory's parent, /run/clawos-test/vm) in order, in one shell, with
# lib.sh's check and log and the values the host wrote into env.sh. Ends
# with `@@done`, so the host can tell a run that finished from one the SSH
# session or the guest cut short.
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=lib.sh
source guest/lib.sh
# shellcheck source=/dev/null  # written by the host for this boot (vm_push_checks)
source guest/env.sh
for file; do
  # shellcheck source=/dev/null  # each check file is checked on its own
  source "$file"
done
echo "@@done"
