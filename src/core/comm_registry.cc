#include "src/core/comm_registry.h"

#include <mutex>
#include <unordered_map>

#include "src/core/error.h"

namespace loom {
namespace {

std::mutex registryMutex;
std::unordered_map<const loomComm*, std::shared_ptr<Comm>>& registry() {
  static auto* table = new std::unordered_map<const loomComm*, std::shared_ptr<Comm>>();
  return *table;  // never destroyed: handles may be used by threads still running at exit
}

void throwNotLive(const loomComm* handle) {
  if (handle == nullptr)
    throw InvalidArgument(
        "the communicator is NULL; pass one created by loomCommInitRank, "
        "loomCommInitAll or loomCommSplit");
  throw InvalidArgument(strCat("communicator ", static_cast<const void*>(handle),
                               " is not live: it was destroyed or aborted already, or never "
                               "created"));
}

}  // namespace

loomComm* registerComm(std::shared_ptr<Comm> comm) {
  loomComm* handle = comm.get();
  std::lock_guard<std::mutex> lock(registryMutex);
  registry()[handle] = std::move(comm);
  return handle;
}

std::shared_ptr<Comm> findCommOrNull(const loomComm* handle) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = registry().find(handle);
  return it == registry().end() ? nullptr : it->second;
}

std::shared_ptr<Comm> findComm(const loomComm* handle) {
  std::shared_ptr<Comm> comm = findCommOrNull(handle);
  if (!comm) throwNotLive(handle);
  return comm;
}

std::shared_ptr<Comm> unregisterComm(const loomComm* handle) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = registry().find(handle);
  if (it == registry().end()) throwNotLive(handle);
  std::shared_ptr<Comm> comm = std::move(it->second);
  registry().erase(it);
  return comm;
}

}  // namespace loom
