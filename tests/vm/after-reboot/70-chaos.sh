# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Chaos: while a client writes files through fs-engine, secrets through the
# vault and notes through a tool into an AgentFS database at a steady rate,
# the components are killed with SIGKILL at random, one every 2-5 s
# (CLAWOS_CHAOS_KILLS of them, 24 by default). Each acknowledged write is
# recorded here on the host as it is answered; afterwards every one of them
# must be there, wasm-agent's database must pass clawctl fs check, the
# vault clawctl vault check, and clawctl status must report all eight
# components healthy within CHAOS_HEALTHY_S of the last kill. Unacknowledged
# writes (a component killed mid-request) may or may not be there: the
# client saw an error and would retry.
CHAOS_KILLS=${CLAWOS_CHAOS_KILLS:-24}
CHAOS_HEALTHY_S=120
CHAOS_COMPONENTS="agent-loop wasm-daemon ebpf-agent security-agent fs-engine observability router scheduler"

# chaos_writer NAME PAUSE COMMAND: runs COMMAND (with $i the sequence
# number) in the guest, PAUSE seconds apart, until
# /run/clawos-test/chaos-stop exists, printing $i for each that succeeded,
# into $VMS/chaos-NAME.acked.
chaos_writer() {
  vm_ssh "i=0; while [ ! -e /run/clawos-test/chaos-stop ] && [ \$i -lt 10000 ]; do i=\$((i + 1)); $3 >/dev/null 2>&1 && echo \$i; sleep $2; done" \
    > "$VMS/chaos-$1.acked" 2>/dev/null &
  CHAOS_PIDS+=($!)
}

chaos_run() {
  local kills t_last healthy_s files secrets notes
  CHAOS_PIDS=()
  vm_ssh 'mkdir -p /run/clawos-test && rm -f /run/clawos-test/chaos-stop' || return 1
  chaos_writer files 0.2 'echo chaos-$i | clawctl fs write --agent kernel-engine -p chaos/$i'
  # Each version of a secret has its own key, derived with PBKDF2 (seconds
  # under emulation, and again at each read after a restart): fewer of them.
  chaos_writer secrets 5 'printf v$i | clawctl secret set chaos-$i'
  chaos_writer notes 0.2 'clawctl tool run scratchpad "{\"op\":\"set\",\"key\":\"chaos-$i\",\"value\":\"v$i\"}" --agent wasm-agent'
  vm_ssh "for _ in \$(seq $CHAOS_KILLS); do
      sleep \$(shuf -i 2-5 -n 1)
      c=\$(shuf -n 1 -e $CHAOS_COMPONENTS)
      systemctl kill -s KILL clawos-\$c.service && echo \$c
    done" > "$VMS/chaos-kills" || return 1
  t_last=$SECONDS
  vm_ssh 'touch /run/clawos-test/chaos-stop'
  wait "${CHAOS_PIDS[@]}" 2>/dev/null
  kills=$(wc -l < "$VMS/chaos-kills")
  echo "killed $kills times: $(sort "$VMS/chaos-kills" | uniq -c | awk '{ printf "%s %s, ", $2, $1 }')"
  vm_ssh "for _ in \$(seq $CHAOS_HEALTHY_S); do clawctl status --json >/dev/null 2>&1 && exit 0; sleep 1; done; clawctl status; exit 1" || return 1
  healthy_s=$((SECONDS - t_last))
  files=$(tr '\n' ' ' < "$VMS/chaos-files.acked") secrets=$(tr '\n' ' ' < "$VMS/chaos-secrets.acked") notes=$(tr '\n' ' ' < "$VMS/chaos-notes.acked")
  echo "acknowledged: $(wc -w <<<"$files") file writes, $(wc -w <<<"$secrets") secrets, $(wc -w <<<"$notes") notes; all healthy ${healthy_s} s after the last kill"
  echo "$kills kills, $(wc -w <<<"$files $secrets $notes") acknowledged writes checked, healthy after ${healthy_s} s" > "$VMS/chaos-summary"
  ((kills >= CHAOS_KILLS && healthy_s <= CHAOS_HEALTHY_S)) && [[ -n $files && -n $secrets && -n $notes ]] || return 1
  vm_ssh "
    for i in $files; do [ \"\$(cat /clawfs/agents/kernel-engine/chaos/\$i)\" = chaos-\$i ] || { echo \"file \$i lost\"; exit 1; }; done
    for i in $secrets; do [ \"\$(clawctl secret get chaos-\$i)\" = v\$i ] || { echo \"secret \$i lost\"; exit 1; }; done
    for i in $notes; do
      clawctl tool run scratchpad '{\"op\":\"get\",\"key\":\"chaos-'\$i'\"}' --agent wasm-agent | jq -e --arg v v\$i '.value == \$v' >/dev/null || { echo \"note \$i lost\"; exit 1; }
    done
    clawctl fs check /clawfs/agents/wasm-agent/workspace.db && clawctl vault check || exit 1
    rm -rf /clawfs/agents/kernel-engine/chaos
    for i in \$(clawctl secret list --json | jq -r '.secrets[].secret_id | select(startswith(\"chaos-\"))'); do clawctl secret rm \$i >/dev/null; done"
}
check "chaos: $CHAOS_KILLS components killed at random under writes; every acknowledged file, secret and note is there, the database and the vault check consistent, all healthy within $CHAOS_HEALTHY_S s" chaos_run
log "chaos: $(cat "$VMS/chaos-summary" 2>/dev/null)"
