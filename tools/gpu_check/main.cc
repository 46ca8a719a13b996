// loom_gpu_check PHASE [options]: one phase of tools/gpu_check.sh (gpu_check.h says what each
// prints). Exit status: 0 pass or skip, 1 fail, 2 bad usage.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "tools/gpu_check/gpu_check.h"

extern char** environ;

namespace loom::gpucheck {

cuda::DeviceRuntime& runtime() { return cuda::deviceRuntime(); }
bool simulated() { return std::strcmp(runtime().name(), "sim") == 0; }

int report(const char* phase, Verdict verdict, const std::string& summary) {
  const char* word = verdict == Verdict::kPass   ? "PASS"
                     : verdict == Verdict::kFail ? "FAIL"
                                                 : "SKIP";
  std::printf("RESULT %s %s %s\n", phase, word, summary.c_str());
  std::fflush(stdout);
  return verdict == Verdict::kFail ? 1 : 0;
}

namespace {

constexpr size_t kIpcBytes = 1 << 20;

unsigned char ipcByte(size_t i, int generation) {
  return static_cast<unsigned char>(i * 7 + 13 * generation);
}

std::string toHex(const cuda::IpcMemHandle& handle) {
  std::string out;
  char byte[3];
  for (char c : handle.bytes) {
    std::snprintf(byte, sizeof byte, "%02x", static_cast<unsigned char>(c));
    out += byte;
  }
  return out;
}

bool fromHex(const std::string& hex, cuda::IpcMemHandle* handle) {
  if (hex.size() != handle->bytes.size() * 2) return false;
  for (size_t i = 0; i < handle->bytes.size(); ++i)
    handle->bytes[i] = static_cast<char>(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
  return true;
}

// Device memory written here, opened and rewritten by a second process through an IPC handle,
// read back here.
std::string ipcAcrossProcesses(const Options& options) {
  cuda::DeviceRuntime& rt = runtime();
  void* dev = rt.malloc(kIpcBytes);
  std::vector<unsigned char> host(kIpcBytes);
  for (size_t i = 0; i < kIpcBytes; ++i) host[i] = ipcByte(i, 0);
  rt.memcpy(dev, host.data(), kIpcBytes);
  const std::string hex = toHex(rt.ipcGetMemHandle(dev));
  std::vector<char*> argv = {const_cast<char*>(options.self.c_str()),
                             const_cast<char*>("ipc-child"), const_cast<char*>(hex.c_str()),
                             nullptr};
  pid_t child = 0;
  if (posix_spawn(&child, options.self.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    rt.free(dev);
    return "could not start the second process";
  }
  int status = 0;
  waitpid(child, &status, 0);
  rt.memcpy(host.data(), dev, kIpcBytes);
  rt.free(dev);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "the second process failed (status " + std::to_string(status) + ")";
  for (size_t i = 0; i < kIpcBytes; ++i)
    if (host[i] != ipcByte(i, 1)) return "byte " + std::to_string(i) + " not rewritten";
  return "";
}

}  // namespace

int ipcChild(const std::string& handleHex) {
  try {
    cuda::IpcMemHandle handle;
    if (!fromHex(handleHex, &handle)) return 3;
    cuda::DeviceRuntime& rt = runtime();
    void* dev = rt.ipcOpenMemHandle(handle);
    std::vector<unsigned char> host(kIpcBytes);
    rt.memcpy(host.data(), dev, kIpcBytes);
    for (size_t i = 0; i < kIpcBytes; ++i)
      if (host[i] != ipcByte(i, 0)) return 4;
    for (size_t i = 0; i < kIpcBytes; ++i) host[i] = ipcByte(i, 1);
    rt.memcpy(dev, host.data(), kIpcBytes);
    rt.ipcCloseMemHandle(dev);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ipc-child: %s\n", e.what());
    return 5;
  }
}

int probe(const Options& options) {
  cuda::DeviceRuntime& rt = runtime();
  const int count = rt.deviceCount();
  std::printf("runtime: %s%s\n", rt.name(),
              simulated() ? " (simulated devices, a test double: no figure is a GPU's)" : "");
  std::printf("devices: %d\n", count);
  if (count == 0) return report("probe", Verdict::kFail, "no CUDA device or driver found");
  for (int d = 0; d < count; ++d) {
    const cuda::DeviceIdentity id = rt.identity(d);
    std::printf("device %d: %s bus %s, %d SMs, caps:%s%s%s%s\n", d,
                cuda::uuidString(id.uuid).c_str(), id.busId, id.smCount,
                id.caps & cuda::kCapIpcLegacy ? " ipc" : "",
                id.caps & cuda::kCapIpcPosixFd ? " ipc-posix-fd" : "",
                id.caps & cuda::kCapHostRegister ? " host-register" : "",
                id.caps & cuda::kCapMps ? " mps" : "");
  }
  rt.setDevice(0);
  // cudaHostRegister of page-aligned malloc'd memory: the pointer then reads as pinned.
  std::string registerResult = "yes";
  void* page = nullptr;
  if (posix_memalign(&page, 4096, 1 << 20) != 0)
    return report("probe", Verdict::kFail, "no memory");
  try {
    rt.hostRegister(page, 1 << 20, 0);
    const cuda::PointerKind kind = rt.pointerInfo(page).kind;
    if (kind != cuda::PointerKind::kHostPinned)
      registerResult = std::string("no (reads as ") + cuda::pointerKindName(kind) + ")";
    rt.hostUnregister(page);
  } catch (const std::exception& e) {
    registerResult = std::string("no (") + e.what() + ")";
  }
  std::free(page);
  std::printf("host register: %s\n", registerResult.c_str());
  std::string ipcResult;
  try {
    ipcResult = ipcAcrossProcesses(options);
  } catch (const std::exception& e) {
    ipcResult = e.what();
  }
  std::printf("IPC across processes: %s\n",
              ipcResult.empty() ? "yes" : ("no: " + ipcResult).c_str());
  const cuda::DeviceIdentity first = rt.identity(0);
  return report("probe", Verdict::kPass,
                std::to_string(count) + " device(s), " + std::to_string(first.smCount) +
                    " SMs, IPC " + (ipcResult.empty() ? "yes" : "no") + ", host register " +
                    (registerResult == "yes" ? "yes" : "no"));
}

}  // namespace loom::gpucheck

namespace {

using loom::gpucheck::Options;

template <typename T>
bool parseList(const char* text, std::vector<T>* out) {
  out->clear();
  std::string s(text);
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    const std::string item = s.substr(start, comma - start);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') return false;
    out->push_back(static_cast<T>(v));
    start = comma + 1;
  }
  return true;
}

int usage() {
  std::fprintf(stderr,
               "usage: loom_gpu_check PHASE [options]\n"
               "  PHASE: probe kernels bandwidth collectives processes stream faults\n"
               "  --ranks 2,3,4,8        collectives: ranks sharing device 0 as threads\n"
               "  --counts 0,1,7,4097    collectives: counts of the type x op matrix\n"
               "  --large-counts N,...   collectives: float32 and bfloat16 counts\n"
               "  --mib 256,1024         bandwidth: buffer sizes in MiB\n"
               "  --iters N              bandwidth: timed launches per size\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loom::gpucheck;
  if (argc < 2) return usage();
  const std::string phase = argv[1];
  if (phase == "ipc-child") return argc == 3 ? ipcChild(argv[2]) : usage();
  Options options;
  options.self = argv[0];
  std::vector<std::string> positional;
  int i = 2;
  for (; i < argc && std::strncmp(argv[i], "--", 2) != 0; ++i) positional.push_back(argv[i]);
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = value != nullptr;
    if (arg == "--ranks" && ok)
      ok = parseList(value, &options.ranks);
    else if (arg == "--counts" && ok)
      ok = parseList(value, &options.counts);
    else if (arg == "--large-counts" && ok)
      ok = parseList(value, &options.largeCounts);
    else if (arg == "--mib" && ok)
      ok = parseList(value, &options.bandwidthMiB);
    else if (arg == "--iters" && ok)
      options.iters = std::atoi(value);
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "loom_gpu_check: bad option %s\n", arg.c_str());
      return usage();
    }
    ++i;
  }
  try {
    registerKernelTwins();
    if (phase == "probe") return probe(options);
    if (phase == "kernels") return kernels(options);
    if (phase == "bandwidth") return bandwidth(options);
    if (phase == "collectives") return collectives(options);
    if (phase == "processes") return processes(options);
    if (phase == "stream") return stream(options);
    if (phase == "faults") return faults(options);
    if (phase == "process-rank" && positional.size() == 2)
      return processRank(positional[0], std::atoi(positional[1].c_str()), options);
  } catch (const std::exception& e) {
    return report(phase.c_str(), Verdict::kFail, std::string("error: ") + e.what());
  }
  return usage();
}
