// A tiny in-memory executor for algorithm schedules, used only by the tests.
//
// Each virtual rank has one flat buffer of integers holding its input and output regions (they
// may overlap, to test in-place layouts) and a program: the list of primitive steps a schedule
// told it to run. Every (channel, sender, receiver) triple is a FIFO connection with unbounded
// slots. The simulator runs ranks round-robin; a rank advances while the messages its next step
// needs are queued. It fails loudly when a step receives a message tagged for a different chunk
// (the two ends disagree on the order), when a primitive has the wrong peers for its kind, when
// an access leaves the buffer, when no rank can advance (deadlock), or when messages are left
// unread. The meaning of each primitive is written out here independently of primitives.h, so a
// wrong predicate there cannot hide a wrong schedule.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "algorithms/primitives.h"
#include "algorithms/walker.h"

namespace loom::algo::test {

using Value = std::int64_t;

struct Op {
  Prim prim = Prim::kNone;
  int channel = 0;            // connections are per channel
  std::vector<int> recvFrom;  // every peer is received from (and reduced, for reductions)
  std::vector<int> sendTo;    // the result goes to every peer
  std::size_t in = 0;         // element offset in the rank's input region
  std::size_t out = 0;        // element offset in the rank's output region
  std::size_t count = 0;
  std::size_t tag = 0;  // names the data on the wire; sender and receiver must agree
};

struct RankState {
  std::vector<Value> mem;
  std::size_t inBase = 0;
  std::size_t outBase = 0;
  std::vector<Op> program;
};

class Sim {
 public:
  explicit Sim(int nranks) : ranks_(static_cast<std::size_t>(nranks)) {}

  RankState& rank(int r) { return ranks_[static_cast<std::size_t>(r)]; }
  void add(int r, Op op) { rank(r).program.push_back(std::move(op)); }

  // Runs every program to the end. Returns "" on success, else what went wrong.
  std::string run() {
    std::vector<std::size_t> pc(ranks_.size(), 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        while (pc[r] < ranks_[r].program.size() && ready(static_cast<int>(r), pc[r])) {
          std::string err = step(static_cast<int>(r), ranks_[r].program[pc[r]]);
          if (!err.empty()) return where(r, pc[r]) + err;
          ++pc[r];
          progress = true;
        }
      }
    }
    std::ostringstream os;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (pc[r] < ranks_[r].program.size()) os << where(r, pc[r]) << "blocked (deadlock); ";
    }
    for (const auto& [key, queue] : fifos_) {
      if (!queue.empty()) {
        os << queue.size() << " unread message(s) on channel " << std::get<0>(key) << " from "
           << std::get<1>(key) << " to " << std::get<2>(key) << "; ";
      }
    }
    return os.str();
  }

 private:
  struct Msg {
    std::size_t tag;
    std::vector<Value> data;
  };
  using Key = std::tuple<int, int, int>;  // channel, from, to
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<std::int64_t>()((std::int64_t{std::get<0>(k)} << 40) ^
                                       (std::int64_t{std::get<1>(k)} << 20) ^ std::get<2>(k));
    }
  };

  static std::string where(std::size_t r, std::size_t pc) {
    return "rank " + std::to_string(r) + " step " + std::to_string(pc) + ": ";
  }

  bool ready(int r, std::size_t pc) {
    const Op& op = rank(r).program[pc];
    for (int from : op.recvFrom) {
      if (fifos_[Key{op.channel, from, r}].empty()) return false;
    }
    return true;
  }

  std::string step(int r, const Op& op) {
    RankState& st = rank(r);
    bool recvs = false, reduces = false, readsIn = false, readsOut = false, writes = false,
         sends = false;
    switch (op.prim) {
      case Prim::kNone:
        break;
      case Prim::kCopy:
        readsIn = writes = true;
        break;
      case Prim::kSend:
        readsIn = sends = true;
        break;
      case Prim::kSendFromOutput:
        readsOut = sends = true;
        break;
      case Prim::kCopySend:
        readsIn = writes = sends = true;
        break;
      case Prim::kRecv:
        recvs = writes = true;
        break;
      case Prim::kRecvCopySend:
        recvs = writes = sends = true;
        break;
      case Prim::kRecvReduceSend:
        recvs = reduces = readsIn = sends = true;
        break;
      case Prim::kRecvReduceCopy:
        recvs = reduces = readsIn = writes = true;
        break;
      case Prim::kRecvReduceCopySend:
        recvs = reduces = readsIn = writes = sends = true;
        break;
    }
    // Copies take exactly one source; reductions may combine several children (trees).
    if (recvs != !op.recvFrom.empty() || (recvs && !reduces && op.recvFrom.size() != 1)) {
      return std::string("wrong receive peers for ") + primName(op.prim);
    }
    if (sends != !op.sendTo.empty())
      return std::string("wrong send peers for ") + primName(op.prim);
    std::vector<Value> acc(op.count, 0);
    if (readsIn || readsOut) {
      const std::size_t base = readsIn ? st.inBase + op.in : st.outBase + op.out;
      if (base + op.count > st.mem.size()) return "read out of bounds";
      for (std::size_t i = 0; i < op.count; ++i) acc[i] = st.mem[base + i];
    }
    for (int from : op.recvFrom) {
      auto& queue = fifos_[Key{op.channel, from, r}];
      Msg msg = std::move(queue.front());
      queue.pop_front();
      if (msg.tag != op.tag || msg.data.size() != op.count) {
        std::ostringstream os;
        os << "expected tag " << op.tag << " x" << op.count << " from " << from << ", got tag "
           << msg.tag << " x" << msg.data.size();
        return os.str();
      }
      for (std::size_t i = 0; i < op.count; ++i)
        acc[i] = reduces ? acc[i] + msg.data[i] : msg.data[i];
    }
    if (writes) {
      const std::size_t base = st.outBase + op.out;
      if (base + op.count > st.mem.size()) return "write out of bounds";
      for (std::size_t i = 0; i < op.count; ++i) st.mem[base + i] = acc[i];
    }
    for (int to : op.sendTo) fifos_[Key{op.channel, r, to}].push_back(Msg{op.tag, acc});
    return "";
  }

  std::vector<RankState> ranks_;
  std::unordered_map<Key, std::deque<Msg>, KeyHash> fifos_;
};

// Adds to rank r's program the steps that `program` yields, walked by the library's own walker
// (algorithms/walker.h: the one the CPU executor and the CUDA kernels use), so what the
// simulator proves about a schedule holds for the executors. Steps that receive take every
// peer of `recvFrom`, steps that send go to every peer of `sendTo`; `tag(step)` names the
// data on the wire (sender and receiver must compute the same name for the same chunk).
template <typename Tag>
void addProgram(Sim& sim, int r, int channel, const StepProgram& program,
                const std::vector<int>& recvFrom, const std::vector<int>& sendTo, Tag tag) {
  StepCursor cursor;
  Step step;
  while (nextStep(program, cursor, step)) {
    Op op;
    op.prim = step.prim;
    op.channel = channel;
    if (primRecvs(step.prim)) op.recvFrom = recvFrom;
    if (primSends(step.prim)) op.sendTo = sendTo;
    op.in = step.inOffset;
    op.out = step.outOffset;
    op.count = step.count;
    op.tag = tag(step);
    sim.add(r, std::move(op));
  }
}
inline std::size_t tagByOutput(const Step& s) { return s.outOffset; }
inline std::size_t tagByInput(const Step& s) { return s.inOffset; }

// A value no rank's data can produce by accident: rank r's element i of its input.
inline Value inputValue(int r, std::size_t i) {
  return static_cast<Value>((static_cast<std::uint64_t>(r) + 1) * 1000003u + i * 7919u +
                            (static_cast<std::uint64_t>(r) * i) % 101u);
}
inline constexpr Value kUntouched = -12345;  // fills output regions that must stay unwritten

// The rank counts every algorithm is tested with: 1, primes, powers of two, and 64.
inline const std::vector<int> kRankCounts = {1, 2, 3, 4, 5, 7, 8, 11, 16, 64};
// Names parameterised tests after their rank count ("n64") instead of an index.
inline std::string rankCountName(const ::testing::TestParamInfo<int>& info) {
  return "n" + std::to_string(info.param);
}

// Element counts for n ranks: empty, tiny, around n, odd, several loops long, and `large`
// (odd; callers whose count is per rank pass a smaller one to keep the suite fast).
inline std::vector<std::size_t> testCounts(int n, std::size_t loopElems, std::size_t large = 1001) {
  const std::size_t un = static_cast<std::size_t>(n);
  std::vector<std::size_t> c = {0, 1, un + 1, 2 * un + 3, large, 3 * loopElems + 5};
  if (n > 1) c.push_back(un - 1);
  if (n > 2) c.push_back(un);
  return c;
}

// Ring orders to test: the identity, and a scrambled one (stride coprime to n, offset), as a
// topology-aware ring would produce.
inline std::vector<std::vector<int>> testRingOrders(int n) {
  std::vector<int> identity(static_cast<std::size_t>(n)), scrambled(identity.size());
  int stride = n > 2 ? n - 2 : 1;  // n - 2 and n are coprime for odd n; fix up even n below
  while (n > 1 && std::gcd(stride, n) != 1) --stride;
  for (int i = 0; i < n; ++i) {
    identity[static_cast<std::size_t>(i)] = i;
    scrambled[static_cast<std::size_t>(i)] = (i * stride + n / 2) % n;
  }
  return {identity, scrambled};
}

}  // namespace loom::algo::test
