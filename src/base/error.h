// Errors inside loom are C++ exceptions of one small hierarchy; each carries the loomResult_t
// that the C boundary (api.cc) returns. Messages say what went wrong and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

#include "loom/loom.h"
#include "src/base/strings.h"

namespace loom {

class Error : public std::runtime_error {
 public:
  Error(loomResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  loomResult_t code() const { return code_; }

 private:
  loomResult_t code_;
};

#define LOOM_DEFINE_ERROR(Name, code)                             \
  class Name : public Error {                                     \
   public:                                                        \
    explicit Name(const std::string& what) : Error(code, what) {} \
  }

LOOM_DEFINE_ERROR(InvalidArgument, loomInvalidArgument);
LOOM_DEFINE_ERROR(InvalidUsage, loomInvalidUsage);
LOOM_DEFINE_ERROR(SystemError, loomSystemError);
LOOM_DEFINE_ERROR(InternalError, loomInternalError);
LOOM_DEFINE_ERROR(RemoteError, loomRemoteError);
LOOM_DEFINE_ERROR(TimeoutError, loomTimeout);
LOOM_DEFINE_ERROR(CudaError, loomUnhandledCudaError);
#undef LOOM_DEFINE_ERROR

// Throws SystemError with strerror(err) appended: "connect to 10.0.0.1:5000: Connection refused".
[[noreturn]] void throwSystemError(const std::string& what, int err);

}  // namespace loom

// LOOM_ENFORCE(cond, ErrorType, message parts...): throw ErrorType(message) unless cond.
#define LOOM_ENFORCE(cond, ErrorType, ...)                             \
  do {                                                                 \
    if (!(cond)) throw ::loom::ErrorType(::loom::strCat(__VA_ARGS__)); \
  } while (0)

// LOOM_ENFORCE_EQ(a, b, ErrorType, context...): the message names both values.
#define LOOM_ENFORCE_EQ(a, b, ErrorType, ...)                                              \
  do {                                                                                     \
    const auto& loomA_ = (a);                                                              \
    const auto& loomB_ = (b);                                                              \
    if (!(loomA_ == loomB_))                                                               \
      throw ::loom::ErrorType(                                                             \
          ::loom::strCat(__VA_ARGS__, " (" #a " = ", loomA_, ", " #b " = ", loomB_, ")")); \
  } while (0)
