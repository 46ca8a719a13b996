// The flight recorder's ring on its own (src/comm/flight_recorder.h): what it keeps, how it
// wraps, what it refuses, and what its dumps say.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "src/base/error.h"
#include "src/comm/flight_recorder.h"
#include "tests/test_util.h"

namespace loom {
namespace {

FlightRecorder::Config configOf(size_t capacity, std::string file = "") {
  FlightRecorder::Config c;
  c.comm = "unit";
  c.rank = 2;
  c.nranks = 4;
  c.capacity = capacity;
  c.debugFile = std::move(file);
  return c;
}

CallShape allReduce(uint64_t count) {
  CallShape s;
  s.kind = "AllReduce";
  s.type = "float32";
  s.op = "sum";
  s.count = count;
  return s;
}

// Issues and completes calls first..last, each with count = 10 * seq.
void runCalls(FlightRecorder& r, uint64_t first, uint64_t last) {
  for (uint64_t seq = first; seq <= last; ++seq) {
    r.issue(seq, allReduce(10 * seq), true);
    r.finish(seq, loomSuccess);
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(FlightRecorder, KeepsEveryFieldOfACall) {
  FlightRecorder r(configOf(8));
  CallShape bcast;
  bcast.kind = "Broadcast";
  bcast.type = "int32";
  bcast.count = 7;
  bcast.root = 3;
  bcast.grouped = true;
  CallShape send;
  send.kind = "Send";
  send.type = "uint8";
  send.count = 1;
  send.peer = 1;
  const int64_t before = FlightRecorder::steadyNs();
  r.issue(5, bcast, false);
  r.issue(6, send, true);
  EXPECT_EQ(r.snapshot()[0].state, CallState::kIssued);
  EXPECT_EQ(r.snapshot()[0].startedNs, 0);
  r.start(5);
  r.finish(5, loomRemoteError);
  const int64_t after = FlightRecorder::steadyNs();

  const std::vector<FlightEntry> entries = r.snapshot();
  ASSERT_EQ(entries.size(), 2u);
  const FlightEntry& b = entries[0];
  EXPECT_EQ(b.seq, 5u);
  EXPECT_STREQ(b.shape.kind, "Broadcast");
  EXPECT_STREQ(b.shape.type, "int32");
  EXPECT_EQ(b.shape.op, nullptr);
  EXPECT_EQ(b.shape.count, 7u);
  EXPECT_EQ(b.shape.root, 3);
  EXPECT_EQ(b.shape.peer, -1);
  EXPECT_TRUE(b.shape.grouped);
  EXPECT_EQ(b.state, CallState::kFailed);
  EXPECT_EQ(b.error, loomRemoteError);
  // Times come back as steady-clock readings, in order. The recorder's clock is converted at
  // the dump, which may round by a few nanoseconds either way.
  constexpr int64_t kRounding = 1000;
  EXPECT_GE(b.issuedNs, before - kRounding);
  EXPECT_LE(b.issuedNs, b.startedNs);
  EXPECT_LE(b.startedNs, b.endedNs);
  EXPECT_LE(b.endedNs, after + kRounding);

  const FlightEntry& s = entries[1];
  EXPECT_EQ(s.seq, 6u);
  EXPECT_STREQ(s.shape.kind, "Send");
  EXPECT_EQ(s.shape.root, -1);
  EXPECT_EQ(s.shape.peer, 1);
  EXPECT_FALSE(s.shape.grouped);
  EXPECT_EQ(s.state, CallState::kRunning);
  EXPECT_EQ(s.startedNs, s.issuedNs) << "a call that runs at once starts when it is issued";
  EXPECT_EQ(s.endedNs, 0);
  EXPECT_EQ(s.error, loomSuccess);
}

TEST(FlightRecorder, KeepsTheLastCallsWhenItWraps) {
  for (size_t capacity : {4u, 5u}) {  // power of two (masked) and not (modulo)
    FlightRecorder r(configOf(capacity));
    runCalls(r, 1, 13);
    const std::vector<FlightEntry> entries = r.snapshot();
    ASSERT_EQ(entries.size(), capacity);
    for (size_t i = 0; i < capacity; ++i) {
      const uint64_t seq = 13 - capacity + 1 + i;
      EXPECT_EQ(entries[i].seq, seq) << "capacity " << capacity;
      EXPECT_EQ(entries[i].shape.count, 10 * seq);
      EXPECT_EQ(entries[i].state, CallState::kCompleted);
    }
  }
}

TEST(FlightRecorder, ALateFinishLeavesTheSlotsNewCallAlone) {
  FlightRecorder r(configOf(2));
  r.issue(1, allReduce(1), false);  // queued on a stream, say
  r.issue(2, allReduce(2), true);
  r.issue(3, allReduce(3), true);  // takes call 1's slot
  r.start(1);
  r.finish(1, loomTimeout);
  const std::vector<FlightEntry> entries = r.snapshot();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].seq, 3u);
  EXPECT_EQ(entries[1].state, CallState::kRunning);
  EXPECT_EQ(entries[1].shape.count, 3u);
}

TEST(FlightRecorder, CapacityZeroRecordsAndDumpsNothing) {
  std::string path = ::testing::TempDir() + "loom_fr_off_" + std::to_string(getpid());
  FlightRecorder r(configOf(0, path));
  EXPECT_FALSE(r.enabled());
  runCalls(r, 1, 3);
  r.start(4);
  EXPECT_TRUE(r.snapshot().empty());
  r.dump("explicit");
  EXPECT_FALSE(r.dumpOnce("abort"));
  std::ifstream in(path);
  EXPECT_FALSE(in.good()) << "no file is made when the recorder is off";
}

TEST(FlightRecorder, ReadsItsSizeFromTheEnvironment) {
  {
    test::ScopedEnv env("LOOM_TRACE_BUFFER", "3");
    FlightRecorder r("env", 0, 2);
    EXPECT_EQ(r.capacity(), 3u);
  }
  {
    test::ScopedEnv env("LOOM_TRACE_BUFFER", "0");
    EXPECT_FALSE(FlightRecorder("env", 0, 2).enabled());
  }
  for (const char* bad : {"-1", "many", "99999999999"}) {
    test::ScopedEnv env("LOOM_TRACE_BUFFER", bad);
    std::string message = test::messageOf<InvalidArgument>([] { FlightRecorder("env", 0, 2); });
    EXPECT_TRUE(test::contains(message, "LOOM_TRACE_BUFFER")) << message;
  }
}

TEST(FlightRecorder, JsonHasEveryFieldAndEscapesText) {
  FlightRecorder::Config c = configOf(4);
  c.comm = "a \"quoted\" name";
  FlightRecorder r(c);
  r.setCommId(255);
  r.issue(1, allReduce(16), true);
  r.finish(1, loomSuccess);
  CallShape recv;
  recv.kind = "Recv";
  recv.type = "int8";
  recv.count = 3;
  recv.peer = 0;
  r.issue(2, recv, true);
  r.finish(2, loomTimeout);
  const std::string json = r.json("why\nnot");
  EXPECT_EQ(json.back(), '\n');
  EXPECT_EQ(json.find('\n'), json.size() - 1) << "one line";
  EXPECT_EQ(json.rfind("{\"loom_flight_record\":1,\"comm\":\"a \\\"quoted\\\" name\","
                       "\"comm_id\":\"00000000000000ff\",\"rank\":2,\"nranks\":4,",
                       0),
            0u)
      << json;
  EXPECT_TRUE(test::contains(json, "\"reason\":\"why\\nnot\",\"capacity\":4,")) << json;
  EXPECT_TRUE(test::contains(json,
                             "{\"seq\":1,\"kind\":\"AllReduce\",\"count\":16,\"type\":\"float32\","
                             "\"op\":\"sum\",\"root\":null,\"peer\":null,\"group\":false,"
                             "\"state\":\"completed\",\"error\":null,\"issued_ns\":"))
      << json;
  EXPECT_TRUE(test::contains(json,
                             "{\"seq\":2,\"kind\":\"Recv\",\"count\":3,\"type\":\"int8\","
                             "\"op\":null,\"root\":null,\"peer\":0,\"group\":false,"
                             "\"state\":\"failed\",\"error\":\"loomTimeout\",\"issued_ns\":"))
      << json;
}

TEST(FlightRecorder, TextNamesTheCommAndEveryCall) {
  FlightRecorder r(configOf(4));
  runCalls(r, 1, 2);
  r.issue(3, allReduce(675920), true);
  const std::string text = r.text("a hang");
  EXPECT_EQ(text.rfind("loom flight record of comm 'unit' (id 0000000000000000) rank 2/4 (", 0), 0u)
      << text;
  EXPECT_TRUE(test::contains(text, "): a hang\n")) << text;
  EXPECT_TRUE(test::contains(text, "3 call(s) kept of the last 4")) << text;
  EXPECT_TRUE(test::contains(text, "AllReduce           675920  float32   sum")) << text;
  EXPECT_TRUE(test::contains(text, "running")) << text;
  EXPECT_TRUE(test::contains(text, "so far")) << text;
}

TEST(FlightRecorder, DumpsOnceToTheDebugFile) {
  const std::string pattern = ::testing::TempDir() + "loom_fr_%p.log";
  const std::string path = ::testing::TempDir() + "loom_fr_" + std::to_string(getpid()) + ".log";
  std::remove(path.c_str());
  FlightRecorder r(configOf(4, pattern));
  runCalls(r, 1, 2);
  EXPECT_TRUE(r.dumpOnce("first"));
  EXPECT_FALSE(r.dumpOnce("second"));
  r.dump("on demand");  // explicit dumps always write
  const std::string text = readFile(path);
  std::remove(path.c_str());
  EXPECT_TRUE(test::contains(text, "\"reason\":\"first\"")) << text;
  EXPECT_FALSE(test::contains(text, "\"reason\":\"second\"")) << text;
  EXPECT_TRUE(test::contains(text, "\"reason\":\"on demand\"")) << text;
  EXPECT_TRUE(test::contains(text, "loom flight record of comm 'unit' (id ")) << text;
}

}  // namespace
}  // namespace loom
