// One collective call as a test case, and one rank's side of it: buffers laid out as NCCL's
// in-place and out-of-place layouts, filled with coll_data.h's inputs, issued through the C API
// and checked element by element (bit patterns), including guard bytes around every buffer,
// unchanged send buffers, and a Reduce's untouched non-root recvbuff.
//
// Free of GoogleTest: the thread tests and the rank-process binary share it.
#pragma once

#include <cstdint>
#include <string>

#include "loom/loom.h"
#include "tests/coll/coll_data.h"

namespace loom::colltest {

enum class Kind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAlltoAll };

const char* kindName(Kind kind);
// Whether the collective takes a reduction op.
bool reduces(Kind kind);

struct Case {
  Kind kind = Kind::kAllReduce;
  loomDataType_t type = loomFloat32;
  Op op = Op::kSum;  // ignored unless reduces(kind)
  size_t count = 0;  // the call's count argument
  bool inPlace = false;
  size_t sendOffset = 0;  // bytes past a 16-byte boundary
  size_t recvOffset = 0;  // in place: the offset of the one buffer
  int root = 0;
  uint32_t salt = 0;  // varies the data between cases
};

std::string describe(const Case& c, int nranks);

// One rank's buffers for a case. Not copyable: a PreMulSum scalar of device residence is read
// from this object while the operation runs.
class RankData {
 public:
  RankData(const Case& c, int nranks, int rank);
  RankData(const RankData&) = delete;
  RankData& operator=(const RankData&) = delete;

  // Creates the PreMulSum op on `comm` when the case needs one (local, before issue()).
  loomResult_t setup(loomComm_t comm);
  // Calls the collective (stream NULL: returns when done; else enqueues).
  loomResult_t issue(loomComm_t comm, loomStream_t stream) const;
  // Destroys the op made by setup(), after the operation completed.
  loomResult_t teardown(loomComm_t comm);
  // "" when every element, guard and untouched byte is right, else what is wrong.
  std::string verify() const;

 private:
  uint64_t input(int rank, uint64_t idx) const;
  uint64_t reduced(uint64_t idx) const;  // expected reduction of element idx over all ranks
  std::string checkUnchanged(const uint8_t* p, size_t count, uint64_t firstIdx,
                             const char* what) const;
  std::string checkPoison(const uint8_t* p, size_t bytes, const char* what) const;

  Case c_;
  int n_;
  int rank_;
  size_t elem_;
  Buffer send_;  // unused in place
  Buffer recv_;  // in place: the one buffer
  const void* sendPtr_ = nullptr;
  void* recvPtr_ = nullptr;
  loomRedOp_t op_ = loomSum;
  bool custom_ = false;
  uint64_t scalar_ = 0;  // 2 in the element type: the PreMulSum factor
};

}  // namespace loom::colltest
