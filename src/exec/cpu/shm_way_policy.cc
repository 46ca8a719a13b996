#include "src/exec/cpu/shm_way_policy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <string>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/base/strings.h"
#include "src/kernels/cross_core_copy.h"
#include "transports/registry.h"
#include "transports/transport.h"

namespace loom {

namespace {

constexpr uint32_t bitOf(ShmWay w) { return 1u << static_cast<int>(w); }

// The `index`-th way of `ways` (in way order) other than `skip`.
ShmWay nthOther(uint32_t ways, ShmWay skip, int index) {
  for (int w = 0; w < ShmWayPolicy::kWays; ++w) {
    if ((ways >> w & 1) == 0 || w == static_cast<int>(skip)) continue;
    if (index-- == 0) return static_cast<ShmWay>(w);
  }
  return skip;
}

const char* wayPhrase(ShmWay w) {
  switch (w) {
    case ShmWay::kRing:
      return "copies through the shared ring";
    case ShmWay::kStreamedRing:
      return "streams its stores into the shared ring";
    case ShmWay::kPull:
      return "pulls with CMA";
    case ShmWay::kWalkedRing:
      return "walks 8 pages at once through the shared ring";
  }
  return "?";
}

const char* wayName(ShmWay w) {
  switch (w) {
    case ShmWay::kRing:
      return "through the ring";
    case ShmWay::kStreamedRing:
      return "with streamed stores";
    case ShmWay::kPull:
      return "with CMA";
    case ShmWay::kWalkedRing:
      return "walked";
  }
  return "?";
}

}  // namespace

namespace {
std::string lowerEnv(EnvVar var) {
  std::string s = envString(var);
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}
}  // namespace

ShmWayPolicy ShmWayPolicy::fromEnv(bool oversubscribed, bool networkOnly, size_t slotBytes) {
  const std::string mode = lowerEnv(EnvVar::LOOM_SHM_CMA_MODE);
  LOOM_ENFORCE(mode == "auto" || mode == "always", InvalidArgument, "LOOM_SHM_CMA_MODE='",
               envString(EnvVar::LOOM_SHM_CMA_MODE),
               "' is not a mode; use auto or always (LOOM_SHM_CMA_THRESHOLD=0 turns CMA off)");
  const std::string stream = lowerEnv(EnvVar::LOOM_SHM_STREAM_SLOTS);
  LOOM_ENFORCE(stream == "auto" || stream == "1" || stream == "0", InvalidArgument,
               "LOOM_SHM_STREAM_SLOTS='", envString(EnvVar::LOOM_SHM_STREAM_SLOTS),
               "' is not a setting; use auto, 1 or 0");
  const bool streamsAlways = stream == "1";
  const std::string walk = lowerEnv(EnvVar::LOOM_SHM_PAGE_WALK);
  LOOM_ENFORCE(walk == "auto" || walk == "1" || walk == "0", InvalidArgument,
               "LOOM_SHM_PAGE_WALK='", envString(EnvVar::LOOM_SHM_PAGE_WALK),
               "' is not a setting; use auto, 1 or 0");
  // Where every rank has a CPU of its own (more ranks than CPUs never walk: executor.cc).
  const bool walkedRing = walk == "auto" && !oversubscribed, walksAlways = walk == "1";
  const size_t threshold = transport::pullThreshold();
  if (networkOnly) return ShmWayPolicy(Mode::kNever, 0, 0);
  if (oversubscribed) {
    if (threshold == 0) return ShmWayPolicy(Mode::kNever, 0, 0, false, streamsAlways);
    return ShmWayPolicy(mode == "auto" ? Mode::kCopies : Mode::kAlways, threshold, 0, false,
                        streamsAlways);
  }
  if (mode == "always" && threshold > 0)
    return ShmWayPolicy(Mode::kAlways, threshold, 0, false, streamsAlways, walkedRing, walksAlways);
  const bool streamedRing = stream == "auto";
  if (threshold == 0 && !streamedRing && !walkedRing)
    return ShmWayPolicy(Mode::kNever, 0, 0, false, streamsAlways, false, walksAlways);
  return ShmWayPolicy(Mode::kAuto, threshold, slotBytes * transport::kSlots, streamedRing,
                      streamsAlways, walkedRing, walksAlways);
}

uint32_t ShmWayPolicy::ringColdCalls(size_t bytesPerRank) const {
  if (bytesPerRank == 0) return transport::kSlots;
  const size_t calls = (ringBytes_ + bytesPerRank - 1) / bytesPerRank;
  return static_cast<uint32_t>(std::clamp<size_t>(calls, 1, transport::kSlots));
}

uint32_t ShmWayPolicy::ways(size_t bytesPerRank) const {
  uint32_t ways = bitOf(ShmWay::kRing);
  if (mode_ != Mode::kAuto || bytesPerRank < kMeasuredMinBytes) return ways;
  if (streamedRing_) ways |= bitOf(ShmWay::kStreamedRing);
  if (minPullBytes_ > 0 && bytesPerRank >= minPullBytes_) ways |= bitOf(ShmWay::kPull);
  // Only steps of a whole walk's block or more walk (prim_task.cc).
  if (walkedRing_ && !streamsAlways_ && bytesPerRank >= kCrossCoreBlockBytes)
    ways |= bitOf(ShmWay::kWalkedRing);
  return ways;
}

uint32_t ShmWayPolicy::warmupCalls(size_t bytesPerRank) const {
  const auto others = static_cast<uint32_t>(std::popcount(ways(bytesPerRank)) - 1);
  return ringColdCalls(bytesPerRank) + kCountedRingWarmup + kWayWarmup * others;
}

ShmWay ShmWayPolicy::wayOf(const Group& g, uint32_t call) const {
  const int others = std::popcount(g.ways) - 1;
  const uint32_t ringWarmup = g.ringCold + kCountedRingWarmup;
  if (call < ringWarmup) return ShmWay::kRing;
  const uint32_t warming = (call - ringWarmup) / kWayWarmup;
  if (warming < static_cast<uint32_t>(others))
    return nthOther(g.ways, ShmWay::kRing, static_cast<int>(warming));
  ShmWay chosen = ShmWay::kRing;
  if (g.preferred >= 0) {
    chosen = static_cast<ShmWay>(g.preferred);
  } else {  // a way's warm-up calls were not all counted (a call was not alone): the fastest yet
    for (int w = 0; w < kWays; ++w)
      if ((g.ways >> w & 1) && g.meanNs[w] > 0 && g.meanNs[w] < g.meanNs[static_cast<int>(chosen)])
        chosen = static_cast<ShmWay>(w);
  }
  const int explore = exploring(call, others);
  return explore < 0 ? chosen : nthOther(g.ways, chosen, explore);
}

ShmWayPolicy::Ticket ShmWayPolicy::decideIn(int kind, size_t bytesPerRank) {
  if (mode_ == Mode::kCopies) {
    const bool copies = kind == static_cast<int>(CollKind::kBroadcast) ||
                        kind == static_cast<int>(CollKind::kAllGather);
    const bool pull = copies && bytesPerRank >= std::max(minPullBytes_, kCopiesPullMinBytes);
    return Ticket{pull ? ShmWay::kPull : fixedWay(), -1, 0, false};
  }
  const uint32_t ways = this->ways(bytesPerRank);
  if (std::popcount(ways) < 2) return Ticket{fixedWay(), -1, 0, false};
  int sizeClass = 0;
  while (sizeClass + 1 < kSizeClasses && (size_t{2} << sizeClass) <= bytesPerRank) ++sizeClass;
  const int index = kind * kSizeClasses + sizeClass;
  Group& g = groups_[static_cast<size_t>(index)];
  const uint32_t call = g.calls++;
  if (call == 0) {
    g.ringCold = static_cast<uint8_t>(ringColdCalls(bytesPerRank));
    g.ways = static_cast<uint8_t>(ways);
  }
  ShmWay way = wayOf(g, call);
  const auto w = static_cast<int8_t>(way);
  const bool counts = call >= g.ringCold && g.lastWay == w;
  if (g.lastWay != w) g.runSamples[static_cast<size_t>(w)] = 0;  // a new run
  g.lastWay = w;
  // LOOM_SHM_STREAM_SLOTS=1: the ring the group measures is the streamed one (record() counts
  // it as the ring).
  if (streamsAlways_ && way == ShmWay::kRing) way = ShmWay::kStreamedRing;
  return Ticket{way, index, call, counts};
}

void ShmWayPolicy::record(const Ticket& t, uint64_t nanoseconds) {
  if (t.group < 0) return;
  Group& g = groups_[static_cast<size_t>(t.group)];
  if (!t.counts) return;  // a cold ring call, or the first after a change of way
  const ShmWay measured = streamsAlways_ && t.way == ShmWay::kStreamedRing ? ShmWay::kRing : t.way;
  const auto way = static_cast<size_t>(measured);
  const uint32_t n = ++g.runSamples[way];
  // One descheduled call must not flip the choice: a call counts for at most 4x the way's time
  // (before the way has one: 4x the run's first call).
  const double m = g.meanNs[way];
  double ns = static_cast<double>(nanoseconds);
  if (m > 0) {
    ns = std::min(ns, 4 * m);
  } else if (n > 1) {
    ns = std::min(ns, 4 * g.runFirstNs[way]);
  }
  if (n == 1) {
    g.runFirstNs[way] = ns;  // a lone call says little: the way keeps its time until the next
    return;
  }
  if (n == 2) {
    g.meanNs[way] = (g.runFirstNs[way] + ns) / 2;
  } else {
    g.meanNs[way] = m + (ns - m) / std::min<uint32_t>(n, 16);
  }
  int best = -1;
  for (int w = 0; w < kWays; ++w) {
    if ((g.ways >> w & 1) == 0) continue;
    if (g.meanNs[w] == 0) return;  // not every way has a time yet
    if (best < 0 || g.meanNs[w] < g.meanNs[best]) best = w;
  }
  // Another way takes over only when it is faster by kSwitchMargin: its time comes from a
  // burst of two calls, the chosen way's from a longer run, and a burst that lands on a quiet
  // moment of a noisy machine must not flip a choice the ways nearly tie on.
  if (g.preferred >= 0 && best != g.preferred &&
      g.meanNs[best] > g.meanNs[g.preferred] * (1 - kSwitchMargin))
    best = g.preferred;
  if (best == g.preferred) return;
  g.preferred = static_cast<int8_t>(best);
  // LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=TUNING shows the choices (a flapping one only at first).
  const int kind = t.group / kSizeClasses;
  const char* what = kind == kP2pGroup ? "Send/Recv group" : collName(static_cast<CollKind>(kind));
  const int sizeClass = t.group % kSizeClasses;
  if (g.flips <= 4) ++g.flips;  // saturates: a flapping group never logs at INFO again
  const LogLevel level = g.flips <= 4 ? LogLevel::kInfo : LogLevel::kTrace;
  std::string times;
  for (int w = 0; w < kWays; ++w)
    if (g.ways >> w & 1)
      times += strCat(times.empty() ? "" : ", ", g.meanNs[w] / 1000, " us ",
                      wayName(static_cast<ShmWay>(w)));
  LOOM_LOG(level, kLogTuning, what, " of ", size_t{1} << sizeClass, "-",
           (size_t{2} << sizeClass) - 1, " bytes per rank ", wayPhrase(static_cast<ShmWay>(best)),
           " from call ", t.call, ": ", times, " per call");
}

}  // namespace loom
