#!/usr/bin/env bash
# `make soak`: every component under sustained IPC load for SOAK_SECONDS
# (600 by default) in a freshly booted image, not part of `make test`.
# Eight client loops in the guest, one per component, each calling it back
# to back through clawctl (real work where the component has some: files
# written and read, a secret read, a tool run, agents listed, metrics,
# status); every 30 s each component's RSS is sampled. Prints, per
# component, its calls, its errors (EAGAIN, the rate limit, apart from any
# other), its restarts and its RSS at the first sample after a minute of
# warm-up, at the end and at its peak: a leak shows as growth. Fails on an
# error other than EAGAIN, on a restart (a restart would also hide a leak),
# on RSS growth past SOAK_MAX_GROWTH_PCT (5 by default; the soaks so far
# grew at most 1 %, so 5 % over ten minutes is a leak, not the allocator
# settling) and on a component that took fewer than 10 calls (a loop that
# did not run proves nothing).
source "$(dirname "$0")/../../scripts/lib.sh"
source "$REPO/tests/vm/lib.sh"
SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_MAX_GROWTH_PCT=${SOAK_MAX_GROWTH_PCT:-5}
IMAGE="$OUT/clawos.raw"
STATE="$OUT/vm/soak"
trap vm_kill EXIT

log "soak: booting a fresh VM"
vm_boot "$IMAGE" "$STATE" --fresh --disk-size 3G || die "the image did not boot"
vm_ssh 'clawctl vault init >/dev/null && clawctl agent create soak >/dev/null && printf soak-value | clawctl secret set soak-secret >/dev/null' ||
  die "setting up the soak's vault, agent and secret failed"

# The guest side: /run/clawos-test/soak.sh SECONDS.
vm_push /dev/stdin /run/clawos-test/soak.sh <<'GUEST'
#!/bin/sh
# One loop per component until the deadline; each call's outcome counted
# in /run/clawos-test/soak/<component>.{calls,eagain,errors}, the first
# lines of other errors kept in <component>.log.
seconds=$1; dir=/run/clawos-test/soak; rm -rf $dir; mkdir -p $dir
deadline=$(( $(date +%s) + seconds ))
loop() { # COMPONENT COMMAND
  c=$1; calls=0 eagain=0 errors=0
  while [ "$(date +%s)" -lt $deadline ]; do
    if out=$(sh -c "$2" 2>&1 >/dev/null); then :
    elif echo "$out" | grep -q EAGAIN; then eagain=$((eagain + 1))
    else errors=$((errors + 1)); [ $errors -le 5 ] && echo "$out" >> $dir/$c.log
    fi
    calls=$((calls + 1))
  done
  echo $calls > $dir/$c.calls; echo $eagain > $dir/$c.eagain; echo $errors > $dir/$c.errors
}
loop router 'clawctl ipc call router health_check' &
loop observability 'clawctl status --json' &
loop fs-engine 'date | clawctl fs write --agent soak -p soak/now && clawctl fs read --agent soak soak/now' &
loop security-agent 'clawctl secret get soak-secret' &
loop wasm-daemon 'clawctl tool run text-stats "{\"text\":\"one two three\"}" --agent soak' &
loop agent-loop 'clawctl agent list' &
loop scheduler 'clawctl ipc call scheduler health_check' &
loop ebpf-agent 'clawctl ipc call ebpf-agent get_metrics' &
wait
GUEST

COMPONENTS=(router observability fs-engine security-agent wasm-daemon agent-loop scheduler ebpf-agent)
rss_sample() {
  local c
  for c in "${COMPONENTS[@]}"; do
    printf '%s ' "$(vm_ssh "ps -o rss= -p \$(systemctl show -P MainPID clawos-$c)" | tr -d ' ')"
  done
  echo
}
restarts() { vm_ssh "for c in ${COMPONENTS[*]}; do systemctl show -P NRestarts clawos-\$c; done" | tr '\n' ' '; }

RESTARTS0=$(restarts)
log "soak: ${SOAK_SECONDS} s of calls to all eight components"
vm_ssh "sh /run/clawos-test/soak.sh $SOAK_SECONDS" &
LOAD=$!
: > "$STATE/rss"
t0=$SECONDS
while kill -0 "$LOAD" 2>/dev/null; do
  echo "$((SECONDS - t0)) $(rss_sample)" >> "$STATE/rss"
  sleep 30
done
wait "$LOAD" || die "the guest's load script failed"
echo "$((SECONDS - t0)) $(rss_sample)" >> "$STATE/rss"
RESTARTS1=$(restarts)

status=0
printf '%-15s %9s %7s %7s %9s %12s %10s %10s %8s\n' component calls EAGAIN errors restarts "RSS@60s KiB" "end KiB" "peak KiB" growth
read -ra r0 <<<"$RESTARTS0"; read -ra r1 <<<"$RESTARTS1"
for i in "${!COMPONENTS[@]}"; do
  c=${COMPONENTS[$i]} col=$((i + 2))
  read -r calls eagain errors < <(vm_ssh "cat /run/clawos-test/soak/$c.calls /run/clawos-test/soak/$c.eagain /run/clawos-test/soak/$c.errors" | tr '\n' ' '; echo)
  first=$(awk -v c="$col" '$1 >= 60 { print $c; exit }' "$STATE/rss")
  last=$(tail -n 1 "$STATE/rss" | awk -v c="$col" '{ print $c }')
  peak=$(awk -v c="$col" '$c > m { m = $c } END { print m }' "$STATE/rss")
  printf '%-15s %9s %7s %7s %9s %12s %10s %10s %+7d%%\n' "$c" "$calls" "$eagain" "$errors" "$((r1[i] - r0[i]))" "$first" "$last" "$peak" \
    "$(( (last - first) * 100 / first ))"
  if ((errors > 0)); then status=1; vm_ssh "cat /run/clawos-test/soak/$c.log" | sed "s/^/  $c: /"; fi
  ((r1[i] == r0[i])) || status=1
  if (( (last - first) * 100 > SOAK_MAX_GROWTH_PCT * first )); then
    status=1; echo "  $c: RSS grew past $SOAK_MAX_GROWTH_PCT % ($first -> $last KiB)"
  fi
  ((calls >= 10)) || { status=1; echo "  $c: only ${calls:-0} calls"; }
done
echo "RSS samples (s, KiB per component in the order above): $STATE/rss"
vm_poweroff
exit $status
