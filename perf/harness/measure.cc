#include "perf/harness/measure.h"

#include <algorithm>
#include <chrono>

#include "perf/harness/device.h"

namespace loomperf {

using Clock = std::chrono::steady_clock;

Measurer::Measurer(Job& job, int thread) : job_(job), o_(job.o), t_(thread) {
  if (job_.cuda) cudaUse(rank(0).device);
}

void Measurer::select(const CollSpec& spec, loomDataType_t type, Op op, int root) {
  spec_ = &spec;
  type_ = type;
  op_ = op;
  root_ = root;
}

CollCounts Measurer::counts(size_t bytes) const {
  size_t ts = typeInfo(type_).size;
  return spec_->counts(bytes / ts, job_.nranks);
}

void Measurer::setup(size_t bytes) {
  ts_ = typeInfo(type_).size;
  counts_ = counts(bytes);
  shift_ = BufferShift(counts_, ts_, o_.maxBytes);
}

CallSite Measurer::site(const Rank& r) const {
  return {r.rank, job_.nranks, root_ < 0 ? 0 : root_};
}

void Measurer::startColl(bool inPlace, int iter) {
  const size_t shift = shift_.at(iter);
  job_.dog->busy(t_, spec_->name);
  if (o_.nGpus > 1) check(loomGroupStart(), nullptr, "loomGroupStart");
  for (int g = 0; g < o_.nGpus; ++g) {
    Rank& r = rank(g);
    if (job_.cuda && o_.nGpus > 1) cudaUse(r.device);
    char* recv = r.recv + shift;
    const char* send = inPlace ? recv + counts_.sendInplaceOffset * ts_ * r.rank : r.send + shift;
    char* out = inPlace ? recv + counts_.recvInplaceOffset * ts_ * r.rank : recv;
    loomRedOp_t op = static_cast<loomRedOp_t>(op_);
    if (op_ == Op::kMulSum) {
      // nccl-tests creates the PreMulSum op around each call; so do we.
      alignas(8) unsigned char scalar[8] = {};
      encodeValue(type_, mulSumScalar(r.rank), scalar);
      check(loomRedOpCreatePreMulSum(&op, scalar, type_, loomScalarHostImmediate, r.comm), r.comm,
            "loomRedOpCreatePreMulSum");
    }
    check(spec_->run(send, out, counts_.paramCount, type_, op, site(r), r.comm, r.stream), r.comm,
          spec_->name);
    if (op_ == Op::kMulSum) check(loomRedOpDestroy(op, r.comm), r.comm, "loomRedOpDestroy");
  }
  if (o_.nGpus > 1) check(loomGroupEnd(), rank(0).comm, "loomGroupEnd");
  job_.dog->idle(t_);
  if (o_.blocking) {
    complete();
    job_.team->barrier(t_);
  }
}

void Measurer::complete() {
  if (job_.cuda) {
    job_.dog->busy(t_, "cudaStreamSynchronize");
    for (int g = 0; g < o_.nGpus; ++g) cudaSync(rank(g).stream, rank(g).comm);
    job_.dog->idle(t_);
    return;
  }
  job_.dog->busy(t_, "loomStreamSynchronize");
  for (int g = 0; g < o_.nGpus; ++g)
    if (rank(g).stream != nullptr)
      check(loomStreamSynchronize(rank(g).stream), rank(g).comm, "loomStreamSynchronize");
  job_.dog->idle(t_);
}

// Poisons the result area, writes each rank's input where the call reads it and the expected
// result beside it. Device buffers get the same bytes: a fill, and the input written on the
// host and copied over, in order on the rank's stream before the call.
void Measurer::initData(bool inPlace, uint64_t seed) {
  Pattern p(type_, op_, job_.nranks, seed);
  for (int g = 0; g < o_.nGpus; ++g) {
    Rank& r = rank(g);
    char* input = inPlace ? r.recv + counts_.sendInplaceOffset * ts_ * r.rank : r.send;
    if (job_.cuda) {
      if (o_.nGpus > 1) cudaUse(r.device);
      cudaFill(r.recv, kPoisonByte, std::max(sendBytes(), recvBytes()), r.stream);
      spec_->fillInput(p, site(r), counts_, r.stage);
      cudaCopy(input, r.stage, sendBytes(), r.stream);
    } else {
      poison(r.recv, std::max(sendBytes(), recvBytes()));
      spec_->fillInput(p, site(r), counts_, input);
    }
    r.checked = o_.check > 0 && spec_->fillExpected(p, site(r), counts_, r.want);
  }
}

int64_t Measurer::checkData(bool inPlace) {
  int64_t wrong = 0;
  for (int g = 0; g < o_.nGpus; ++g) {
    Rank& r = rank(g);
    if (!r.checked) continue;
    const char* got = inPlace ? r.recv + counts_.recvInplaceOffset * ts_ * r.rank : r.recv;
    if (job_.cuda) {
      // The result comes back to the host and goes through the same checker.
      if (o_.nGpus > 1) cudaUse(r.device);
      cudaCopy(r.stage, got, recvBytes(), r.stream);
      cudaSync(r.stream, r.comm);
      got = r.stage;
    }
    wrong += countWrong(got, r.want, counts_.recvCount, ts_);
  }
  return wrong;
}

void Measurer::startEvents(void* Rank::*event) {
  for (int g = 0; g < o_.nGpus; ++g) {
    if (o_.nGpus > 1) cudaUse(rank(g).device);
    cudaRecord(rank(g).*event, rank(g).stream);
  }
}

// The thread's time on the device: from the first event to the last over its ranks' streams.
double Measurer::eventSeconds() {
  double sec = 0;
  for (int g = 0; g < o_.nGpus; ++g)
    sec = std::max(sec, cudaElapsed(rank(g).timedStart, rank(g).timedEnd));
  return sec;
}

void Measurer::warmup(size_t bytes) {
  setup(bytes);
  for (int w = 0; w < o_.warmupIters; ++w) startColl(false, w);
  complete();
}

Measurement Measurer::measure(size_t bytes, bool inPlace) {
  setup(bytes);
  ThreadTeam& team = *job_.team;
  if (o_.check) initData(inPlace, 99);
  startColl(inPlace, 0);  // one call to line the ranks up before the clock starts
  complete();
  team.barrier(t_);

  if (job_.cuda) startEvents(&Rank::timedStart);
  auto t0 = Clock::now();
  for (int iter = 0; iter < o_.iters; ++iter) {
    if (o_.aggIters > 1) check(loomGroupStart(), nullptr, "loomGroupStart");
    for (int a = 0; a < o_.aggIters; ++a) startColl(inPlace, iter * o_.aggIters + a);
    if (o_.aggIters > 1) check(loomGroupEnd(), rank(0).comm, "loomGroupEnd");
  }
  double cpuSec = std::chrono::duration<double>(Clock::now() - t0).count();
  if (job_.cuda) startEvents(&Rank::timedEnd);
  complete();
  double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  if (job_.cuda) sec = eventSeconds();
  const double calls = static_cast<double>(o_.iters) * o_.aggIters;
  Measurement m;
  m.seconds = team.combine(t_, (o_.reportCputime ? cpuSec : sec) / calls,
                           static_cast<TimeReport>(o_.average));
  m.bw = spec_->bandwidth(counts_.paramCount, ts_, m.seconds, job_.nranks);
  team.barrier(t_);

  for (int c = 0; c < o_.check; ++c) {
    initData(inPlace, ++seed_);
    startColl(inPlace, 0);
    complete();
    int64_t local = checkData(inPlace);
    m.failedHere = m.failedHere || local > 0;
    m.wrong = team.sum(t_, local);
    if (m.wrong) break;
  }
  return m;
}

}  // namespace loomperf
