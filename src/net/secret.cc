#include "src/net/secret.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "src/base/error.h"

namespace loom {
namespace {

// FNV-1a, only to spread a string over the secret's bytes deterministically.
uint64_t fnv1a(const std::string& text, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

Secret randomSecret() {
  Secret s;
  size_t filled = 0;
  while (filled < s.size()) {
    ssize_t n = getrandom(s.data() + filled, s.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throwSystemError("getrandom()", errno);
    }
    filled += static_cast<size_t>(n);
  }
  return s;
}

Secret derivedSecret(const std::string& commId, const std::string& sharedSecret) {
  std::string text = commId + '\n' + sharedSecret;
  Secret s;
  uint64_t a = fnv1a(text, 0x9e3779b97f4a7c15ull), b = fnv1a(text, a);
  std::memcpy(s.data(), &a, 8);
  std::memcpy(s.data() + 8, &b, 8);
  return s;
}

bool secretsEqual(const Secret& a, const Secret& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace loom
