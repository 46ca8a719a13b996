#include "src/comm/comm_registry.h"

#include "src/base/handle_registry.h"

namespace loom {
namespace {

HandleRegistry<loomComm, Comm>& registry() {
  // Never destroyed: handles may be used by threads still running at exit.
  static auto* table = new HandleRegistry<loomComm, Comm>("communicator");
  return *table;
}

}  // namespace

loomComm* registerComm(std::shared_ptr<Comm> comm) { return registry().add(std::move(comm)); }
std::shared_ptr<Comm> findCommOrNull(const loomComm* handle) {
  return registry().findOrNull(handle);
}
std::shared_ptr<Comm> findComm(const loomComm* handle) {
  if (handle == nullptr)
    throw InvalidArgument(
        "the communicator is NULL; pass one created by loomCommInitRank, "
        "loomCommInitAll or loomCommSplit");
  return registry().find(handle);
}
std::shared_ptr<Comm> unregisterComm(const loomComm* handle) {
  if (handle == nullptr)
    throw InvalidArgument(
        "the communicator is NULL; pass one created by loomCommInitRank, "
        "loomCommInitAll or loomCommSplit");
  return registry().remove(handle);
}

}  // namespace loom
