// Shared helpers of the multi-rank tests: run N ranks as threads, spawn ranks as processes,
// and set environment variables for the length of a scope.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace loom::test {

// Runs fn(rank) on nranks threads and joins them.
void runThreads(int nranks, const std::function<void(int rank)>& fn);

// A new unique id whose root lives in this process; fails the test if it cannot be made.
loomUniqueId makeId();

// Every rank inits with `id` (threads), returns the communicators (all non-null or test fails).
std::vector<loomComm_t> initThreads(int nranks, const loomUniqueId& id);
// Finalizes and destroys every communicator (threads, since finalize is collective).
void finalizeAndDestroy(const std::vector<loomComm_t>& comms);

// The hex encoding of an id, to hand to rank processes on their command line.
std::string idToHex(const loomUniqueId& id);
loomUniqueId idFromHex(const std::string& hex);

// A rank process: tests/rank_main.cc run with `args` and extra environment variables.
struct RankProcess {
  pid_t pid = -1;
  int stdoutFd = -1;  // the child's stdout (read end of a pipe)
};
RankProcess spawnRank(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {});
// The same for another rank binary (a suite's own main).
RankProcess spawnProcess(const std::string& binary, const std::vector<std::string>& args,
                         const std::vector<std::string>& env = {});
// Waits (up to timeoutMs) for the process; returns its exit code, or 128+signal, or nullopt on
// timeout (the process is then killed).
std::optional<int> waitRank(RankProcess& p, int timeoutMs, std::string* output = nullptr);
// Reads the child's stdout until `line` appears (or timeout); returns whether it appeared.
bool waitForLine(RankProcess& p, const std::string& line, int timeoutMs, std::string* output);

// Sets an environment variable for the scope (restores the old value on exit).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A free TCP port on loopback, below the kernel's ephemeral range so no port-0 bind or outgoing
// connection elsewhere takes it before the job binds it (two tests picking the same port at once
// remains a small race).
int freePort();

// Runs `fn`, expects it to throw E (or a subclass), and returns the message; any other outcome
// fails the test.
template <typename E, typename Fn>
std::string messageOf(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a different exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace loom::test

// Checks a loom call and prints loomGetLastError on failure.
#define ASSERT_LOOM_OK(call)                                                               \
  do {                                                                                     \
    loomResult_t loomTestResult_ = (call);                                                 \
    ASSERT_EQ(loomTestResult_, loomSuccess) << #call << ": " << loomGetLastError(nullptr); \
  } while (0)
