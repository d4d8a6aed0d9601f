# shellcheck shell=bash
# Workspace snapshots (issue 8, specs/clawfs/README.md "Snapshots") through
# fs-engine: a snapshot taken online brings back the workspace's memory of
# its moment.
snapshot_restores_memory() {
  set -e
  clawctl workspace create vm-snap >/dev/null
  printf "# Alpha\nThe heron stands in the reeds.\n" > /tmp/vm-snap-a.md
  clawctl memory index -w vm-snap /tmp/vm-snap-a.md >/dev/null
  snap=$(clawctl workspace snapshot create vm-snap | cut -d" " -f1)
  clawctl workspace snapshot list vm-snap | grep -q "^$snap "
  printf "# Beta\nThe otter swims at dusk.\n" > /tmp/vm-snap-b.md
  clawctl memory index -w vm-snap /tmp/vm-snap-b.md >/dev/null
  clawctl memory search -w vm-snap --json otter | jq -e "any(.results[]; .path | endswith(\"vm-snap-b.md\"))"
  clawctl workspace snapshot restore vm-snap "$snap"
  clawctl memory search -w vm-snap --json otter | jq -e "all(.results[]; .path | endswith(\"vm-snap-b.md\") | not)"
  clawctl memory search -w vm-snap --json heron | jq -e "any(.results[]; .path | endswith(\"vm-snap-a.md\"))"
  clawctl workspace delete vm-snap >/dev/null
}
check "workspaces: a restored snapshot brings back the memory of its moment" snapshot_restores_memory
