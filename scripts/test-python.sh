#!/usr/bin/env bash
# Python packages the boot tests run on the host, pinned by hash and unpacked
# into out/test-python (a directory python3 imports through PYTHONPATH):
#   prometheus_client  the Prometheus project's own text-format parser, which
#                      reads the metrics the box exposes
#                      (tests/vm/checks/68-metrics.sh).
source "$(dirname "$0")/lib.sh"
PYPI=https://files.pythonhosted.org/packages
WHEELS=(
  "$PYPI/b8/db/14bafcb4af2139e046d03fd00dea7873e48eafe18b7d2797e73d6681f210/prometheus_client-0.23.1-py3-none-any.whl dd1913e6e76b59cfe44e7a4b83e01afc9873c1bdfd2ed8739f1e76aeca115f99"
)
DEST="$OUT/test-python"
unpack_pinned "$DEST" "${WHEELS[@]}"
PYTHONPATH="$DEST" python3 -c 'import prometheus_client.parser' || die "prometheus_client in $DEST does not import"
log "prometheus_client 0.23.1 in $DEST"
