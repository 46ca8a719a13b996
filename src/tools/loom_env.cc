// loom-env: prints loom's environment variables (from the one table in env_vars.def) with
// their current values, or as the Markdown table the README carries (--markdown).
#include <cstdio>
#include <cstring>

#include "src/base/env.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--markdown") == 0) {
    std::fputs(loom::envTableMarkdown().c_str(), stdout);
    return 0;
  }
  for (int i = 0; i < static_cast<int>(loom::EnvVar::kCount); ++i) {
    auto var = static_cast<loom::EnvVar>(i);
    const loom::EnvVarSpec& spec = loom::envSpec(var);
    std::printf("%-20s %-12s %s\n", spec.name, loom::envString(var).c_str(),
                loom::envIsSet(var) ? "(set)" : "(default)");
  }
  return 0;
}
