// The flight recorder in a job (ranks as threads): what loomCommAbort and a timeout dump, read
// back from LOOM_DEBUG_FILE as the JSON lines loom-trace-merge reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace loom::test {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The JSON dumps in a log, keyed by rank (each rank must have exactly one).
std::map<int, std::string> dumpsByRank(const std::string& log) {
  std::map<int, std::string> out;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("{\"loom_flight_record\":1,", 0) != 0) continue;
    const size_t at = line.find("\"rank\":");
    const int rank = std::stoi(line.substr(at + 7));
    EXPECT_EQ(out.count(rank), 0u) << "rank " << rank << " dumped twice:\n" << log;
    out[rank] = line;
  }
  return out;
}

// The raw text of `"key":value` in `json` (the first one): a number, null, true, false or a
// quoted string, quotes kept. Enough for the flat objects of a dump.
std::string field(const std::string& json, const std::string& key) {
  const std::string tag = "\"" + key + "\":";
  const size_t at = json.find(tag);
  if (at == std::string::npos) return "<missing " + key + ">";
  const size_t begin = at + tag.size();
  size_t end = begin;
  if (json[begin] == '"') {
    end = json.find('"', begin + 1) + 1;
  } else {
    while (end < json.size() && json[end] != ',' && json[end] != '}') ++end;
  }
  return json.substr(begin, end - begin);
}

// The objects of the dump's "entries" array, in order.
std::vector<std::string> entriesOf(const std::string& json) {
  std::vector<std::string> out;
  size_t at = json.find("\"entries\":[");
  while ((at = json.find("{\"seq\":", at)) != std::string::npos) {
    const size_t end = json.find('}', at);
    out.push_back(json.substr(at, end + 1 - at));
    at = end;
  }
  return out;
}

TEST(FlightRecord, AbortDumpsEachRanksLastCalls) {
  const std::string pattern = ::testing::TempDir() + "loom_flight_abort_%p.log";
  const std::string path =
      ::testing::TempDir() + "loom_flight_abort_" + std::to_string(getpid()) + ".log";
  std::remove(path.c_str());
  ScopedEnv file("LOOM_DEBUG_FILE", pattern);
  ScopedEnv size("LOOM_TRACE_BUFFER", "4");
  constexpr int kRanks = 3;
  std::vector<loomComm_t> comms = initThreads(kRanks, makeId());
  std::barrier sync(kRanks);
  runThreads(kRanks, [&](int r) {
    loomComm_t c = comms[r];
    std::vector<float> f(16, 1.0f);
    std::vector<int32_t> i(2 * kRanks, r);
    std::vector<uint8_t> out(4, 0), in(4, 0);
    std::vector<double> d(3, r);
    EXPECT_EQ(loomAllReduce(f.data(), f.data(), 16, loomFloat32, loomSum, c, nullptr),
              loomSuccess);                                                                  // #1
    EXPECT_EQ(loomBroadcast(i.data(), i.data(), 5, loomInt32, 1, c, nullptr), loomSuccess);  // #2
    EXPECT_EQ(loomGroupStart(), loomSuccess);
    EXPECT_EQ(loomSend(out.data(), 4, loomUint8, (r + 1) % kRanks, c, nullptr), loomSuccess);  // #3
    EXPECT_EQ(loomRecv(in.data(), 4, loomUint8, (r + 2) % kRanks, c, nullptr), loomSuccess);   // #4
    EXPECT_EQ(loomGroupEnd(), loomSuccess);
    loomStream_t stream = nullptr;
    ASSERT_EQ(loomStreamCreate(c, &stream), loomSuccess);
    EXPECT_EQ(loomAllGather(i.data() + r * 2, i.data(), 2, loomInt32, c, stream), loomSuccess);
    EXPECT_EQ(loomStreamSynchronize(stream), loomSuccess);  // #5
    EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
    EXPECT_EQ(loomAllReduce(d.data(), d.data(), 3, loomFloat64, loomMax, c, nullptr),
              loomSuccess);  // #6
    EXPECT_EQ(d[0], kRanks - 1.0);
    sync.arrive_and_wait();  // no rank leaves while a peer still reads its buffers
    EXPECT_EQ(loomCommAbort(c), loomSuccess);
  });

  const std::string log = readFile(path);
  std::remove(path.c_str());
  const std::map<int, std::string> dumps = dumpsByRank(log);
  ASSERT_EQ(dumps.size(), size_t{kRanks}) << log;
  const std::string id = field(dumps.at(0), "comm_id");
  EXPECT_NE(id, "\"0000000000000000\"") << "set at init";
  for (const auto& [rank, json] : dumps) {
    SCOPED_TRACE(json);
    EXPECT_EQ(field(json, "comm"), "\"loom\"");
    EXPECT_EQ(field(json, "comm_id"), id) << "every rank computes the same id";
    EXPECT_EQ(field(json, "nranks"), "3");
    EXPECT_EQ(field(json, "pid"), std::to_string(getpid()));
    EXPECT_EQ(field(json, "reason"), "\"loomCommAbort\"");
    EXPECT_EQ(field(json, "capacity"), "4");
    const std::vector<std::string> e = entriesOf(json);
    ASSERT_EQ(e.size(), 4u) << "the last 4 of 6 calls";
    const char* kinds[] = {"\"Send\"", "\"Recv\"", "\"AllGather\"", "\"AllReduce\""};
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(field(e[k], "seq"), std::to_string(k + 3));
      EXPECT_EQ(field(e[k], "kind"), kinds[k]);
      EXPECT_EQ(field(e[k], "state"), "\"completed\"");
      EXPECT_EQ(field(e[k], "error"), "null");
      EXPECT_NE(field(e[k], "ended_ns"), "null");
    }
    EXPECT_EQ(field(e[0], "peer"), std::to_string((rank + 1) % kRanks));
    EXPECT_EQ(field(e[1], "peer"), std::to_string((rank + 2) % kRanks));
    EXPECT_EQ(field(e[0], "group"), "true");
    EXPECT_EQ(field(e[1], "count"), "4");
    EXPECT_EQ(field(e[2], "type"), "\"int32\"");
    EXPECT_EQ(field(e[2], "group"), "false");
    EXPECT_EQ(field(e[3], "op"), "\"max\"");
    EXPECT_EQ(field(e[3], "type"), "\"float64\"");
    EXPECT_EQ(field(e[3], "count"), "3");
    EXPECT_EQ(field(e[3], "root"), "null");
  }
  // The text form comes with each dump.
  EXPECT_TRUE(
      contains(log, "loom flight record of comm 'loom' (id " + id.substr(1, 16) + ") rank 1/3"))
      << log;
}

TEST(FlightRecord, TimeoutDumpsTheCallInFlightOnce) {
  const std::string pattern = ::testing::TempDir() + "loom_flight_timeout_%p.log";
  const std::string path =
      ::testing::TempDir() + "loom_flight_timeout_" + std::to_string(getpid()) + ".log";
  std::remove(path.c_str());
  ScopedEnv file("LOOM_DEBUG_FILE", pattern);
  const loomUniqueId id = makeId();
  std::vector<loomComm_t> comms(2, nullptr);
  std::barrier sync(2);
  runThreads(2, [&](int r) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.timeoutMs = 500;
    config.name = "stuck";
    ASSERT_EQ(loomCommInitRankConfig(&comms[r], 2, id, r, &config), loomSuccess);
    std::vector<int64_t> v(8, 1);
    // Both ranks make call #1; only rank 0 makes #2, so it times out.
    EXPECT_EQ(loomAllReduce(v.data(), v.data(), 8, loomInt64, loomSum, comms[r], nullptr),
              loomSuccess);
    if (r == 0) {
      EXPECT_EQ(loomAllReduce(v.data(), v.data(), 1000, loomInt64, loomSum, comms[r], nullptr),
                loomTimeout);
    }
    sync.arrive_and_wait();
    EXPECT_EQ(loomCommAbort(comms[r]), loomSuccess);
  });

  const std::string log = readFile(path);
  std::remove(path.c_str());
  const std::map<int, std::string> dumps = dumpsByRank(log);  // one each: abort adds none
  ASSERT_EQ(dumps.size(), 2u) << log;
  const std::string& stuck = dumps.at(0);
  EXPECT_EQ(field(stuck, "comm"), "\"stuck\"");
  EXPECT_EQ(field(stuck, "reason").rfind("\"loomTimeout: ", 0), 0u) << stuck;
  std::vector<std::string> e = entriesOf(stuck);
  ASSERT_EQ(e.size(), 2u) << stuck;
  EXPECT_EQ(field(e[0], "state"), "\"completed\"");
  EXPECT_EQ(field(e[1], "seq"), "2");
  EXPECT_EQ(field(e[1], "count"), "1000");
  EXPECT_EQ(field(e[1], "state"), "\"running\"") << "dumped as the failure is recorded";
  EXPECT_EQ(field(e[1], "ended_ns"), "null");

  const std::string& idle = dumps.at(1);
  EXPECT_EQ(field(idle, "reason"), "\"loomCommAbort\"");
  e = entriesOf(idle);
  ASSERT_EQ(e.size(), 1u) << idle;
  EXPECT_EQ(field(e[0], "seq"), "1");
  EXPECT_EQ(field(e[0], "state"), "\"completed\"");
}

}  // namespace
}  // namespace loom::test
