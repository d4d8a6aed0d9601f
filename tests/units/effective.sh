#!/usr/bin/env bash
# Prints the effective settings of every ClawOS unit as systemd itself merges
# the unit files and their drop-ins, and checks how the shared drop-ins are
# used. Runs on the host, as root, in seconds; it boots nothing.
#
#   tests/units/effective.sh [REV]          settings of rootfs-overlay at git REV
#                                           (default: the working tree)
#   tests/units/effective.sh --compare [REV]
#                                           lint the working tree, then diff its
#                                           settings against REV's (default HEAD)
#
# Two views, both from the host's systemd (prefix and symlinked drop-ins and
# the specifiers used here need systemd >= 246; the image has trixie's 257):
#   dump  `systemd --test --system` as an unprivileged user: the manager's own
#         dump of every unit it loaded (it leaves out a few exec settings,
#         e.g. NoNewPrivileges, RestrictAddressFamilies, RemoveIPC);
#   show  `systemctl --user show --all` against a throwaway user manager run
#         in private mount and cgroup namespaces: every D-Bus property (it
#         leaves out WatchdogSec of a unit that never started). The unit
#         files are the same, only the manager differs (default
#         dependencies, state paths under its $HOME).
# Each line is "view unit key=value"; lines are sorted, so only a change in
# a setting shows in a diff, not a change of order. Where a unit's files are
# (FragmentPath, DropInPaths, SourcePath) is printed too, on "paths" lines,
# which --compare leaves out: moving a setting between files is the point.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
UNITS=usr/lib/systemd/system
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
die() { echo "effective.sh: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "run as root (the manager runs as nobody, in namespaces only root may make)"

# stage REV DIR: rootfs-overlay at REV ("" = the working tree) into DIR/root.
stage() {
  mkdir -p "$2/root"
  if [[ -z $1 ]]; then cp -a "$REPO/rootfs-overlay/." "$2/root/"
  else git -C "$REPO" archive "$1" rootfs-overlay | tar -x -C "$2/root" --strip-components=1; fi
  chmod -R a+rX "$2"
}

# The units under test: every clawos* unit file (a template as an instance
# of it, @unitcheck), plus a target that pulls them all in (the manager
# dumps only the units it loaded).
units_of() { (cd "$1/root/$UNITS" && find . -maxdepth 1 -name 'clawos*' -regex '.*\.\(service\|socket\|target\|timer\|path\|mount\|slice\)' -printf '%f\n' | sed 's/@\./@unitcheck./' | sort); }

# awk: the words of a string, sorted (mawk has no asort).
SORTWORDS='
  function sortwords(s,    w, n, i, j, t, v) {
    n = split(s, w, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && w[j - 1] > w[j]; j--) { t = w[j]; w[j] = w[j - 1]; w[j - 1] = t }
    for (i = 1; i <= n; i++) v = v (i > 1 ? " " : "") w[i]
    return v
  }'

view_dump() { # DIR
  local dir=$1 extra=$1/extra
  mkdir -p "$extra"
  printf '[Unit]\nWants=%s\n' "$(units_of "$dir" | tr '\n' ' ')" > "$extra/unitcheck.target"
  chmod -R a+rX "$extra"
  "${NOBODY[@]}" env -i PATH=/usr/bin:/bin SYSTEMD_UNIT_PATH="$dir/root/$UNITS:$extra" \
    /usr/lib/systemd/systemd --test --system --no-pager --log-level=err --unit=unitcheck.target 2>/dev/null |
  awk -v OFS='\t' '
    /^-> By jobs:/ { exit }
    /^\t-> Unit / { unit = $3; sub(/:$/, "", unit); keep = (unit ~ /^clawos/); sub_ = ""; next }
    !keep { next }
    /^\t\t-> Job / { sub_ = "skip"; next }
    /^\t\t-> / { sub_ = $2; next }
    /^\t\t[^\t]/ { sub_ = "" }
    sub_ == "skip" { next }
    {
      line = $0; sub(/^\t+/, "", line)
      key = line; sub(/:.*/, "", key)
      view = (key == "Fragment Path" || key ~ /^DropIn Path/ || key == "Source Path") ? "paths" : "dump"
      # A set printed in hash order.
      if (key == "SystemCallFilter") line = key ": " sortwords(substr(line, length(key) + 3))
      print view, unit, (sub_ == "" ? "" : sub_ "/") line
    }'"$SORTWORDS"
}

view_show() { # DIR
  local dir=$1 home=$1/home extra=$1/extra units
  mapfile -t units < <(units_of "$dir")
  mkdir -p "$home" "$extra"
  printf '[Unit]\nDescription=unitcheck\n' > "$extra/default.target"
  chown 65534:65534 "$home"; chmod 0700 "$home"; chmod -R a+rX "$extra"
  # In a private mount namespace: /run/systemd/system, which a user manager
  # wants to see, and a cgroup2 tree with a subtree nobody may manage; the
  # cgroup namespace roots it at this process's own cgroup.
  # shellcheck disable=SC2016  # the script's $ expands in the new namespaces' shell, with its own arguments
  unshare --mount --cgroup --propagation private bash -euo pipefail -c '
    home=$1 path=$2; shift 2
    mount -t tmpfs tmpfs /run/systemd; mkdir /run/systemd/system
    umount -l /sys/fs/cgroup; mount -t cgroup2 cgroup2 /sys/fs/cgroup
    cg=/sys/fs/cgroup/unitcheck.$$ manager=
    cleanup() {
      [[ -z $manager ]] || kill -KILL "$manager" 2>/dev/null || true
      echo $$ > /sys/fs/cgroup/cgroup.procs
      [[ ! -e $cg/cgroup.kill ]] || echo 1 > "$cg/cgroup.kill"
      [[ -z $manager ]] || wait "$manager" 2>/dev/null || true
      find "$cg" -depth -type d -exec rmdir {} +
    }
    trap cleanup EXIT
    mkdir "$cg"; chown -R 65534:65534 "$cg"; echo $$ > "$cg/cgroup.procs"
    nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin HOME="$home" XDG_RUNTIME_DIR="$home" "$@"; }
    setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin HOME="$home" XDG_RUNTIME_DIR="$home" \
      SYSTEMD_UNIT_PATH="$path" /usr/lib/systemd/systemd --user --log-level=err >/dev/null 2>&1 &
    manager=$!
    for _ in $(seq 100); do [[ -S $home/systemd/private ]] && break; sleep 0.1; done
    rc=0
    for unit; do
      nobody systemctl --user show --all "$unit" | sed "s|^|$unit\t|" || rc=1
    done
    exit $rc' unitcheck "$home" "$dir/root/$UNITS:$extra" "${units[@]}" |
  sed "s|$home|~|g" |
  awk -F'\t' -v OFS='\t' '
    { key = $2; sub(/=.*/, "", key) }
    # Runtime state and counters, not configuration.
    key ~ /Timestamp|^(Memory|CPU|Tasks|IO|IP)[A-Za-z]*(Current|Available|NSec|Bytes|Packets|Operations)$|^InvocationID$|^ControlGroupId$|^Effective|^StateChange|^(Active|Sub|Load)State$|^NRestarts$|^(Main|Control|ExecMain)PID$|^ExecMain/ { next }
    key == "FragmentPath" || key == "DropInPaths" || key == "SourcePath" { print "paths", $1, $2; next }
    # Dependency lists, mount paths and address lists are sets, printed in hash order.
    key ~ /^(Requires|Requisite|Wants|BindsTo|PartOf|Upholds|RequiredBy|RequisiteOf|WantedBy|BoundBy|ConsistsOf|UpheldBy|Conflicts|ConflictedBy|Before|After|OnFailure|OnFailureOf|OnSuccess|OnSuccessOf|Triggers|TriggeredBy|PropagatesReloadTo|ReloadPropagatedFrom|PropagatesStopTo|StopPropagatedFrom|JoinsNamespaceOf|SliceOf|References|ReferencedBy|Names|RequiresMountsFor|WantsMountsFor|IPAddressAllow|IPAddressDeny)$/ {
      $2 = key "=" sortwords(substr($2, length(key) + 2))
    }
    { print "show", $1, $2 }'"$SORTWORDS"
}

effective() { # REV
  local dir; dir=$(mktemp -d /tmp/unitcheck.XXXXXX)
  chmod 0755 "$dir"
  stage "$1" "$dir"
  { view_dump "$dir"; view_show "$dir"; } | sed "s|$dir/root||g" | LC_ALL=C sort
  rm -rf "$dir"
}

# lint: the rules the shared drop-ins rely on (see 10-component.conf).
lint() {
  local root=$REPO/rootfs-overlay/$UNITS shared rc=0 svc name keys
  shared=$(readlink -f "$root/clawos-component.conf")
  keys() { grep -hoE '^[A-Za-z]+=' "$@" | sort -u; }
  for svc in "$root"/clawos-*.service; do
    name=$(basename "$svc" .service)
    if grep -qs "^ListenStream=@clawos-ipc-" "$root/$name.socket"; then
      # Every daemon (a service with an IPC socket) takes the shared settings...
      [[ $(readlink -f "$root/$name.service.d/10-component.conf") == "$shared" ]] ||
        { echo "lint: $name.service.d/10-component.conf is not a link to $shared"; rc=1; }
      # ...and its unit file sets none of them: drop-ins are read after the
      # unit file, so the shared value would silently win. Dependencies add up.
      keys=$(comm -12 <(keys "$svc") <(keys "$shared") | grep -vxE '(After|Before|Requires|Wants|RequiresMountsFor)=' || true)
      [[ -z $keys ]] || { echo "lint: $name.service sets what 10-component.conf sets (use $name.service.d/20-*.conf): ${keys//$'\n'/ }"; rc=1; }
    else
      [[ ! -e $root/$name.service.d/10-component.conf ]] || { echo "lint: $name.service is no daemon but takes 10-component.conf"; rc=1; }
    fi
  done
  # clawos-.socket.d/ applies to every clawos-*.socket: each is a component's
  # IPC socket, or a path under /run/<name>/ of a unit that is no daemon
  # (clawos-model: its service takes no 10-component.conf, checked above).
  for s in "$root"/clawos-*.socket; do
    name=$(basename "$s" .socket)
    grep -qx "ListenStream=@clawos-ipc-${name#clawos-}" "$s" || grep -qE "^ListenStream=/run/$name/" "$s" ||
      { echo "lint: $name.socket is neither an IPC socket nor under /run/$name/ but gets clawos-.socket.d/"; rc=1; }
    keys=$(comm -12 <(keys "$s") <(keys "$root"/clawos-.socket.d/*.conf))
    [[ -z $keys ]] || { echo "lint: $name.socket sets what clawos-.socket.d/ sets: ${keys//$'\n'/ }"; rc=1; }
  done
  return $rc
}

if [[ ${1:-} == --compare ]]; then
  rev=${2:-HEAD}
  lint || die "lint failed"
  before=$(mktemp) after=$(mktemp)
  effective "$rev" | grep -v '^paths' > "$before"
  effective "" | grep -v '^paths' > "$after"
  [[ -s $before && -s $after ]] || die "no settings printed"
  for v in dump show; do
    echo "$v: $(grep -c "^$v" "$before") lines at $rev, $(grep -c "^$v" "$after") in the working tree"
  done
  if diff -u --label "$rev" --label "working tree" "$before" "$after"; then
    echo "identical: every clawos unit's effective settings are the same as at $rev"
  else
    rm -f "$before" "$after"; exit 1
  fi
  rm -f "$before" "$after"
else
  effective "${1:-}"
fi
