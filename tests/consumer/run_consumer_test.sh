#!/usr/bin/env bash
# Installs an already-built loom into a scratch prefix and checks that an application can use
# the installed package two ways, as users would:
#   1. CMake: find_package(loom) + loom::loom (tests/consumer/CMakeLists.txt) -> consumer_cmake
#   2. pkg-config: cc consumer.c $(pkg-config --cflags --libs loom)            -> consumer_pkgconfig
# then runs both against the installed libloom.
#
# Usage: run_consumer_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
#   SOURCE_DIR  loom's source tree       BUILD_DIR  a finished loom build
#   WORK_DIR    scratch space, wiped first (the prefix and both consumer builds go there)
# Honours CMAKE_COMMAND, CMAKE_GENERATOR and CC (ctest passes the build's own).
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR WORK_DIR" >&2
  exit 2
fi
source_dir=$(realpath "$1")
build_dir=$(realpath "$2")
work_dir=$(realpath -m "$3")
cmake_cmd=${CMAKE_COMMAND:-cmake}
cc_cmd=${CC:-cc}
consumer_src=$source_dir/tests/consumer
prefix=$work_dir/prefix

step() { printf '\n== install_consumer: %s\n' "$*"; }
die() { printf 'install_consumer: FAILED: %s\n' "$*" >&2; exit 1; }

[[ -f $build_dir/CMakeCache.txt ]] || die "$build_dir is not a CMake build directory"
rm -rf "$work_dir"
mkdir -p "$work_dir"

# A library built with sanitizers needs their runtimes loaded first, so its consumers must be
# built with the same -fsanitize flags (this is what users of such a build have to do, too).
sanitize=$(sed -n 's/^LOOM_SANITIZE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
san_flags=()
if [[ -n $sanitize ]]; then
  san_flags=("-fsanitize=$sanitize" "-fno-omit-frame-pointer")
fi

step "install $build_dir into $prefix"
"$cmake_cmd" --install "$build_dir" --prefix "$prefix"

# GNUInstallDirs picks lib, lib64 or lib/<multiarch> depending on the platform and prefix.
pc_file=$(find "$prefix" -path '*/pkgconfig/loom.pc' -print -quit)
[[ -n $pc_file ]] || die "no pkgconfig/loom.pc under $prefix"
pc_dir=$(dirname "$pc_file")
lib_dir=$(dirname "$pc_dir")
[[ -e $lib_dir/libloom.so ]] || die "no libloom.so next to $pc_dir (in $lib_dir)"
[[ -f $lib_dir/cmake/loom/loomConfig.cmake ]] || die "no cmake/loom/loomConfig.cmake in $lib_dir"
echo "lib dir: $lib_dir"

step "CMake consumer: find_package(loom) + loom::loom"
cmake_args=(-S "$consumer_src" -B "$work_dir/cmake-build" "-DCMAKE_PREFIX_PATH=$prefix"
            "-DCMAKE_C_COMPILER=$cc_cmd")
if [[ -z ${CMAKE_GENERATOR:-} ]] && command -v ninja >/dev/null; then
  cmake_args+=(-G Ninja)
fi
if [[ ${#san_flags[@]} -gt 0 ]]; then
  cmake_args+=("-DCMAKE_C_FLAGS=${san_flags[*]}")
fi
"$cmake_cmd" "${cmake_args[@]}"
# It must have found this install, not some other loom on the system.
found_dir=$(sed -n 's/^loom_DIR:[A-Z]*=//p' "$work_dir/cmake-build/CMakeCache.txt")
[[ $(realpath "$found_dir") == "$(realpath "$lib_dir")"/cmake/loom ]] ||
  die "find_package(loom) found $found_dir instead of $lib_dir/cmake/loom"
"$cmake_cmd" --build "$work_dir/cmake-build"

step "pkg-config consumer: cc consumer.c \$(pkg-config --cflags --libs loom)"
export PKG_CONFIG_PATH=$pc_dir
pc_flags=$(pkg-config --cflags --libs loom)
echo "pkg-config --cflags --libs loom: $pc_flags"
# loom.pc must describe where it was installed; a prefix baked in at configure time would point
# a relocated install at the wrong headers and library.
for var in includedir libdir; do
  dir=$(pkg-config --variable="$var" loom)
  [[ $(realpath -m "$dir") == "$(realpath "$prefix")"/* ]] ||
    die "loom.pc says $var=$dir, outside the install prefix $prefix: loom.pc must be" \
      "relocatable (derive prefix from \${pcfiledir}) or match the --prefix it is installed with"
done
# shellcheck disable=SC2086 # pkg-config output is a list of flags: split it
"$cc_cmd" -std=c11 -Wall -Wextra -Werror -pedantic "${san_flags[@]}" -pthread \
  "$consumer_src/consumer.c" -o "$work_dir/consumer_pkgconfig" $pc_flags

step "run both against $lib_dir"
export LD_LIBRARY_PATH=$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for exe in "$work_dir/cmake-build/consumer_cmake" "$work_dir/consumer_pkgconfig"; do
  loaded=$(ldd "$exe" | awk '$1 ~ /^libloom\.so/ {print $3}')
  [[ $(realpath -m "$loaded") == "$(realpath "$lib_dir")"/* ]] ||
    die "$(basename "$exe") loads libloom from '$loaded', not from $lib_dir"
  echo "-- $(basename "$exe") (libloom: $loaded)"
  "$exe" || die "$(basename "$exe") exited with status $?"
done

step "passed"
