#include "transports/slot_ring.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "src/base/env.h"
#include "src/base/error.h"

namespace loom::transport {

namespace {

// Slot bytes from a total buffer size in `var` (LOOM_BUFFSIZE or LOOM_P2P_BUFFSIZE).
size_t slotBytesFrom(EnvVar var) {
  constexpr int64_t kMaxBuffBytes = int64_t{1} << 30;
  const int64_t total = envInt(var);
  LOOM_ENFORCE(total > 0 && total <= kMaxBuffBytes, InvalidArgument, envSpec(var).name, "=", total,
               " is out of range: give the bytes of slot buffer per connection, between 1 "
               "and ",
               kMaxBuffBytes, " (default ", envSpec(var).defaultValue, ")");
  return roundUp((static_cast<size_t>(total) + kSlots - 1) / kSlots, kPageBytes);
}

}  // namespace

size_t slotBytesFromEnv() { return slotBytesFrom(EnvVar::LOOM_BUFFSIZE); }

size_t p2pSlotBytesFromEnv() { return slotBytesFrom(EnvVar::LOOM_P2P_BUFFSIZE); }

PrivateMemory::PrivateMemory(size_t bytes) : size_(roundUp(bytes, kPageBytes)) {
  // MAP_POPULATE faults every page in with one system call; the memset then makes sure they are
  // written (private anonymous pages populated for write are ours, not the shared zero page).
  void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) throwSystemError(strCat("mmap of ", size_, " bytes for a slot ring"), errno);
  data_ = static_cast<uint8_t*>(p);
  std::memset(data_, 0, size_);
}

PrivateMemory::~PrivateMemory() {
  if (data_ != nullptr) munmap(data_, size_);
}

PrivateMemory::PrivateMemory(PrivateMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PrivateMemory& PrivateMemory::operator=(PrivateMemory&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace loom::transport
