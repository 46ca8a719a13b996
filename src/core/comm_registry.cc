#include "src/core/comm_registry.h"

#include "src/core/handle_registry.h"

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
  // Every call of the data path looks its communicator up; a thread calls with the same one
  // again and again, and the table's mutex and hash cost more than the rest of a small call's
  // checks. The last one found is kept per thread, weakly (a destroyed communicator must not
  // be kept alive by a thread that no longer calls), and trusted until a handle is removed.
  struct LastFound {
    const loomComm* handle = nullptr;
    uint64_t removals = 0;
    std::weak_ptr<Comm> comm;
  };
  thread_local LastFound last;
  HandleRegistry<loomComm, Comm>& table = registry();
  const uint64_t removals = table.removals();
  if (last.handle == handle && last.removals == removals) {
    if (std::shared_ptr<Comm> comm = last.comm.lock()) return comm;
  }
  std::shared_ptr<Comm> comm = table.find(handle);
  last = LastFound{handle, removals, comm};
  return comm;
}
std::shared_ptr<Comm> unregisterComm(const loomComm* handle) {
  if (handle == nullptr)
    throw InvalidArgument(
        "the communicator is NULL; pass one created by loomCommInitRank, "
        "loomCommInitAll or loomCommSplit");
  return registry().remove(handle);
}

}  // namespace loom
