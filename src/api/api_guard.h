// The C boundary's one mechanism: run the body, and turn whatever it throws into a
// loomResult_t with a last-error message (per thread, and per communicator when there is one).
#pragma once

#include <new>
#include <string>

#include "loom/loom.h"
#include "src/base/error.h"

namespace loom {

extern thread_local std::string tlsLastError;

// Records "function: what" as the last error of this thread and of `handle` (if live), logs it
// at WARN, and returns `code`.
loomResult_t recordFailure(const char* function, const loomComm* handle, loomResult_t code,
                           const std::string& what);

// Runs `body` (which returns a loomResult_t) and turns anything it throws into a result code.
template <typename Body>
loomResult_t guarded(const char* function, const loomComm* handle, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    return recordFailure(function, handle, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return recordFailure(function, handle, loomSystemError, "out of memory");
  } catch (const std::exception& e) {
    return recordFailure(function, handle, loomInternalError,
                         strCat("unexpected error (a loom bug; please report it): ", e.what()));
  }
}

}  // namespace loom
