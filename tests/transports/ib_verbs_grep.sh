#!/usr/bin/env bash
# Fails when a file other than the verbs interface (transports/ib/ib_verbs.{h,cc}) or the
# software NIC test double (tests/softnic/) calls an ibv_ function: every verbs call goes
# through the one table, so loom runs where libibverbs is absent and the software NIC can
# stand in for it. Usage: ib_verbs_grep.sh SOURCE_ROOT
set -euo pipefail
root=${1:?usage: ib_verbs_grep.sh SOURCE_ROOT}
cd "$root"
hits=$(grep -rnE '\bibv_[a-z0-9_]+[[:space:]]*\(' \
         --include='*.h' --include='*.hpp' --include='*.cc' --include='*.cpp' --include='*.cu' \
         --include='*.cuh' --include='*.c' --include='*.py' \
         include src transports algorithms perf tests bindings examples 2>/dev/null |
       grep -vE '^(transports/ib/ib_verbs\.(h|cc)|tests/softnic/)' || true)
if [ -n "$hits" ]; then
  echo "ibv_ functions called outside transports/ib/ib_verbs.{h,cc}; call them through the"
  echo "verbs table (transports/ib/ib_verbs.h) instead:"
  echo "$hits"
  exit 1
fi
echo "ok: ibv_ calls only in the verbs interface"
