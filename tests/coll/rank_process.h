// Failing from a rank process (a child that a gtest spawns, e.g. loom_coll_rank): print
// "fail <what>" on stdout, where the parent test reports it, and exit 1.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "loom/loom.h"

namespace loom::colltest {

[[noreturn]] inline void fail(const std::string& what) {
  std::printf("fail %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

inline void check(loomResult_t r, const std::string& what, loomComm_t comm) {
  if (r != loomSuccess)
    fail(what + " returned " + std::to_string(r) + ": " + loomGetLastError(comm));
}

}  // namespace loom::colltest
