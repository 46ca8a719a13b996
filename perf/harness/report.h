// Everything the benchmarks print: nccl-tests' preamble, table and footer on stdout (rank 0's
// main thread only, each row flushed as soon as it is measured), and the same content in
// nccl-tests' JSON layout (-J, file version 1).
#ifndef LOOM_PERF_HARNESS_REPORT_H_
#define LOOM_PERF_HARNESS_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "perf/harness/json_writer.h"
#include "perf/harness/options.h"

namespace loomperf {

// nccl-tests' number format: `width` characters, two decimals while they fit, then fewer,
// then exponent notation.
std::string floatStr(double value, int width);

// What the -J file's "env" list keeps of one "NAME=value" environment entry: only variables
// that shape a run (LOOM_*, NCCL_*, launchers', CUDA_*), secrets redacted; "" drops it.
std::string runEnvironmentEntry(const std::string& entry);

// "#  Rank  0 Group  0 Pid   1234 on   hostname device -1 [cpu] <info>" as nccl-tests prints it.
std::string rankLine(int rank, int group, int pid, const std::string& host, int device,
                     const std::string& deviceHex, const std::string& info);

class Reporter {
 public:
  explicit Reporter(bool isMain) : isMain_(isMain) {}
  ~Reporter();

  // Opens the JSON report; an existing file is kept and ".0", ".1"... tried instead (as
  // nccl-tests does). Writes argv, the environment and the loom version.
  void openJson(const std::string& path, int argc, char** argv, char** envp);

  // `note`, when not empty, is printed as one more "# " line before the devices.
  void preamble(const std::string& program, const Options& o,
                const std::vector<std::string>& rankLines, const std::string& note = "");
  void tableHeader(bool cputime);
  void rowStart(size_t bytes, size_t count, const char* type, const char* op, int root);
  void rowBody(double timeUs, double algBw, double busBw, bool reportErrors, int64_t wrong,
               bool cputime, bool outOfPlace);
  void rowEnd(int iters, const std::string& name);
  void footer(int64_t errors, double avgBusBw, const std::string& program);
  // Free-form text for tables of other shapes (p2p_vs_coll); flushed at once.
  void line(const std::string& text);
  // Closes the JSON document with the last error (empty: none).
  void finish(const std::string& lastError);

 private:
  void print(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void flushJson();

  bool isMain_;
  bool resultsOpen_ = false, rowOpen_ = false;
  size_t rowDepth_ = 0;
  std::FILE* json_ = nullptr;
  JsonWriter writer_;
};

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_REPORT_H_
