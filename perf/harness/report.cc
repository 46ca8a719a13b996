#include "perf/harness/report.h"

#include <cerrno>
#include <cstdarg>
#include <ctime>

#include "loom/loom.h"

namespace loomperf {
namespace {

std::string nowString() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string versionString() {
  int v = 0;
  loomGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

struct RankInfo {
  int rank = 0, group = 0, pid = 0, device = 0;
  char host[1025] = {}, hex[129] = {}, info[1025] = {};
};

// The JSON "devices" entries come from the printed lines, as nccl-tests parses them, so both
// outputs always agree.
RankInfo parseRankLine(const std::string& line) {
  RankInfo r;
  std::sscanf(line.c_str(), "#  Rank %d Group %d Pid %d on %1024s device %d [%128[^]]] %1024[^\n]",
              &r.rank, &r.group, &r.pid, r.host, &r.device, r.hex, r.info);
  return r;
}

}  // namespace

std::string floatStr(double value, int width) {
  int power = 0;
  for (uint64_t v = 1; value >= static_cast<double>(v) && power < 20; v *= 10) power++;
  char buf[64];
  if (power < width - 2)
    std::snprintf(buf, sizeof buf, "%*.2f", width, value);
  else if (power < width - 1)
    std::snprintf(buf, sizeof buf, "%*.1f", width, value);
  else if (power < width + 1)
    std::snprintf(buf, sizeof buf, "%*.0f", width, value);
  else
    std::snprintf(buf, sizeof buf, "%*.1e", width, value);
  return buf;
}

std::string rankLine(int rank, int group, int pid, const std::string& host, int device,
                     const std::string& deviceHex, const std::string& info) {
  char buf[2048];
  std::snprintf(buf, sizeof buf, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", rank,
                group, pid, host.c_str(), device, deviceHex.c_str(), info.c_str());
  return buf;
}

Reporter::~Reporter() {
  if (json_ != nullptr) std::fclose(json_);
}

void Reporter::print(const char* fmt, ...) {
  if (!isMain_) return;
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
}

void Reporter::flushJson() {
  if (json_ == nullptr) return;
  std::string s = writer_.drain();
  std::fwrite(s.data(), 1, s.size(), json_);
  std::fflush(json_);
}

// "NAME=value" if NAME is one of the variables that shape a benchmark run (loom's, NCCL's,
// the launchers', CUDA's), with the value redacted for anything secret; "" otherwise.
std::string runEnvironmentEntry(const std::string& entry) {
  const std::string name = entry.substr(0, entry.find('='));
  static const char* const kPrefixes[] = {"LOOM_",      "NCCL_",      "OMPI_",          "PMIX_",
                                          "SLURM_",     "CUDA_",      "MASTER_",        "RANK",
                                          "LOCAL_RANK", "WORLD_SIZE", "OMP_NUM_THREADS"};
  bool kept = false;
  for (const char* prefix : kPrefixes) kept |= name.rfind(prefix, 0) == 0;
  if (!kept) return "";
  for (const char* secret : {"SECRET", "TOKEN", "PASSWORD", "KEY"}) {
    if (name.find(secret) != std::string::npos) return name + "=<redacted>";
  }
  return entry;
}

void Reporter::openJson(const std::string& path, int argc, char** argv, char** envp) {
  if (!isMain_ || path.empty()) return;
  std::string tryPath = path;
  for (int i = 0; (json_ = std::fopen(tryPath.c_str(), "wx")) == nullptr; ++i) {
    if (errno != EEXIST) {
      print("# skipping json output; %s not accessible\n", tryPath.c_str());
      return;
    }
    tryPath = path + "." + std::to_string(i);
  }
  print("# Writing JSON output to %s\n", tryPath.c_str());
  writer_.beginObject();
  writer_.key("version");
  writer_.integer(1);
  writer_.key("start_time");
  writer_.str(nowString());
  writer_.key("args");
  writer_.beginList();
  for (int i = 0; i < argc; ++i) writer_.str(argv[i]);
  writer_.endList();
  // The environment that shapes a run, not all of it: a results file gets shared, and a
  // shell's environment holds tokens and keys. Secrets among what is kept are redacted.
  writer_.key("env");
  writer_.beginList();
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (const std::string kept = runEnvironmentEntry(*e); !kept.empty()) writer_.str(kept);
  }
  writer_.endList();
  int v = 0;
  loomGetVersion(&v);
  // nccl-tests' key, holding loom's version code; loom_version says which library it is.
  writer_.key("nccl_version");
  writer_.integer(v);
  writer_.key("loom_version");
  writer_.str(versionString());
  flushJson();
}

void Reporter::preamble(const std::string& program, const Options& o,
                        const std::vector<std::string>& rankLines, const std::string& note) {
  int v = 0;
  loomGetVersion(&v);
  print("# loom perf %s (nccl-tests 2.19 compatible) loom-headers=%d loom-library=%d\n",
        versionString().c_str(), LOOM_VERSION_CODE, v);
  print("# Collective test starting: %s\n", program.c_str());
  print(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d\n",
      o.nThreads, o.nGpus, o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : o.stepBytes,
      o.stepFactor > 1 ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check, 0);
  if (o.blocking)
    print("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.localRegister)
    print("# Registered buffers: send/recv from loomMemAlloc (-R %d)\n", o.localRegister);
  if (o.hugePages) print("# Huge pages: malloc'd buffers advised MADV_HUGEPAGE (--huge_pages 1)\n");
  if (!note.empty()) print("# %s\n", note.c_str());
  print("#\n");
  if (json_ != nullptr) {
    writer_.key("config");
    writer_.beginObject();
    writer_.key("nthreads");
    writer_.integer(o.nThreads);
    writer_.key("ngpus");
    writer_.integer(o.nGpus);
    writer_.key("minimum_bytes");
    writer_.size(o.minBytes);
    writer_.key("maximum_bytes");
    writer_.size(o.maxBytes);
    if (o.stepFactor > 1) {
      writer_.key("step_factor");
      writer_.integer(static_cast<long long>(o.stepFactor));
    } else {
      writer_.key("step_bytes");
      writer_.size(o.stepBytes);
    }
    writer_.key("warmup_iters");
    writer_.integer(o.warmupIters);
    writer_.key("iterations");
    writer_.integer(o.iters);
    writer_.key("aggregated_iterations");
    writer_.integer(o.aggIters);
    writer_.key("validation");
    writer_.integer(o.check);
    writer_.key("graph");
    writer_.integer(0);
    writer_.key("blocking_collectives");
    writer_.boolString(o.blocking != 0);
    writer_.key("parallel_init");
    writer_.boolString(o.parallelInit != 0);
    writer_.key("device_kind");
    writer_.str(o.device);
    if (!note.empty()) {
      writer_.key("note");
      writer_.str(note);
    }
  }
  print("# Using devices\n");
  if (json_ != nullptr) {
    writer_.key("devices");
    writer_.beginList();
  }
  for (const std::string& line : rankLines) {
    print("%s", line.c_str());
    if (json_ == nullptr) continue;
    RankInfo r = parseRankLine(line);
    writer_.beginObject();
    writer_.key("rank");
    writer_.integer(r.rank);
    writer_.key("group");
    writer_.integer(r.group);
    writer_.key("pid");
    writer_.integer(r.pid);
    writer_.key("hostname");
    writer_.str(r.host);
    writer_.key("device");
    writer_.integer(r.device);
    writer_.key("device_hex");
    writer_.str(r.hex);
    writer_.key("device_info");
    writer_.str(r.info);
    writer_.endObject();
  }
  if (json_ != nullptr) {
    writer_.endList();
    writer_.endObject();
  }
  flushJson();
  if (isMain_) std::fflush(stdout);
}

void Reporter::tableHeader(bool cputime) {
  const char* t = cputime ? "cputime" : "time";
  print("#\n");
  print(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count",
        "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong");
  print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
        "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (json_ != nullptr) {
    writer_.key("results");
    writer_.beginList();
    resultsOpen_ = true;
  }
  if (isMain_) std::fflush(stdout);
}

void Reporter::rowStart(size_t bytes, size_t count, const char* type, const char* op, int root) {
  char rootName[32];
  std::snprintf(rootName, sizeof rootName, "%6i", root);
  print("%12zu  %12zu  %8s  %6s  %6s", bytes, count, type, op, rootName);
  if (json_ != nullptr) {
    rowDepth_ = writer_.depth();
    writer_.beginObject();
    writer_.key("size");
    writer_.size(bytes);
    writer_.key("count");
    writer_.size(count);
    writer_.key("type");
    writer_.str(type);
    writer_.key("redop");
    writer_.str(op);
    writer_.key("root");
    writer_.str(rootName);
    rowOpen_ = true;
  }
}

void Reporter::rowBody(double timeUs, double algBw, double busBw, bool reportErrors, int64_t wrong,
                       bool cputime, bool outOfPlace) {
  std::string t = floatStr(timeUs, 7), a = floatStr(algBw, 6), b = floatStr(busBw, 6);
  if (reportErrors)
    print("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(), static_cast<double>(wrong));
  else
    print("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  if (json_ != nullptr) {
    writer_.key(outOfPlace ? "out_of_place" : "in_place");
    writer_.beginObject();
    writer_.key(cputime ? "cpu_time" : "time");
    writer_.number(timeUs);
    writer_.key("alg_bw");
    writer_.number(algBw);
    writer_.key("bus_bw");
    writer_.number(busBw);
    writer_.key("nwrong");
    if (reportErrors)
      writer_.number(static_cast<double>(wrong));
    else
      writer_.null();
    writer_.endObject();
  }
}

void Reporter::rowEnd(int iters, const std::string& name) {
  print("\n");
  if (isMain_) std::fflush(stdout);  // long sweeps show each row as soon as it is measured
  if (json_ != nullptr) {
    writer_.key("actual_iterations");
    writer_.integer(iters);
    writer_.key("experiment_name");
    writer_.str(name);
    writer_.endObject();
    rowOpen_ = false;
    flushJson();
  }
}

void Reporter::footer(int64_t errors, double avgBusBw, const std::string& program) {
  if (json_ != nullptr && resultsOpen_) writer_.endList();
  resultsOpen_ = false;
  print("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(errors),
        errors ? "FAILED" : "OK");
  print("# %-20s : %g %s\n", "Avg bus bandwidth", avgBusBw, "");
  print("#\n");
  print("# Collective test concluded: %s\n", program.c_str());
  if (json_ != nullptr) {
    writer_.key("out_of_bounds");
    writer_.beginObject();
    writer_.key("count");
    writer_.integer(errors);
    writer_.key("okay");
    writer_.boolString(errors == 0);
    writer_.endObject();
    writer_.key("average_bus_bandwidth");
    writer_.beginObject();
    writer_.key("bandwidth");
    writer_.number(avgBusBw);
    writer_.key("okay");
    writer_.str("unchecked");
    writer_.endObject();
  }
  if (isMain_) std::fflush(stdout);
}

void Reporter::line(const std::string& text) {
  print("%s", text.c_str());
  if (isMain_) std::fflush(stdout);
}

void Reporter::finish(const std::string& lastError) {
  if (!lastError.empty()) print("# error: %s\n", lastError.c_str());
  print("#\n");
  if (isMain_) std::fflush(stdout);
  if (json_ == nullptr) return;
  // A run that failed mid-table still leaves a well-formed document.
  if (rowOpen_) writer_.closeTo(rowDepth_);
  if (resultsOpen_) writer_.endList();
  writer_.key("errors");
  writer_.beginList();
  if (!lastError.empty()) writer_.str(lastError);
  writer_.endList();
  writer_.key("end_time");
  writer_.str(nowString());
  writer_.closeAll();
  flushJson();
  std::fclose(json_);
  json_ = nullptr;
}

}  // namespace loomperf
