#!/usr/bin/env bash
# Installs the reference AgentFS SDK (PyPI agentfs-sdk) for the interoperability
# test (userspace/agentfs/tests/interop.rs): its wheels, pinned by hash, are
# unpacked into out/agentfs-sdk, a directory python3 imports through PYTHONPATH.
# A wheel is laid out for exactly that, so neither pip nor a venv is needed.
source "$(dirname "$0")/lib.sh"
PYPI=https://files.pythonhosted.org/packages
WHEELS=(
  "$PYPI/26/bf/fcd634e2fc3910fc428f00277b5215e6f558554d800fa5456c92b1df9d03/agentfs_sdk-0.6.4-py3-none-any.whl 7db2ee9dbb68b027ca5a1d9ed8ddea55811036cc3520b13d64bb9dc10e366f67"
  "$PYPI/eb/b6/212a0b83289b7a4d195a3809322ce6328547fc6d821d648ed24a2a45303b/pyturso-0.4.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl 1f18b8e4666e81cf0711c00a331c696928e532704ecd837bc01376cd94f34df0"
  "$PYPI/49/d3/b8441a820a491ddfc024b0b0cf0393375b75ea13866d9c66727e54c2fc80/typing_extensions-4.16.0-py3-none-any.whl 481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8"
)
DEST="$OUT/agentfs-sdk"

# pyturso is a CPython 3.11 extension: Debian 12's python3.
[[ $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') == 3.11 ]] \
  || die "the pinned pyturso wheel needs python3 3.11, found $(python3 --version)"
# Whole wheels, unpacked over each other: a wheel is laid out to be imported
# from the directory it is unpacked into.
unpack_pinned "$DEST" "${WHEELS[@]}"
PYTHONPATH="$DEST" python3 -c 'import agentfs_sdk, turso' || die "the AgentFS SDK in $DEST does not import"
log "agentfs-sdk 0.6.4 in $DEST"
