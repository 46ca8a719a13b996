// Where loom's stream threads run (src/exec/thread_binding.h): the CPU-list parser, and a host
// stream's worker running on its rank's NUMA CPUs (all CPUs on a one-node machine) unless
// LOOM_BIND_THREADS=0.
#include <gtest/gtest.h>
#include <sched.h>

#include "src/comm/comm.h"
#include "src/exec/host_stream.h"
#include "src/exec/thread_binding.h"
#include "tests/coll/coll_harness.h"
#include "tests/test_util.h"

namespace loom::colltest {
namespace {

TEST(ThreadBinding, ParsesHwlocCpuLists) {
  cpu_set_t set;
  ASSERT_TRUE(parseCpuList("0-13,112-125", &set));
  EXPECT_EQ(CPU_COUNT(&set), 28);
  EXPECT_TRUE(CPU_ISSET(0, &set) && CPU_ISSET(13, &set) && CPU_ISSET(112, &set));
  EXPECT_FALSE(CPU_ISSET(14, &set) || CPU_ISSET(126, &set));
  ASSERT_TRUE(parseCpuList("3", &set));
  EXPECT_EQ(CPU_COUNT(&set), 1);
  ASSERT_TRUE(parseCpuList("", &set));
  EXPECT_EQ(CPU_COUNT(&set), 0);
  for (const char* bad : {"a", "3-1", "1,,2", "5-", "-2", "1;2"})
    EXPECT_FALSE(parseCpuList(bad, &set)) << bad;
}

// The affinity of the thread that runs `stream`'s work.
cpu_set_t workerAffinity(loomStream_t stream) {
  cpu_set_t seen;
  CPU_ZERO(&seen);
  std::shared_ptr<HostStream> s = findStream(stream);
  const uint64_t position = s->enqueue([&] { sched_getaffinity(0, sizeof(seen), &seen); });
  // Poll instead of wait(): a waiting thread may run the item itself (host_stream.h).
  while (s->query(position) == loomInProgress) sched_yield();
  EXPECT_EQ(s->query(position), loomSuccess);
  return seen;
}

TEST(ThreadBinding, StreamThreadRunsOnItsRanksNumaCpus) {
  for (const char* bind : {"1", "0"}) {
    test::ScopedEnv env("LOOM_BIND_THREADS", bind);
    CommSet comms(2);
    ASSERT_TRUE(comms.ok());
    cpu_set_t allowed, expected;
    ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
    const bool binds = rankCpus(*static_cast<Comm*>(comms[0]), allowed, &expected);
    EXPECT_EQ(binds, std::string(bind) == "1") << "this machine's NUMA node must be known";
    if (!binds) expected = allowed;  // inherited from the creating thread
    cpu_set_t seen = workerAffinity(comms.stream(0));
    EXPECT_TRUE(CPU_EQUAL(&seen, &expected))
        << "LOOM_BIND_THREADS=" << bind << ": " << CPU_COUNT(&seen) << " vs "
        << CPU_COUNT(&expected) << " CPUs";
  }
}

}  // namespace
}  // namespace loom::colltest
