// A table of live handles of one kind (communicators, streams, events). Every API call looks
// its handle up here, so a destroyed or made-up handle is reported (loomInvalidArgument)
// instead of crashing, and an object stays alive while any call still uses it (shared_ptr).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "src/base/error.h"

namespace loom {

template <typename Handle, typename Object>
class HandleRegistry {
 public:
  // `kind` names the handle in messages ("communicator", "stream", "event").
  explicit HandleRegistry(const char* kind) : kind_(kind) {}

  Handle* add(std::shared_ptr<Object> object) {
    Handle* handle = object.get();
    std::lock_guard<std::mutex> lock(mutex_);
    table_[handle] = std::move(object);
    return handle;
  }
  std::shared_ptr<Object> findOrNull(const Handle* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(handle);
    return it == table_.end() ? nullptr : it->second;
  }
  // Every call of the data path looks its handle up, a thread mostly the same one again and
  // again, and the table's mutex and hash cost more than the rest of a small call's checks. So
  // each thread keeps the last object it found, weakly (a destroyed object must not be kept
  // alive by a thread that no longer calls), and trusts it until any handle is removed (a
  // handle can name a new object, at the same address, only after a removal).
  std::shared_ptr<Object> find(const Handle* handle) const {
    struct LastFound {
      const HandleRegistry* registry = nullptr;
      const Handle* handle = nullptr;
      uint64_t removals = 0;
      std::weak_ptr<Object> object;
    };
    thread_local LastFound last;
    const uint64_t removals = removals_.load(std::memory_order_acquire);
    if (last.registry == this && last.handle == handle && last.removals == removals) {
      if (std::shared_ptr<Object> object = last.object.lock()) return object;
    }
    std::shared_ptr<Object> object = findOrNull(handle);
    if (!object) throwNotLive(handle);
    last = LastFound{this, handle, removals, object};
    return object;
  }
  std::shared_ptr<Object> remove(const Handle* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(handle);
    if (it == table_.end()) throwNotLive(handle);
    std::shared_ptr<Object> object = std::move(it->second);
    table_.erase(it);
    removals_.fetch_add(1, std::memory_order_release);  // invalidates find()'s caches
    return object;
  }

 private:
  [[noreturn]] void throwNotLive(const Handle* handle) const {
    if (handle == nullptr) throw InvalidArgument(strCat("the ", kind_, " is NULL"));
    throw InvalidArgument(strCat(kind_, " ", static_cast<const void*>(handle),
                                 " is not live: it was destroyed already, or never created"));
  }

  const char* kind_;
  mutable std::mutex mutex_;
  std::atomic<uint64_t> removals_{0};  // handles removed so far (find())
  std::unordered_map<const Handle*, std::shared_ptr<Object>> table_;
};

}  // namespace loom
