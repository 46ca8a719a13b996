#include "src/comm/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <ctime>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"

namespace loom {
namespace {

// A bound on LOOM_TRACE_BUFFER that keeps a typo from taking gigabytes (80 bytes a slot).
constexpr int64_t kMaxCapacity = int64_t{1} << 20;

std::string hostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// A JSON value or null: the name when there is one.
void appendJsonName(std::string& out, const char* name) {
  if (name == nullptr) {
    out += "null";
  } else {
    appendJsonString(out, name);
  }
}

void appendJsonInt(std::string& out, int64_t value, bool present) {
  out += present ? std::to_string(value) : "null";
}

// "05:40:01.123456" (UTC), or with the date first.
std::string formatWall(int64_t wallNs, bool withDate) {
  const time_t seconds = static_cast<time_t>(wallNs / 1000000000);
  tm parts{};
  gmtime_r(&seconds, &parts);
  char buf[64];
  const size_t n =
      std::strftime(buf, sizeof(buf), withDate ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &parts);
  std::snprintf(buf + n, sizeof(buf) - n, ".%06" PRId64, (wallNs % 1000000000) / 1000);
  return buf;
}

// "830 ns", "12.5 us", "3.20 ms", "5.0 s".
std::string formatDuration(int64_t ns) {
  char buf[32];
  if (ns < 1000) {
    std::snprintf(buf, sizeof(buf), "%" PRId64 " ns", ns);
  } else if (ns < 1000000) {
    std::snprintf(buf, sizeof(buf), "%.1f us", static_cast<double>(ns) / 1e3);
  } else if (ns < 1000000000) {
    std::snprintf(buf, sizeof(buf), "%.2f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ns) / 1e9);
  }
  return buf;
}

size_t capacityFromEnv() {
  const int64_t n = envInt(EnvVar::LOOM_TRACE_BUFFER);
  LOOM_ENFORCE(n >= 0 && n <= kMaxCapacity, InvalidArgument, "LOOM_TRACE_BUFFER=", n,
               " is out of range; give the number of calls each communicator keeps (0 to ",
               kMaxCapacity, "; 0 turns the flight recorder off)");
  return static_cast<size_t>(n);
}

}  // namespace

const char* callStateName(CallState state) {
  switch (state) {
    case CallState::kEmpty:
      return "empty";
    case CallState::kWriting:
      return "writing";
    case CallState::kIssued:
      return "issued";
    case CallState::kRunning:
      return "running";
    case CallState::kCompleted:
      return "completed";
    case CallState::kFailed:
      return "failed";
  }
  return "?";
}

const char* resultName(loomResult_t result) {
  switch (result) {
    case loomSuccess:
      return "loomSuccess";
    case loomUnhandledCudaError:
      return "loomUnhandledCudaError";
    case loomSystemError:
      return "loomSystemError";
    case loomInternalError:
      return "loomInternalError";
    case loomInvalidArgument:
      return "loomInvalidArgument";
    case loomInvalidUsage:
      return "loomInvalidUsage";
    case loomRemoteError:
      return "loomRemoteError";
    case loomInProgress:
      return "loomInProgress";
    case loomTimeout:
      return "loomTimeout";
    default:
      return "loomUnknownResult";
  }
}

FlightRecorder::FlightRecorder(Config config)
    : config_(std::move(config)),
      capacity_(config_.capacity),
      mask_(capacity_ != 0 && (capacity_ & (capacity_ - 1)) == 0 ? capacity_ - 1 : 0),
      slots_(capacity_ != 0 ? new Slot[capacity_] : nullptr),
      created_(Anchor::now(nullptr)) {}

FlightRecorder::FlightRecorder(std::string comm, int rank, int nranks)
    : FlightRecorder(Config{std::move(comm), rank, nranks, capacityFromEnv(),
                            envString(EnvVar::LOOM_DEBUG_FILE)}) {}

FlightRecorder::Anchor FlightRecorder::Anchor::now(const Anchor* first) {
  // The tightest of a few readings: a thread preempted between the clocks would skew the rate.
  Anchor best;
  int64_t bestSpread = INT64_MAX;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int64_t before = FlightRecorder::steadyNs();
    const uint64_t t = FlightRecorder::ticks();
    const int64_t after = FlightRecorder::steadyNs();
    if (after - before < bestSpread) {
      bestSpread = after - before;
      best.ticks = t;
      best.steadyNs = before + (after - before) / 2;
    }
  }
  best.wallNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  if (first != nullptr && best.ticks > first->ticks)
    best.nsPerTick = static_cast<double>(best.steadyNs - first->steadyNs) /
                     static_cast<double>(best.ticks - first->ticks);
#else
  (void)first;  // ticks() is the steady clock
#endif
  return best;
}

std::string FlightRecorder::commIdText() const {
  char text[20];
  std::snprintf(text, sizeof(text), "%016" PRIx64, commId_.load(std::memory_order_relaxed));
  return text;
}

bool FlightRecorder::read(const Slot& s, const Anchor& anchor, FlightEntry& out) const {
  for (int attempt = 0; attempt < 16; ++attempt) {
    const uint64_t before = s.word.load(std::memory_order_acquire);
    const auto state = static_cast<CallState>(before & 0xff);
    if (state == CallState::kEmpty) return false;
    if (state == CallState::kWriting) continue;
    out.seq = before >> 8;
    out.state = state;
    out.shape.kind = s.kind.load(std::memory_order_relaxed);
    out.shape.type = s.type.load(std::memory_order_relaxed);
    out.shape.op = s.op.load(std::memory_order_relaxed);
    out.shape.count = s.count.load(std::memory_order_relaxed);
    const uint64_t place = s.place.load(std::memory_order_relaxed);
    out.shape.root = static_cast<int32_t>(static_cast<uint32_t>(place));
    out.shape.peer = static_cast<int32_t>(static_cast<uint32_t>(place >> 32));
    out.shape.grouped = (s.flags.load(std::memory_order_relaxed) & kGrouped) != 0;
    out.error = static_cast<loomResult_t>(s.error.load(std::memory_order_relaxed));
    const uint64_t issued = s.issued.load(std::memory_order_relaxed);
    const uint64_t started = s.started.load(std::memory_order_relaxed);
    const uint64_t ended = s.ended.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.word.load(std::memory_order_relaxed) != before) continue;
    out.issuedNs = anchor.steady(issued);
    // Times a later step wrote before it moved the state on belong to that step.
    out.startedNs = state != CallState::kIssued ? anchor.steady(started) : 0;
    const bool ends = state == CallState::kCompleted || state == CallState::kFailed;
    out.endedNs = ends ? anchor.steady(ended) : 0;
    if (!ends) out.error = loomSuccess;
    if (state == CallState::kCompleted) out.error = loomSuccess;
    return true;
  }
  return false;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  return snapshot(Anchor::now(&created_));
}

std::vector<FlightEntry> FlightRecorder::snapshot(const Anchor& anchor) const {
  std::vector<FlightEntry> entries;
  entries.reserve(capacity_);
  for (size_t i = 0; i < capacity_; ++i) {
    FlightEntry e;
    if (read(slots_[i], anchor, e)) entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(),
            [](const FlightEntry& a, const FlightEntry& b) { return a.seq < b.seq; });
  return entries;
}

std::string FlightRecorder::text(std::string_view reason) const {
  const Anchor anchor = Anchor::now(&created_);
  return formatText(reason, snapshot(anchor), anchor);
}

std::string FlightRecorder::json(std::string_view reason) const {
  const Anchor anchor = Anchor::now(&created_);
  return formatJson(reason, snapshot(anchor), anchor);
}

std::string FlightRecorder::formatText(std::string_view reason,
                                       const std::vector<FlightEntry>& entries,
                                       const Anchor& anchor) const {
  std::string out = strCat("loom flight record of comm '", config_.comm, "' (id ", commIdText(),
                           ") rank ", config_.rank, "/", config_.nranks, " (", hostName(), ":",
                           getpid(), "): ", reason, "\n");
  out += strCat("loom flight record: ", formatWall(anchor.wallNs, true), " UTC, ", entries.size(),
                " call(s) kept of the last ", capacity_, " (LOOM_TRACE_BUFFER), oldest first\n");
  char line[256];
  std::snprintf(line, sizeof(line), "  %8s  %-13s %12s  %-9s %-10s %5s %5s  %-9s %-20s %-15s %s\n",
                "seq", "call", "count", "type", "op", "root", "peer", "state", "error",
                "issued (UTC)", "queued / ran");
  out += line;
  for (const FlightEntry& e : entries) {
    const bool ended = e.state == CallState::kCompleted || e.state == CallState::kFailed;
    std::string times;
    if (e.startedNs != 0) {
      times = formatDuration(e.startedNs - e.issuedNs) + " / " +
              (ended ? formatDuration(e.endedNs - e.startedNs)
                     : formatDuration(anchor.steadyNs - e.startedNs) + " so far");
    } else {
      times = formatDuration(anchor.steadyNs - e.issuedNs) + " so far / -";
    }
    const std::string root = e.shape.root >= 0 ? std::to_string(e.shape.root) : "-";
    const std::string peer = e.shape.peer >= 0 ? std::to_string(e.shape.peer) : "-";
    const std::string kind = std::string(e.shape.kind) + (e.shape.grouped ? "*" : "");
    std::snprintf(line, sizeof(line),
                  "  %8" PRIu64 "  %-13s %12" PRIu64 "  %-9s %-10s %5s %5s  %-9s %-20s %-15s %s\n",
                  e.seq, kind.c_str(), e.shape.count, e.shape.type,
                  e.shape.op != nullptr ? e.shape.op : "-", root.c_str(), peer.c_str(),
                  callStateName(e.state), e.state == CallState::kFailed ? resultName(e.error) : "-",
                  formatWall(anchor.wall(e.issuedNs), false).c_str(), times.c_str());
    out += line;
  }
  if (std::any_of(entries.begin(), entries.end(),
                  [](const FlightEntry& e) { return e.shape.grouped; }))
    out += "  (* issued in a group)\n";
  return out;
}

std::string FlightRecorder::formatJson(std::string_view reason,
                                       const std::vector<FlightEntry>& entries,
                                       const Anchor& anchor) const {
  std::string out = "{\"loom_flight_record\":1,\"comm\":";
  appendJsonString(out, config_.comm);
  out += strCat(",\"comm_id\":\"", commIdText(), "\",\"rank\":", config_.rank,
                ",\"nranks\":", config_.nranks, ",\"host\":");
  appendJsonString(out, hostName());
  out += strCat(",\"pid\":", getpid(), ",\"reason\":");
  appendJsonString(out, reason);
  out += strCat(",\"capacity\":", capacity_, ",\"anchor\":{\"steady_ns\":", anchor.steadyNs,
                ",\"wall_ns\":", anchor.wallNs, "},\"entries\":[");
  for (size_t i = 0; i < entries.size(); ++i) {
    const FlightEntry& e = entries[i];
    const bool ended = e.state == CallState::kCompleted || e.state == CallState::kFailed;
    if (i > 0) out += ',';
    out += strCat("{\"seq\":", e.seq, ",\"kind\":");
    appendJsonName(out, e.shape.kind);
    out += strCat(",\"count\":", e.shape.count, ",\"type\":");
    appendJsonName(out, e.shape.type);
    out += ",\"op\":";
    appendJsonName(out, e.shape.op);
    out += ",\"root\":";
    appendJsonInt(out, e.shape.root, e.shape.root >= 0);
    out += ",\"peer\":";
    appendJsonInt(out, e.shape.peer, e.shape.peer >= 0);
    out += strCat(",\"group\":", e.shape.grouped ? "true" : "false", ",\"state\":\"",
                  callStateName(e.state), "\",\"error\":");
    appendJsonName(out, e.state == CallState::kFailed ? resultName(e.error) : nullptr);
    out += strCat(",\"issued_ns\":", e.issuedNs, ",\"started_ns\":");
    appendJsonInt(out, e.startedNs, e.startedNs != 0);
    out += ",\"ended_ns\":";
    appendJsonInt(out, e.endedNs, ended);
    out += '}';
  }
  out += "]}\n";
  return out;
}

void FlightRecorder::dump(std::string_view reason) const {
  if (capacity_ == 0) return;
  // One write: the dumps of ranks sharing a file or stderr do not interleave.
  const Anchor anchor = Anchor::now(&created_);
  const std::vector<FlightEntry> entries = snapshot(anchor);
  const std::string out = formatText(reason, entries, anchor) + formatJson(reason, entries, anchor);
  int fd = 2;
  if (!config_.debugFile.empty()) {
    const std::string path =
        Logger::expandFilePattern(config_.debugFile, hostName(), static_cast<long>(getpid()));
    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      LOOM_WARN(kLogInit, "cannot open LOOM_DEBUG_FILE '", path,
                "' for the flight record; writing it to stderr");
      fd = 2;
    }
  }
  (void)!::write(fd, out.data(), out.size());
  if (fd != 2) close(fd);
}

bool FlightRecorder::dumpOnce(std::string_view reason) {
  if (capacity_ == 0 || dumped_.exchange(true)) return false;
  dump(reason);
  return true;
}

}  // namespace loom
