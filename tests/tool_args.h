// Command-line flags of the test tools that run as plain binaries (the fuzzers, the soak):
// "--name value" pairs and --help, so each tool's main() reads its flags the same way.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace loom::test {

// The value after `name`, or `fallback` when the flag is absent.
inline std::string argString(int argc, char** argv, const char* name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// The number after `name` (decimal, or 0x hex), or `fallback` when the flag is absent.
inline uint64_t argValue(int argc, char** argv, const char* name, uint64_t fallback) {
  const std::string s = argString(argc, argv, name, "");
  return s.empty() ? fallback : std::strtoull(s.c_str(), nullptr, 0);
}

// Whether --help or -h was given.
inline bool wantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  return false;
}

}  // namespace loom::test
