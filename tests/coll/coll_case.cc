#include "tests/coll/coll_case.h"

namespace loom::colltest {

const char* kindName(Kind kind) {
  static const char* names[] = {"AllReduce", "Broadcast",     "Reduce",
                                "AllGather", "ReduceScatter", "AlltoAll"};
  return names[static_cast<int>(kind)];
}

bool reduces(Kind kind) {
  return kind == Kind::kAllReduce || kind == Kind::kReduce || kind == Kind::kReduceScatter;
}

std::string describe(const Case& c, int nranks) {
  std::string s = std::string(kindName(c.kind)) + " " + typeInfo(c.type).name;
  if (reduces(c.kind)) s += std::string(" ") + opName(c.op);
  s += " nranks=" + std::to_string(nranks) + " count=" + std::to_string(c.count);
  s += c.inPlace ? " in-place" : " out-of-place";
  s += " offsets=" + std::to_string(c.sendOffset) + "/" + std::to_string(c.recvOffset);
  if (c.kind == Kind::kBroadcast || c.kind == Kind::kReduce) s += " root=" + std::to_string(c.root);
  return s;
}

namespace {

// Elements of the send and receive buffers (the whole buffer, for in-place layouts).
size_t sendElems(Kind k, size_t count, int n) {
  return k == Kind::kReduceScatter || k == Kind::kAlltoAll ? count * n : count;
}
size_t recvElems(Kind k, size_t count, int n) {
  return k == Kind::kAllGather || k == Kind::kAlltoAll ? count * n : count;
}

}  // namespace

RankData::RankData(const Case& c, int nranks, int rank)
    : c_(c), n_(nranks), rank_(rank), elem_(typeInfo(c.type).size) {
  const size_t cnt = c_.count, sn = sendElems(c_.kind, cnt, n_), rn = recvElems(c_.kind, cnt, n_);
  auto fill = [&](uint8_t* p, size_t elems, uint64_t firstIdx, int who) {
    for (size_t i = 0; i < elems; ++i) storeBits(p + i * elem_, elem_, input(who, firstIdx + i));
  };
  if (!c_.inPlace) {
    send_ = Buffer(sn * elem_, c_.sendOffset);
    recv_ = Buffer(rn * elem_, c_.recvOffset);
    fill(send_.data(), sn, 0, rank_);
    sendPtr_ = send_.data();
    recvPtr_ = recv_.data();
    return;
  }
  // In place: one buffer in NCCL's layout.
  size_t elems = std::max(sn, rn);
  recv_ = Buffer(elems * elem_, c_.recvOffset);
  uint8_t* base = recv_.data();
  sendPtr_ = recvPtr_ = base;
  switch (c_.kind) {
    case Kind::kAllGather:  // sendbuff = recvbuff + rank * count
      sendPtr_ = base + rank_ * cnt * elem_;
      fill(base + rank_ * cnt * elem_, cnt, 0, rank_);
      break;
    case Kind::kReduceScatter:  // recvbuff = sendbuff + rank * count
      recvPtr_ = base + rank_ * cnt * elem_;
      fill(base, elems, 0, rank_);
      break;
    case Kind::kBroadcast:  // only the root holds data; the others stay poisoned
      if (rank_ == c_.root) fill(base, elems, 0, rank_);
      break;
    default:
      fill(base, elems, 0, rank_);
  }
}

uint64_t RankData::input(int rank, uint64_t idx) const {
  Op valueOp = reduces(c_.kind) ? c_.op : Op::kMax;
  return encodeValue(c_.type, inputValue(c_.type, valueOp, rank, idx, c_.salt));
}

uint64_t RankData::reduced(uint64_t idx) const {
  return expectedReduce(c_.type, c_.op, n_,
                        [&](int r) { return inputValue(c_.type, c_.op, r, idx, c_.salt); });
}

loomResult_t RankData::setup(loomComm_t comm) {
  op_ = static_cast<loomRedOp_t>(static_cast<int>(c_.op));  // kSum..kAvg are NCCL's values
  if (!reduces(c_.kind) || (c_.op != Op::kPreMulImm && c_.op != Op::kPreMulDev)) {
    return loomSuccess;
  }
  scalar_ = encodeValue(c_.type, 2);
  loomScalarResidence_t where =
      c_.op == Op::kPreMulImm ? loomScalarHostImmediate : loomScalarDevice;
  loomResult_t r = loomRedOpCreatePreMulSum(&op_, &scalar_, c_.type, where, comm);
  custom_ = r == loomSuccess;
  // Immediate: the value is read now, so changing it afterwards must not matter.
  if (c_.op == Op::kPreMulImm) scalar_ = encodeValue(c_.type, 3);
  return r;
}

loomResult_t RankData::issue(loomComm_t comm, loomStream_t stream) const {
  const loomDataType_t t = c_.type;
  switch (c_.kind) {
    case Kind::kAllReduce:
      return loomAllReduce(sendPtr_, recvPtr_, c_.count, t, op_, comm, stream);
    case Kind::kBroadcast:
      return loomBroadcast(sendPtr_, recvPtr_, c_.count, t, c_.root, comm, stream);
    case Kind::kReduce:
      return loomReduce(sendPtr_, recvPtr_, c_.count, t, op_, c_.root, comm, stream);
    case Kind::kAllGather:
      return loomAllGather(sendPtr_, recvPtr_, c_.count, t, comm, stream);
    case Kind::kReduceScatter:
      return loomReduceScatter(sendPtr_, recvPtr_, c_.count, t, op_, comm, stream);
    case Kind::kAlltoAll:
      return loomAlltoAll(sendPtr_, recvPtr_, c_.count, t, comm, stream);
  }
  return loomInternalError;
}

loomResult_t RankData::teardown(loomComm_t comm) {
  if (!custom_) return loomSuccess;
  custom_ = false;
  return loomRedOpDestroy(op_, comm);
}

std::string RankData::checkUnchanged(const uint8_t* p, size_t count, uint64_t firstIdx,
                                     const char* what) const {
  return compareElements(
      c_.type, p, count, [&](size_t i) { return input(rank_, firstIdx + i); }, what);
}

std::string RankData::checkPoison(const uint8_t* p, size_t bytes, const char* what) const {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != Buffer::kPoison)
      return std::string(what) + " byte " + std::to_string(i) + " was written";
  return "";
}

std::string RankData::verify() const {
  const size_t cnt = c_.count;
  const std::string where = "rank " + std::to_string(rank_) + " " + describe(c_, n_) + ": ";
  std::string err = recv_.checkGuards();
  if (err.empty() && !c_.inPlace) err = send_.checkGuards();
  if (err.empty() && !c_.inPlace) {
    err = checkUnchanged(send_.data(), send_.bytes() / elem_, 0, "sendbuff changed:");
  }
  const auto* out = static_cast<const uint8_t*>(recvPtr_);
  auto expect = [&](size_t elems, auto want, const char* what) {
    if (err.empty()) err = compareElements(c_.type, out, elems, want, what);
  };
  switch (c_.kind) {
    case Kind::kAllReduce:
      expect(
          cnt, [&](size_t i) { return reduced(i); }, "recvbuff");
      break;
    case Kind::kBroadcast:
      expect(
          cnt, [&](size_t i) { return input(c_.root, i); }, "recvbuff");
      break;
    case Kind::kReduce:
      if (rank_ == c_.root) {
        expect(
            cnt, [&](size_t i) { return reduced(i); }, "root recvbuff");
      } else if (err.empty() && c_.inPlace) {
        err = checkUnchanged(out, cnt, 0, "non-root in-place buffer changed:");
      } else if (err.empty()) {
        err = checkPoison(out, cnt * elem_, "non-root recvbuff");
      }
      break;
    case Kind::kAllGather:
      expect(
          cnt * n_, [&](size_t i) { return input(static_cast<int>(i / cnt), i % cnt); },
          "recvbuff");
      break;
    case Kind::kReduceScatter:
      expect(
          cnt, [&](size_t i) { return reduced(rank_ * cnt + i); }, "recvbuff");
      break;
    case Kind::kAlltoAll:
      expect(
          cnt * n_,
          [&](size_t i) { return input(static_cast<int>(i / cnt), rank_ * cnt + i % cnt); },
          "recvbuff");
      break;
  }
  return err.empty() ? "" : where + err;
}

}  // namespace loom::colltest
