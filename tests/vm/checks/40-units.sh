# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# systemd's own exposure score of each ClawOS service (`systemd-analyze
# security`: 0 is the most confined, 10 the least), against the scores
# recorded in tests/vm/units-exposure.txt: a unit scoring worse than its
# record fails, and so does a service without one. Improving a unit means
# lowering its line there. The scores of this boot are kept in
# out/vm/units-exposure.txt.
check_units_exposure() {
  # A template is scored as an instance of it (clawos-mcp-launch@.service);
  # the MCP servers' transient units (clawos-mcp-<agent>_<server>) are the
  # launcher's, scored by 72-mcp.sh.
  vm_ssh 'for unit in $(systemctl list-unit-files --no-legend --plain "clawos-*.service" | awk "\$2 != \"transient\" { print \$1 }"); do
      printf "%s %s\n" "$unit" "$(systemd-analyze security --no-pager "${unit/@./@check.}" | sed -n "s/^→ Overall exposure level for .*: \([0-9.]*\) .*/\1/p")"
    done' > "$OUT/vm/units-exposure.txt" || return 1
  python3 - "$REPO/tests/vm/units-exposure.txt" "$OUT/vm/units-exposure.txt" <<'PY'
import sys
def scores(path):
    return {unit: float(score) for unit, score in (line.split() for line in open(path) if line.strip() and not line.startswith("#"))}
recorded, now = scores(sys.argv[1]), scores(sys.argv[2])
bad = [f"{unit}: {score} (recorded {recorded.get(unit, 'none')})" for unit, score in sorted(now.items()) if unit not in recorded or score > recorded[unit]]
print(" ".join(f"{unit}={score}" for unit, score in sorted(now.items())))
if not now or bad:
    sys.exit("worse than recorded: " + "; ".join(bad or ["no scores read"]))
PY
}
check "units: no ClawOS service is exposed more than its recorded systemd-analyze security score" check_units_exposure
log "units: systemd-analyze security: $(tr '\n' ' ' < "$OUT/vm/units-exposure.txt" 2>/dev/null)"
