#!/usr/bin/env bash
# Stages what the host built into out/rootfs-extra, which mkosi lays over the
# image: the product's binaries and tools (no test code), the eBPF object, the
# specs, the kernel's origin, the operator's SSH key and os-release.
source "$(dirname "$0")/lib.sh"
X="$OUT/rootfs-extra"
TARGET="${CARGO_TARGET_DIR:-$REPO/target}/release"
rm -rf "$X"; mkdir -p "$X/usr/bin" "$X/usr/lib/clawos/ebpf" "$X/usr/share/clawos" "$X/etc/ssh/authorized_keys"

# Exactly the product's binaries (PRODUCT_BINARIES, lib.sh), by name: the
# workspace also builds test harnesses and benchmarks, which a pattern such as
# clawos-* would sweep into the image. A missing one is a broken build.
for bin in "${PRODUCT_BINARIES[@]}"; do
  [[ -x $TARGET/$bin ]] || die "no $bin in $TARGET: run make userspace"
  install -m 0755 "$TARGET/$bin" "$X/usr/bin/"
done
install -m 0644 "$OUT/ebpf/clawos-monitor.bpf.o" "$X/usr/lib/clawos/ebpf/"
mkdir -p "$X/usr/lib/clawos/tools"
# The image's tools and the registry tools.sh wrote for them (paths relative
# to it); the hostile test tools are in out/test-tools and stay out.
install -m 0644 "$OUT"/tools/*.wasm "$OUT"/tools/*.json "$X/usr/lib/clawos/tools/"
# Each compiled by wasm-daemon's own engine (specs/toolhost/README.md,
# "Precompiled cache"), on the verified root, so no box compiles them at boot.
mkdir -p "$X/usr/lib/clawos/tools/precompiled"
"$TARGET/clawos-wasm-daemon" --precompile "$X/usr/lib/clawos/tools/precompiled" "$X"/usr/lib/clawos/tools/*.wasm >/dev/null
cp -r "$REPO/specs" "$X/usr/share/clawos/specs"
# ClawFS's in-box embedding model (scripts/models.sh, read by fs-engine).
mkdir -p "$X/usr/share/clawos/models/all-minilm-l6-v2"
install -m 0644 "$OUT"/models/all-minilm-l6-v2/{config.json,model.safetensors,tokenizer.json} "$X/usr/share/clawos/models/all-minilm-l6-v2/"
# The agents' in-box language model (scripts/models.sh, read by clawos-model-server):
# its one GGUF file.
mkdir -p "$X/usr/share/clawos/models/smollm2-135m-instruct"
install -m 0644 "$OUT"/models/smollm2-135m-instruct/*.gguf "$X/usr/share/clawos/models/smollm2-135m-instruct/"
# The state of the default agent's system turn beside it (specs/agent/local-model.md,
# "The prompt's prefix"), so a fresh box's first chat reads only its own tokens
# (the prompt: clawos-agent-prompt, the box's own code; a build tool, not shipped).
# One per form of the weights a box may keep: f16 on a CPU with F16C and AVX2,
# 4-bit blocks without (the boot tests' emulated CPU). One thread: the sums of a
# matrix product split over threads round differently with their number, and the
# files are inputs of the image's digest.
"$TARGET/clawos-agent-prompt" default > "$OUT/default-agent-prompt.txt"
for f16 in 0 1; do
  CANDLE_DEQUANTIZE_ALL_F16=$f16 RAYON_NUM_THREADS=1 RUST_LOG=warn "$TARGET/clawos-model-server" \
    --model-dir "$OUT/models/smollm2-135m-instruct" \
    --prefill "$OUT/default-agent-prompt.txt" "$X/usr/share/clawos/models/smollm2-135m-instruct/prefixes"
done
chmod 0644 "$X"/usr/share/clawos/models/smollm2-135m-instruct/prefixes/*
cp "$OUT/kernel/source" "$X/usr/lib/clawos/kernel-source"
cp "$OUT/kernel/release" "$X/usr/lib/clawos/kernel-release"

# The operator's key: SSH_PUBKEY= (a key or a .pub file); otherwise a throwaway
# test key in out/ssh, which only test builds should ever carry.
# The console banner gives the one SSH command that works (agetty expands
# \4 to the box's address): with the operator's own key, plain ssh; with
# the test key, the key's path on the build machine, and the port that
# `make run` forwards from the host (10.0.2.15, QEMU's user network, is
# not reachable from the host).
mkdir -p "$X/etc/issue.d"
if [[ -n ${SSH_PUBKEY:-} ]]; then
  if [[ -f $SSH_PUBKEY ]]; then cat "$SSH_PUBKEY"; else echo "$SSH_PUBKEY"; fi > "$X/etc/ssh/authorized_keys/root"
  printf 'SSH: ssh root@\\4\n' > "$X/etc/issue.d/40-clawos-ssh-command.issue"
else
  mkdir -p "$OUT/ssh"
  [[ -f $OUT/ssh/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N "" -C clawos-test -f "$OUT/ssh/id_ed25519"
  warn "SSH_PUBKEY not set: the image trusts the throwaway test key $OUT/ssh/id_ed25519"
  cp "$OUT/ssh/id_ed25519.pub" "$X/etc/ssh/authorized_keys/root"
  printf '%s\n' 'SSH (this image trusts the test key in out/ssh of the machine that built it):' \
    '  under make run, from that machine: ssh -i out/ssh/id_ed25519 -p 2222 root@127.0.0.1' \
    '  on a network: ssh -i out/ssh/id_ed25519 root@\4' > "$X/etc/issue.d/40-clawos-ssh-command.issue"
fi
chmod 0644 "$X/etc/ssh/authorized_keys/root" "$X/etc/issue.d/40-clawos-ssh-command.issue"

# The release key's public half: systemd-pull accepts an update only with a
# SHA256SUMS.gpg signature by it (specs/update/README.md).
mkdir -p "$X/etc/systemd"
home=$(release_gnupghome)
key=$(release_key "$home")
gpg --homedir "$home" --export "$key" > "$X/etc/systemd/import-pubring.gpg"
keys=$(gpg --homedir "$home" --batch --with-colons --show-keys "$X/etc/systemd/import-pubring.gpg" 2>/dev/null | grep -c '^pub:' || true)
[[ $keys == 1 ]] || die "the image's update keyring holds $keys keys, not the release key alone"

# The extension key's certificate: systemd-sysext merges a system extension
# only with a root hash signed by it (specs/extensions/README.md).
mkdir -p "$X/usr/lib/verity.d"
install -m 0644 "$(extension_key_dir)/cert.pem" "$X/usr/lib/verity.d/clawos-extensions.crt"

version=$(clawos_version)
commit=$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)
cat > "$X/usr/lib/os-release" <<OSREL
NAME="ClawOS"
PRETTY_NAME="ClawOS $version ($commit)"
ID=clawos
ID_LIKE=debian
VERSION_ID=0.1
IMAGE_ID=clawos
IMAGE_VERSION=$version
HOME_URL="https://clawos.invalid/"
OSREL
# Digest of every input, the seed of the image's deterministic UUIDs and salt.
(cd "$REPO" && find image rootfs-overlay -type f -print0 | sort -z | xargs -0 sha256sum
 cd "$X" && find . -type f ! -name build-inputs -print0 | sort -z | xargs -0 sha256sum) > "$X/usr/lib/clawos/build-inputs"
log "staged $(find "$X/usr/bin" -type f | wc -l) binaries into $X"
