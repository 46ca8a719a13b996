#include "src/base/host_id.h"

#include <unistd.h>

#include <fstream>

#include "src/base/env.h"

namespace loom {

std::string hostIdentity() {
  if (envIsSet(EnvVar::LOOM_HOSTID)) return envString(EnvVar::LOOM_HOSTID);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string bootId;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, bootId);
  return std::string(host) + ":" + bootId;
}

uint64_t hashString(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace loom
