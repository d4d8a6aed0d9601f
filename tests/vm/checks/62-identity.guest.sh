# shellcheck shell=bash
# Identity files (issue 8, specs/clawfs/README.md "Identity files") through
# fs-engine: verified reads, updates that keep a backup in the vault, a
# tampered file reported with its last good backup, and the restore of that
# backup.
identity_record_keeps_backup() {
  clawctl identity record fs-engine vm-check-1 --duration-ms 40 >/dev/null &&
  clawctl identity show fs-engine | jq -e ".history.completed_tasks | index(\"vm-check-1\") != null" &&
  test "$(clawctl identity backups fs-engine | wc -l)" -ge 1 &&
  test "$(stat -c "%U %a" /clawfs/vault/identity-backups/fs-engine)" = "clawos-fs-engine 700"
}
check "identity: a recorded task updates the verified file and keeps a backup in the vault" identity_record_keeps_backup

identity_tamper_reported_and_restored() {
  f=/clawfs/agents/fs-engine/identity.json
  sed -i "s/\"total_executions\": [0-9]*/\"total_executions\": 999/" "$f"
  if out=$(clawctl identity show fs-engine 2>&1); then echo "tampered file accepted: $out"; exit 1; fi
  echo "$out" | grep -q "checksum mismatch" || { echo "$out"; exit 1; }
  backup=$(echo "$out" | grep -o "identity-[0-9]*-[0-9A-Za-z]*\.json" | tail -1)
  test -n "$backup" || { echo "no backup offered: $out"; exit 1; }
  clawctl identity restore fs-engine "$backup" | jq -e ".history.total_executions < 999" &&
  clawctl identity show fs-engine >/dev/null
}
check "identity: a tampered file is reported with the last good backup, which restores it" identity_tamper_reported_and_restored
