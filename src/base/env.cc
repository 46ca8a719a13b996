#include "src/base/env.h"

#include <cerrno>
#include <cstdlib>

#include "src/base/error.h"
#include "src/base/logging.h"

namespace loom {
namespace {

const EnvVarSpec kTable[] = {
#define LOOM_ENV(name, def, doc) {#name, def, doc},
#include "src/base/env_vars.def"
#undef LOOM_ENV
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == static_cast<size_t>(EnvVar::kCount));

}  // namespace

const EnvVarSpec& envSpec(EnvVar var) { return kTable[static_cast<size_t>(var)]; }

bool envIsSet(EnvVar var) {
  const char* value = std::getenv(envSpec(var).name);
  return value != nullptr && value[0] != '\0';
}

std::string envString(EnvVar var) {
  const char* value = std::getenv(envSpec(var).name);
  return (value != nullptr && value[0] != '\0') ? value : envSpec(var).defaultValue;
}

int64_t envInt(EnvVar var) {
  std::string text = envString(var);
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  LOOM_ENFORCE(errno == 0 && end != text.c_str() && *end == '\0', InvalidArgument,
               envSpec(var).name, "='", text, "' is not an integer; unset it or give a number.");
  return value;
}

void logEnvTable() {
  for (const EnvVarSpec& spec : kTable) {
    const char* value = std::getenv(spec.name);
    bool set = value != nullptr && value[0] != '\0';
    LOOM_INFO(kLogEnv, spec.name, "=", set ? value : spec.defaultValue,
              set ? " (set)" : " (default)");
  }
}

std::string envTableMarkdown() {
  std::string out = "| variable | default | meaning |\n|---|---|---|\n";
  for (const EnvVarSpec& spec : kTable) {
    out += strCat("| `", spec.name, "` | ", spec.defaultValue[0] ? spec.defaultValue : "(unset)",
                  " | ", spec.description, " |\n");
  }
  return out;
}

}  // namespace loom
