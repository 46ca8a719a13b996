// Drives coll_case.h cases on every rank of one job held in this process (loomCommInitAll), in
// one of three styles: a thread per rank (NULL stream), one thread issuing every rank's call
// inside loomGroupStart/End, or one thread enqueueing on a host stream per rank.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/coll/coll_case.h"
#include "tests/test_util.h"

namespace loom::colltest {

enum class Transport { kDefault, kSocket, kShmDisabled };
const char* transportName(Transport t);

enum class Style { kThreads, kGroup, kStreams };
const char* styleName(Style s);

// The n communicators of one job, made by loomCommInitAll with the transport's environment
// (kept for the set's lifetime, since connections may be made lazily); finalized and destroyed
// at the end. LOOM_TIMEOUT defaults to 60 s here so a hang fails instead of waiting.
class CommSet {
 public:
  CommSet(int nranks, Transport transport = Transport::kDefault);
  ~CommSet();
  CommSet(const CommSet&) = delete;
  CommSet& operator=(const CommSet&) = delete;

  bool ok() const { return ok_; }
  int size() const { return static_cast<int>(comms_.size()); }
  loomComm_t operator[](int rank) const { return comms_[rank]; }
  const std::vector<loomComm_t>& comms() const { return comms_; }
  // A host stream of `rank`'s communicator, created on first use.
  loomStream_t stream(int rank);

 private:
  std::optional<test::ScopedEnv> transportEnv_;
  std::vector<loomComm_t> comms_;
  std::vector<loomStream_t> streams_;
  bool ok_ = false;
};

struct CaseResult {
  std::string failure;      // "" when the case passed
  bool callFailed = false;  // a call returned an error: the communicators may be unusable
};

CaseResult runCase(CommSet& comms, const Case& c, Style style);

// Types x ops x counts of one collective. Placements (in/out of place, byte offsets) and roots
// cycle from case to case, so every type and op meets every placement and every root.
struct Matrix {
  Kind kind = Kind::kAllReduce;
  std::vector<loomDataType_t> types = allTypes();
  std::vector<Op> ops = allOps();            // only the first is used by copy collectives
  std::vector<size_t> counts = {1, 7, 301};  // count 0 runs once per type in addition
  Style style = Style::kThreads;
  bool zeroCount = true;
  uint32_t salt = 1;
};

// Runs every case; returns the failures (stops at the first failed call).
std::vector<std::string> runMatrix(CommSet& comms, const Matrix& m);

// A case at a placement chosen by index (0..4): out of place aligned, in place aligned, out of
// place at odd offsets, in place at an odd offset, out of place one element off.
Case placed(Case c, int placement);

// Reports failures to GoogleTest (the first 20 of them, then a count).
void expectPass(const std::vector<std::string>& failures);

// A job of n ranks over `transport` runs the matrix; failures go to GoogleTest.
void checkMatrix(int nranks, Transport transport, const Matrix& m);
// The same for one case (e.g. a large count).
void checkCase(int nranks, Transport transport, const Case& c, Style style = Style::kThreads);

// Test-name suffix for a rank count: "n3".
std::string ranksName(const ::testing::TestParamInfo<int>& info);

}  // namespace loom::colltest
