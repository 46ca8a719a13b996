#include "tests/coll/coll_harness.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace loom::colltest {

const char* transportName(Transport t) {
  static const char* names[] = {"shm", "socket", "noshm"};
  return names[static_cast<int>(t)];
}

const char* styleName(Style s) {
  static const char* names[] = {"threads", "group", "streams"};
  return names[static_cast<int>(s)];
}

CommSet::CommSet(int nranks, Transport transport) {
  setenv("LOOM_TIMEOUT", "60", 0);
  setenv("LOOM_SOCKET_IFNAME", "lo", 0);
  if (transport == Transport::kSocket) transportEnv_.emplace("LOOM_TRANSPORT", "socket");
  if (transport == Transport::kShmDisabled) transportEnv_.emplace("LOOM_SHM_DISABLE", "1");
  comms_.assign(nranks, nullptr);
  streams_.assign(nranks, nullptr);
  loomResult_t r = loomCommInitAll(comms_.data(), nranks, nullptr);
  ok_ = r == loomSuccess;
  EXPECT_EQ(r, loomSuccess) << "loomCommInitAll(" << nranks << ", " << transportName(transport)
                            << "): " << loomGetLastError(nullptr);
  if (!ok_) comms_.assign(nranks, nullptr);
}

CommSet::~CommSet() {
  for (loomStream_t s : streams_) {
    if (s != nullptr) {
      EXPECT_EQ(loomStreamDestroy(s), loomSuccess) << loomGetLastError(nullptr);
    }
  }
  if (ok_) test::finalizeAndDestroy(comms_);
}

loomStream_t CommSet::stream(int rank) {
  if (streams_[rank] == nullptr) {
    loomResult_t r = loomStreamCreate(comms_[rank], &streams_[rank]);
    EXPECT_EQ(r, loomSuccess) << loomGetLastError(comms_[rank]);
  }
  return streams_[rank];
}

Case placed(Case c, int placement) {
  const size_t elem = typeInfo(c.type).size;
  c.inPlace = placement == 1 || placement == 3;
  c.sendOffset = placement == 2 ? 1 : placement == 4 ? elem : 0;
  c.recvOffset = placement == 2 ? 3 : placement == 3 ? 5 : 0;
  return c;
}

CaseResult runCase(CommSet& comms, const Case& c, Style style) {
  const int n = comms.size();
  std::vector<std::unique_ptr<RankData>> data;
  for (int r = 0; r < n; ++r) data.push_back(std::make_unique<RankData>(c, n, r));
  std::vector<loomResult_t> results(n, loomInternalError);
  std::vector<std::string> errors(n);
  CaseResult out;
  auto fail = [&](const std::string& what) {
    out.callFailed = true;
    if (out.failure.empty()) out.failure = describe(c, n) + " (" + styleName(style) + "): " + what;
  };
  for (int r = 0; r < n; ++r) {
    if (loomResult_t res = data[r]->setup(comms[r]); res != loomSuccess)
      fail("loomRedOpCreatePreMulSum on rank " + std::to_string(r) + " returned " +
           std::to_string(res) + ": " + loomGetLastError(comms[r]));
  }
  if (out.callFailed) return out;
  if (style == Style::kThreads) {
    test::runThreads(n, [&](int r) {
      results[r] = data[r]->issue(comms[r], nullptr);
      if (results[r] != loomSuccess) errors[r] = loomGetLastError(comms[r]);
    });
  } else if (style == Style::kGroup) {
    EXPECT_EQ(loomGroupStart(), loomSuccess);
    for (int r = 0; r < n; ++r) results[r] = data[r]->issue(comms[r], nullptr);
    loomResult_t end = loomGroupEnd();
    if (end != loomSuccess)
      fail("loomGroupEnd returned " + std::to_string(end) + ": " + loomGetLastError(nullptr));
  } else {
    for (int r = 0; r < n; ++r) results[r] = data[r]->issue(comms[r], comms.stream(r));
    for (int r = 0; r < n; ++r) {
      if (results[r] != loomSuccess) continue;
      results[r] = loomStreamSynchronize(comms.stream(r));
      if (results[r] != loomSuccess) errors[r] = loomGetLastError(nullptr);
    }
  }
  for (int r = 0; r < n; ++r) {
    if (results[r] != loomSuccess) {
      std::string msg = errors[r].empty() ? loomGetLastError(comms[r]) : errors[r];
      fail("rank " + std::to_string(r) + " returned " + std::to_string(results[r]) + ": " + msg);
    }
  }
  for (int r = 0; r < n; ++r) {
    if (loomResult_t res = data[r]->teardown(comms[r]); res != loomSuccess)
      fail("loomRedOpDestroy returned " + std::to_string(res));
  }
  if (out.callFailed) return out;
  for (int r = 0; r < n && out.failure.empty(); ++r) {
    std::string err = data[r]->verify();
    if (!err.empty()) out.failure = std::string(styleName(style)) + ": " + err;
  }
  return out;
}

std::vector<std::string> runMatrix(CommSet& comms, const Matrix& m) {
  std::vector<std::string> failures;
  if (!comms.ok()) return {"no communicators"};
  const int n = comms.size();
  std::vector<Op> ops = m.ops;
  if (!reduces(m.kind)) ops.resize(1);
  int index = 0;
  auto run = [&](Case c) {
    c.kind = m.kind;
    c.root = (index / 5) % n;  // independent of the placement, index % 5
    c.salt = m.salt + index;
    CaseResult res = runCase(comms, placed(c, index % 5), m.style);
    ++index;
    if (!res.failure.empty()) failures.push_back(res.failure);
    return !res.callFailed;
  };
  for (loomDataType_t t : m.types) {
    if (m.zeroCount) {
      Case zero;
      zero.type = t;
      zero.op = ops[0];
      zero.count = 0;
      if (!run(zero)) return failures;
    }
    for (Op op : ops) {
      for (size_t count : m.counts) {
        Case c;
        c.type = t;
        c.op = op;
        c.count = count;
        if (!run(c)) return failures;
      }
    }
  }
  return failures;
}

void expectPass(const std::vector<std::string>& failures) {
  for (size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  if (failures.size() > 20) ADD_FAILURE() << failures.size() - 20 << " more failures";
}

void checkMatrix(int nranks, Transport transport, const Matrix& m) {
  CommSet comms(nranks, transport);
  expectPass(runMatrix(comms, m));
}

void checkCase(int nranks, Transport transport, const Case& c, Style style) {
  CommSet comms(nranks, transport);
  if (!comms.ok()) return;
  CaseResult res = runCase(comms, c, style);
  EXPECT_EQ(res.failure, "");
}

std::string ranksName(const ::testing::TestParamInfo<int>& info) {
  return "n" + std::to_string(info.param);
}

}  // namespace loom::colltest
