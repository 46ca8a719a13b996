#include "src/net/test_hooks.h"

#include <atomic>
#include <memory>
#include <mutex>

namespace loom::testing {
namespace {

std::atomic<uint64_t> refused{0};
std::atomic<int> relayPauseMs{0};
std::atomic<bool> anyHook{false};
std::mutex hookMutex;
ListenerHook listenerHook;
InitStageHook stageHook;

}  // namespace

void setListenerHook(ListenerHook hook) {
  std::lock_guard<std::mutex> lock(hookMutex);
  listenerHook = std::move(hook);
  anyHook = listenerHook || stageHook;
}

void setInitStageHook(InitStageHook hook) {
  std::lock_guard<std::mutex> lock(hookMutex);
  stageHook = std::move(hook);
  anyHook = listenerHook || stageHook;
}

void notifyListenerCreated(const SocketAddress& address) {
  if (!anyHook.load(std::memory_order_relaxed)) return;
  ListenerHook hook;
  {
    std::lock_guard<std::mutex> lock(hookMutex);
    hook = listenerHook;
  }
  if (hook) hook(address);
}

void notifyInitStage(int rank, const std::string& stage) {
  if (!anyHook.load(std::memory_order_relaxed)) return;
  InitStageHook hook;
  {
    std::lock_guard<std::mutex> lock(hookMutex);
    hook = stageHook;
  }
  if (hook) hook(rank, stage);
}

void setControlRelayPauseMs(int ms) { relayPauseMs.store(ms, std::memory_order_relaxed); }
int controlRelayPauseMs() { return relayPauseMs.load(std::memory_order_relaxed); }

void countRefusedConnection() { refused.fetch_add(1, std::memory_order_relaxed); }
uint64_t refusedConnectionCount() { return refused.load(std::memory_order_relaxed); }

}  // namespace loom::testing
