#include "src/exec/cpu/pull_policy.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "transports/registry.h"
#include "transports/transport.h"

namespace loom {

PullPolicy PullPolicy::fromEnv(bool oversubscribed, bool networkOnly, size_t slotBytes) {
  std::string mode = envString(EnvVar::LOOM_SHM_CMA_MODE);
  for (char& ch : mode) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  LOOM_ENFORCE(mode == "auto" || mode == "always", InvalidArgument, "LOOM_SHM_CMA_MODE='",
               envString(EnvVar::LOOM_SHM_CMA_MODE),
               "' is not a mode; use auto or always (LOOM_SHM_CMA_THRESHOLD=0 turns CMA off)");
  const size_t threshold = transport::pullThreshold();
  if (threshold == 0 || networkOnly) return PullPolicy(Mode::kNever, 0, 0);
  if (oversubscribed && mode == "auto") return PullPolicy(Mode::kCopies, threshold, 0);
  return PullPolicy(mode == "always" ? Mode::kAlways : Mode::kAuto, threshold,
                    slotBytes * transport::kSlots);
}

uint32_t PullPolicy::ringColdCalls(size_t bytesPerRank) const {
  if (bytesPerRank == 0) return transport::kSlots;
  const size_t calls = (ringBytes_ + bytesPerRank - 1) / bytesPerRank;
  return static_cast<uint32_t>(std::clamp<size_t>(calls, 1, transport::kSlots));
}

PullPolicy::Ticket PullPolicy::decideIn(int kind, size_t bytesPerRank) {
  if (mode_ == Mode::kCopies) {
    const bool copies = kind == static_cast<int>(CollKind::kBroadcast) ||
                        kind == static_cast<int>(CollKind::kAllGather);
    return Ticket{copies && bytesPerRank >= std::max(minStepBytes_, kCopiesPullMinBytes), -1, 0,
                  false};
  }
  if (mode_ != Mode::kAuto || bytesPerRank < minStepBytes_)
    return Ticket{mode_ == Mode::kAlways, -1, 0, false};
  int sizeClass = 0;
  while (sizeClass + 1 < kSizeClasses && (size_t{2} << sizeClass) <= bytesPerRank) ++sizeClass;
  const int index = kind * kSizeClasses + sizeClass;
  Group& g = groups_[static_cast<size_t>(index)];
  const uint32_t call = g.calls++;
  if (call == 0) g.ringCold = static_cast<uint8_t>(ringColdCalls(bytesPerRank));
  const uint32_t ringWarmup = g.ringCold + kCountedRingWarmup;
  bool pull;
  if (call < ringWarmup + kPullWarmup) {
    pull = call >= ringWarmup;
  } else {
    const bool pullFaster = g.preferred >= 0 ? g.preferred == 1 : g.meanNs[1] < g.meanNs[0];
    pull = exploresOn(call) ? !pullFaster : pullFaster;
  }
  const bool counts = call >= g.ringCold && g.lastWay == static_cast<int8_t>(pull);
  if (g.lastWay != static_cast<int8_t>(pull)) g.runSamples[pull ? 1 : 0] = 0;  // a new run
  g.lastWay = static_cast<int8_t>(pull);
  return Ticket{pull, index, call, counts};
}

void PullPolicy::record(const Ticket& t, uint64_t nanoseconds) {
  if (t.group < 0) return;
  Group& g = groups_[static_cast<size_t>(t.group)];
  if (!t.counts) return;  // a cold ring call, or the first after a change of way
  const int way = t.pull ? 1 : 0;
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
  if (g.meanNs[0] == 0 || g.meanNs[1] == 0) return;
  int8_t preferred = g.meanNs[1] < g.meanNs[0] ? 1 : 0;
  // The other way takes over only when it is faster by kSwitchMargin: its time comes from a
  // burst of two calls, the chosen way's from a longer run, and a burst that lands on a quiet
  // moment of a noisy machine must not flip a choice the two ways nearly tie on.
  if (g.preferred >= 0 && preferred != g.preferred &&
      g.meanNs[preferred] > g.meanNs[g.preferred] * (1 - kSwitchMargin))
    preferred = g.preferred;
  if (preferred == g.preferred) return;
  g.preferred = preferred;
  // LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=TUNING shows the choices (a flapping one only at first).
  const int kind = t.group / kSizeClasses;
  const char* what = kind == kP2pGroup ? "Send/Recv group" : collName(static_cast<CollKind>(kind));
  const int sizeClass = t.group % kSizeClasses;
  if (g.flips <= 4) ++g.flips;  // saturates: a flapping group never logs at INFO again
  const LogLevel level = g.flips <= 4 ? LogLevel::kInfo : LogLevel::kTrace;
  LOOM_LOG(level, kLogTuning, what, " of ", size_t{1} << sizeClass, "-",
           (size_t{2} << sizeClass) - 1, " bytes per rank ",
           preferred ? "pulls with CMA" : "copies through the shared ring", " from call ", t.call,
           ": ", g.meanNs[1] / 1000, " us per call with CMA, ", g.meanNs[0] / 1000,
           " us through the ring");
}

}  // namespace loom
