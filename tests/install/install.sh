#!/usr/bin/env bash
# install.sh MESON BUILD_DIR SOURCE_DIR — the library installs and builds a
# student's program.
#
#   meson install --destdir TMP      into a temporary directory
#   pkg-config --cflags --libs ptdp  from the installed ptdp.pc (prefix
#                                    moved into TMP), the same for ptdp-f64
#   cc prog.c $(…) -o prog; ./prog   builds against the installed headers
#                                    and library only, and runs
set -euo pipefail
meson=$1 build=$2 src=$3
cc=${CC:-cc}
command -v pkg-config >/dev/null || { echo "install.sh: needs pkg-config" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$meson" install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; exit 1; }

for pc in ptdp ptdp-f64; do
    file=$(find "$tmp/root" -name "$pc.pc" | head -n 1)
    [[ -n $file ]] || { echo "FAIL: meson install wrote no $pc.pc" >&2; exit 1; }
    prefix=$(sed -n 's/^prefix=//p' "$file")
    # the installed files sit under TMP/root/PREFIX; point pkg-config there
    flags=$(PKG_CONFIG_PATH=$(dirname "$file") pkg-config --define-variable=prefix="$tmp/root$prefix" \
                --cflags --libs "$pc")
    # shellcheck disable=SC2086  # the compiler command and the flags are words
    $cc ${SANITIZE:-} -std=c11 -Wall -Wextra -Werror "$src/tests/install/prog.c" $flags -o "$tmp/prog-$pc"
    # no include path into the source tree: the program saw only the installed headers
    out=$("$tmp/prog-$pc")
    echo "$pc: $out"
    case $pc in
        ptdp) [[ $out == *"(f32)"* ]] || { echo "FAIL: ptdp.pc did not build float" >&2; exit 1; } ;;
        ptdp-f64) [[ $out == *"(f64)"* ]] || { echo "FAIL: ptdp-f64.pc did not build double" >&2; exit 1; } ;;
    esac
done
echo "installed: $(cd "$tmp/root" && find . -type f | sed 's|^\./||' | grep -c .) files"
