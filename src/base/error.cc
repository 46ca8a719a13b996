#include "src/base/error.h"

#include <cstring>

namespace loom {

void throwSystemError(const std::string& what, int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer, which may not be buf.
  const char* msg = strerror_r(err, buf, sizeof(buf));
  throw SystemError(strCat(what, ": ", msg, " (errno ", err, ")"));
}

}  // namespace loom
