// Environment variables: declared once in env_vars.def, read through this interface only, so
// every tunable is documented and printed (printEnvTable) at LOOM_DEBUG=INFO.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

enum class EnvVar {
#define LOOM_ENV(name, def, doc) name,
#include "src/base/env_vars.def"
#undef LOOM_ENV
  kCount
};

struct EnvVarSpec {
  const char* name;
  const char* defaultValue;
  const char* description;
};

const EnvVarSpec& envSpec(EnvVar var);

// The value set in the environment, else the documented default.
std::string envString(EnvVar var);
// True when the variable is set to a non-empty value.
bool envIsSet(EnvVar var);
// Parses an integer; a malformed value throws InvalidArgument naming the variable.
int64_t envInt(EnvVar var);

// Logs every variable with its value and whether it was set, at INFO (subsystem ENV).
void logEnvTable();
// The table as Markdown rows (name, default, description) for the README.
std::string envTableMarkdown();

}  // namespace loom
