#include "src/base/interrupt.h"

#include <algorithm>
#include <cstring>

#include "src/base/error.h"

namespace loom {

bool Interrupt::fail(loomResult_t code, int rank, const std::string& message) {
  bool expected = false;
  if (!claimed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return false;
  code_ = code;
  rank_ = rank;
  const size_t n = std::min(message.size(), sizeof(message_) - 1);
  std::memcpy(message_, message.data(), n);
  message_[n] = '\0';
  // Readers look at the fields only after seeing kFailed (acquire).
  state_.fetch_or(kFailed, std::memory_order_acq_rel);
  return true;
}

void Interrupt::throwIfRaised(const char* what) const {
  const int state = state_.load(std::memory_order_acquire);
  if (state & kFailed) throw Error(code_, strCat(what, " was interrupted: ", message_));
  if (state & kAborted)
    throw InvalidUsage(
        strCat(what, " was interrupted: the communicator was aborted (loomCommAbort)"));
  if (const Interrupt* f = failure())
    throw Error(f->code_,
                strCat(what, " was interrupted: its parent communicator failed: ", f->message_));
}

}  // namespace loom
