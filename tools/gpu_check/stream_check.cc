// The stream, faults and processes phases: a collective between a producer and a consumer
// kernel on the same stream with no host sync, and a call during stream capture refused
// clearly; a missing rank's timeout reaching the communicator and an abort ending a spinning
// kernel; and two processes sharing device 0.
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "tools/gpu_check/coll_cases.h"
#include "tools/gpu_check/gpu_check.h"

extern char** environ;

namespace loom::gpucheck {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string hexOf(const void* data, size_t bytes) {
  std::string out;
  char byte[3];
  for (size_t i = 0; i < bytes; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", static_cast<const unsigned char*>(data)[i]);
    out += byte;
  }
  return out;
}

bool fromHex(const std::string& hex, void* data, size_t bytes) {
  if (hex.size() != 2 * bytes) return false;
  for (size_t i = 0; i < bytes; ++i)
    static_cast<unsigned char*>(data)[i] =
        static_cast<unsigned char>(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
  return true;
}

std::string joinCounts(const std::vector<size_t>& counts) {
  std::string out;
  for (size_t c : counts) {
    if (!out.empty()) out += ',';
    out += std::to_string(c);
  }
  return out;
}

// A call on a stream whose peer never calls: whether its kernel ended (the stream's later
// work ran), what the communicator reports, and how long it took. Ends both communicators.
struct FaultOutcome {
  std::string problem;  // what went wrong before the lone call, or a stream error
  loomResult_t asyncError = loomSuccess;
  std::string message;  // the communicator's last error
  double seconds = 0;
};

FaultOutcome missingPeer(bool abort) {
  cuda::DeviceRuntime& rt = runtime();
  FaultOutcome out;
  loomComm_t gpu[2];
  const int devices[2] = {0, 0};
  if (loomCommInitAll(gpu, 2, devices) != loomSuccess) {
    out.problem = std::string("init failed: ") + loomGetLastError(nullptr);
    return out;
  }
  constexpr size_t kCount = 1 << 18;
  cuda::Stream streams[2];
  float* bufs[2];
  for (int r = 0; r < 2; ++r) {
    rt.setDevice(0);
    streams[r] = rt.streamCreate();
    bufs[r] = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
  }
  // One call by both ranks first, each on its own thread (a first call connects, and a
  // connection waits for the peer's side), so the lone call below waits in a kernel's spin.
  std::string connectProblem[2];
  std::vector<std::thread> connect;
  for (int r = 0; r < 2; ++r)
    connect.emplace_back([&, r] {
      rt.setDevice(0);
      if (loomAllReduce(bufs[r], bufs[r], kCount, loomFloat32, loomSum, gpu[r],
                        static_cast<loomStream_t>(streams[r])) != loomSuccess) {
        connectProblem[r] = std::string("the first call was refused: ") + loomGetLastError(nullptr);
        return;
      }
      try {
        rt.streamSynchronize(streams[r]);
      } catch (const std::exception& e) {
        connectProblem[r] = std::string("the first call failed: ") + e.what();
      }
    });
  for (std::thread& t : connect) t.join();
  out.problem = connectProblem[0].empty() ? connectProblem[1] : connectProblem[0];
  const Clock::time_point start = Clock::now();
  if (out.problem.empty() && loomAllReduce(bufs[0], bufs[0], kCount, loomFloat32, loomSum, gpu[0],
                                           static_cast<loomStream_t>(streams[0])) != loomSuccess)
    out.problem = std::string("the call was refused: ") + loomGetLastError(nullptr);
  if (out.problem.empty()) {
    if (abort) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      loomCommAbort(gpu[0]);
    }
    try {
      rt.streamSynchronize(streams[0]);  // the kernel ended
    } catch (const std::exception& e) {
      out.problem = std::string("the stream failed: ") + e.what();
    }
  }
  out.seconds = secondsSince(start);
  if (!abort) {
    loomCommGetAsyncError(gpu[0], &out.asyncError);
    out.message = loomGetLastError(gpu[0]);
    loomCommAbort(gpu[0]);
  }
  loomCommAbort(gpu[1]);
  for (int r = 0; r < 2; ++r) {
    rt.free(bufs[r]);
    rt.streamDestroy(streams[r]);
  }
  return out;
}

// A call on a stream that is capturing a CUDA graph is refused, naming the capture, and the
// capture then ends cleanly (nothing of loom's was captured). "" when so, else what went wrong.
std::string captureRefused(loomComm_t comm) {
  cuda::DeviceRuntime& rt = runtime();
  rt.setDevice(0);
  cuda::Stream s = rt.streamCreate();
  constexpr size_t kCount = 16;
  auto* data = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
  rt.streamBeginCapture(s);
  const loomResult_t result =
      loomAllReduce(data, data, kCount, loomFloat32, loomSum, comm, static_cast<loomStream_t>(s));
  const std::string message = loomGetLastError(comm);
  std::string problem;
  if (result != loomInvalidUsage || message.find("capturing a graph") == std::string::npos)
    problem =
        "an AllReduce on a capturing stream returned " + std::to_string(result) + ": " + message;
  try {
    rt.streamEndCapture(s);
  } catch (const std::exception& e) {
    problem += std::string(problem.empty() ? "" : "; ") + "ending the capture: " + e.what();
  }
  rt.free(data);
  rt.streamDestroy(s);
  return problem;
}

}  // namespace

int stream(const Options&) {
  cuda::DeviceRuntime& rt = runtime();
  constexpr int kRanks = 2;
  loomComm_t gpu[kRanks];
  const int devices[kRanks] = {0, 0};
  if (loomCommInitAll(gpu, kRanks, devices) != loomSuccess)
    return report("stream", Verdict::kFail, std::string("init: ") + loomGetLastError(nullptr));
  int failures = 0;
  std::string first;
  for (size_t count : {size_t{4097}, size_t{1048579}}) {
    std::vector<std::thread> threads;
    std::vector<std::string> problems(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        rt.setDevice(0);
        cuda::Stream s = rt.streamCreate();
        auto* data = static_cast<float*>(rt.malloc(count * sizeof(float)));
        auto* errors = static_cast<unsigned*>(rt.malloc(sizeof(unsigned)));
        unsigned hostErrors = ~0u;
        rt.memsetAsync(errors, 0, sizeof(unsigned), s);
        // Producer, collective, consumer, read-back: one synchronize at the end.
        launchFill(data, count, static_cast<float>(r + 1), s);
        if (loomAllReduce(data, data, count, loomFloat32, loomSum, gpu[r],
                          static_cast<loomStream_t>(s)) != loomSuccess) {
          problems[r] = std::string("call refused: ") + loomGetLastError(nullptr);
        } else {
          launchVerify(data, count, 3.0f, errors, s);  // 1 + 2
          rt.memcpyAsync(&hostErrors, errors, sizeof(unsigned), s);
          try {
            rt.streamSynchronize(s);
            if (hostErrors != 0)
              problems[r] = std::to_string(hostErrors) + " of " + std::to_string(count) +
                            " elements wrong when the consumer kernel read them";
          } catch (const std::exception& e) {
            problems[r] = std::string("stream: ") + e.what();
          }
        }
        rt.free(data);
        rt.free(errors);
        rt.streamDestroy(s);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) {
      if (problems[r].empty()) continue;
      ++failures;
      std::printf("FAILED count %zu rank %d: %s\n", count, r, problems[r].c_str());
      if (first.empty()) first = problems[r];
    }
    if (failures != 0) break;
  }
  if (failures == 0) {
    first = captureRefused(gpu[0]);
    if (!first.empty()) {
      ++failures;
      std::printf("FAILED stream capture: %s\n", first.c_str());
    }
  }
  for (loomComm_t c : gpu) loomCommDestroy(c);
  return report("stream", failures == 0 ? Verdict::kPass : Verdict::kFail,
                failures == 0 ? "producer kernel -> AllReduce -> consumer kernel, no host sync: "
                                "exact; a call during graph capture refused"
                              : first);
}

int faults(const Options&) {
  setenv("LOOM_TIMEOUT", "2", 1);
  const FaultOutcome timeout = missingPeer(false);
  std::printf("missing peer, LOOM_TIMEOUT=2: %.2f s, async error %d: %s%s\n", timeout.seconds,
              timeout.asyncError, timeout.message.c_str(), timeout.problem.c_str());
  setenv("LOOM_TIMEOUT", "300", 1);
  const FaultOutcome aborted = missingPeer(true);
  std::printf("missing peer, abort after 0.2 s: %.2f s %s\n", aborted.seconds,
              aborted.problem.c_str());
  unsetenv("LOOM_TIMEOUT");
  const bool timeoutOk = timeout.problem.empty() && timeout.asyncError == loomTimeout &&
                         timeout.message.find("data from rank 1") != std::string::npos &&
                         timeout.seconds < 30;
  const bool abortOk = aborted.problem.empty() && aborted.seconds < 30;
  char summary[200];
  std::snprintf(summary, sizeof summary, "timeout %s (%.1f s), abort %s (%.1f s)",
                timeoutOk ? "reported" : "NOT reported", timeout.seconds,
                abortOk ? "ended the kernel" : "did NOT end the kernel", aborted.seconds);
  return report("faults", timeoutOk && abortOk ? Verdict::kPass : Verdict::kFail, summary);
}

int processRank(const std::string& idsHex, int rank, const Options& options) {
  loomUniqueId ids[2];
  if (!fromHex(idsHex, ids, sizeof ids)) return 3;
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.device = 0;
  loomComm_t cpu = nullptr, gpu = nullptr;
  if (loomCommInitRank(&cpu, 2, ids[0], rank) != loomSuccess ||
      loomCommInitRankConfig(&gpu, 2, ids[1], rank, &config) != loomSuccess) {
    std::printf("FAILED init of rank %d: %s\n", rank, loomGetLastError(nullptr));
    return 4;
  }
  const std::vector<CollCase> cases = collCases(options.counts, options.largeCounts, true);
  const int problems = runRankCases(cases, rank, 2, cpu, gpu, "2 processes");
  loomCommDestroy(cpu);
  loomCommDestroy(gpu);
  std::printf("2 processes: %zu cases, %d failed on rank %d\n", cases.size(), problems, rank);
  return problems == 0 ? 0 : 1;
}

int processes(const Options& options) {
  loomUniqueId ids[2];
  if (loomGetUniqueId(&ids[0]) != loomSuccess || loomGetUniqueId(&ids[1]) != loomSuccess)
    return report("processes", Verdict::kFail, loomGetLastError(nullptr));
  const std::string hex = hexOf(ids, sizeof ids);
  const std::string counts = joinCounts(options.counts), large = joinCounts(options.largeCounts);
  pid_t children[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    std::string rank = std::to_string(r);
    std::vector<std::string> args = {options.self, "process-rank", hex, rank, "--counts", counts};
    if (!large.empty()) args.insert(args.end(), {"--large-counts", large});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&children[r], options.self.c_str(), nullptr, nullptr, argv.data(), environ) !=
        0)
      return report("processes", Verdict::kFail, "could not start a rank process");
  }
  int failed = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return report(
      "processes", failed == 0 ? Verdict::kPass : Verdict::kFail,
      failed == 0
          ? "2 processes on device 0: every case bit-identical to CPU communicators"
          : std::to_string(failed) + " of 2 rank processes failed (their FAILED lines say why)");
}

}  // namespace loom::gpucheck
