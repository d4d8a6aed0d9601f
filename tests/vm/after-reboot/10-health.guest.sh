# shellcheck shell=bash
# A reboot's start (specs/update/README.md, "The health gate"): every
# component knew its peers, so observability's health table was complete
# as soon as the components answered, and the gate, which learns health
# from the components' own answers and the router's events, passed without
# waiting for their first heartbeats (30 s apart).

# A component that cannot name a peer's user refuses it; at boot that left
# observability unable to ask itself and ebpf-agent for their health.
no_peer_refused() {
  local refused
  refused=$(journalctl -b -o cat -u 'clawos-*' | grep -c "neither a component nor an operator")
  [[ $refused == 0 ]] || { journalctl -b -u 'clawos-*' | grep "neither a component" | head -n 3; return 1; }
}
check "boot: no component refused a peer at this boot" no_peer_refused

# Its record for this boot: healthy, within 10 s of its start (the
# components are up by then: they said READY before clawos.target).
gate_passed_at_once() {
  local boot
  boot=$(cat /proc/sys/kernel/random/boot_id)
  clawctl update status --json | jq -e --arg boot "$boot" \
    '[.recent_gates[] | select(.boot_id == $boot)][0] | .healthy and .waited_s <= 10' >/dev/null ||
    { clawctl update status; journalctl -b -u clawos-update-gate -o cat; return 1; }
}
check "boot: the health gate passed within 10 s of its start" gate_passed_at_once
