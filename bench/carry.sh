#!/usr/bin/env bash
# Files larger than one device call may carry (the device tool sends the working tree and the carried paths, 64 MiB
# in all, and a lent GPU machine reaches no registry), brought over in several calls on one warm machine: a call
# keeps the ignored paths an earlier call left there, so each call carries one part and the last one joins them.
#   bench/carry.sh pack MIB[,MIB...] FILE...   here: one zstd tar of the FILEs (paths as given, from the current
#                                             folder), cut into parts of the sizes given (the last size repeats)
#                                             in .carry1/, .carry2/, ... at the repository's root (listed in its
#                                             .git/info/exclude), with the archive's SHA-256; prints the calls
#   bench/carry.sh unpack DEST                 on the device, from the repository's root: the parts in order,
#                                             checked, unpacked into DEST (the FILEs' paths under it)
# The first part is usually smaller, as the first call also carries .gpu-debs (bench/gpu_deps.sh). Not a test.
set -euo pipefail
die() { echo "carry.sh: $*" >&2; exit 1; }
case "${1:-}" in
pack)
    sizes=${2:?usage: carry.sh pack MIB[,MIB...] FILE...}
    shift 2
    (($#)) || die "no files to pack"
    for f in "$@"; do [ -f "$f" ] || die "$f: no such file"; done
    root=$(git rev-parse --show-toplevel 2>/dev/null) || die "not inside a git checkout (the parts go to its root)"
    rm -rf "$root"/.carry[0-9]*
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    tar cf - "$@" | zstd -q -6 -T0 -o "$tmp/all.tar.zst"
    total=$(stat -c %s "$tmp/all.tar.zst")
    IFS=, read -r -a mib <<< "$sizes"
    off=0 i=1
    while ((off < total)); do
        s=${mib[i - 1]:-${mib[${#mib[@]} - 1]}}
        ((s > 0)) || die "part size $s MiB"
        mkdir -p "$root/.carry$i"
        dd if="$tmp/all.tar.zst" of="$root/.carry$i/part" bs=1M skip="$off" count="$s" iflag=skip_bytes \
            status=none
        off=$((off + s * 1048576)) i=$((i + 1))
    done
    n=$((i - 1))
    sha256sum < "$tmp/all.tar.zst" | cut -d' ' -f1 > "$root/.carry$n/sha256"
    echo "$n" > "$root/.carry$n/parts"
    ex=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$ex")"
    grep -qx '/.carry\*/' "$ex" 2>/dev/null || echo '/.carry*/' >> "$ex"
    echo "carry.sh: $# files, $((total / 1048576)) MiB packed, in $n parts; device calls, back to back (the machine"
    echo "  stays warm 30 s): carry .carry1 (with .gpu-debs), then .carry2, ... .carry$n; the last one runs"
    echo "  'bench/carry.sh unpack DEST' before its work"
    ;;
unpack)
    dest=${2:?usage: carry.sh unpack DEST}
    last=$(ls -d .carry[0-9]* 2>/dev/null | sed 's/^.carry//' | sort -n | tail -1)
    [ -n "$last" ] && [ -f ".carry$last/parts" ] || die "no .carry*/parts here: the last part was not carried"
    n=$(cat ".carry$last/parts")
    for ((i = 1; i <= n; i++)); do [ -f ".carry$i/part" ] || die ".carry$i/part missing (a call between was lost)"; done
    joined=$(mktemp "${TMPDIR:-/tmp}/carry-XXXXXX")
    trap 'rm -f "$joined"' EXIT
    for ((i = 1; i <= n; i++)); do cat ".carry$i/part"; done > "$joined"
    [ "$(sha256sum < "$joined" | cut -d' ' -f1)" = "$(cat ".carry$n/sha256")" ] ||
        die "SHA-256 of the $n joined parts differs from the packed archive's (nothing unpacked)"
    mkdir -p "$dest"
    zstd -q -d -c "$joined" | tar xf - -C "$dest"
    echo "carry.sh: $n parts joined and unpacked into $dest"
    ;;
*) die "usage: carry.sh pack MIB[,MIB...] FILE... | carry.sh unpack DEST" ;;
esac
