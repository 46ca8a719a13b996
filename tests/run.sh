#!/usr/bin/env bash
# Configures, builds and tests loom: the README's test command and the core of CI (.ci/run).
#
#   bash tests/run.sh
#
# Environment (all optional):
#   BUILD_DIR         build directory, relative to the repository root or absolute (default: build)
#   LOOM_CMAKE_ARGS   extra configure arguments, split on spaces, e.g.
#                     "-DLOOM_WITH_CUDA=OFF -DLOOM_SANITIZE=address,undefined"
#   LOOM_BUILD_JOBS   parallel build jobs (default: the generator's choice)
#   LOOM_TEST_JOBS    parallel tests (default: 2)
#   LOOM_TEST_TIMEOUT seconds a test may run unless it sets its own TIMEOUT (default: 600)
# The ctest output is also kept in $BUILD_DIR/ctest.log. Exits non-zero if any step fails.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}
read -r -a extra_args <<<"${LOOM_CMAKE_ARGS:-}"
build_jobs=()
if [[ -n ${LOOM_BUILD_JOBS:-} ]]; then
  build_jobs=(--parallel "$LOOM_BUILD_JOBS")
fi

echo "== configure $build_dir ${extra_args[*]}"
cmake -S . -B "$build_dir" -G Ninja "${extra_args[@]}"

echo "== build $build_dir"
cmake --build "$build_dir" "${build_jobs[@]}"

echo "== test $build_dir"
# --no-tests=error: an empty test list is a broken build, not a pass.
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error \
  -j "${LOOM_TEST_JOBS:-2}" --timeout "${LOOM_TEST_TIMEOUT:-600}" 2>&1 |
  tee "$build_dir/ctest.log"
