#include "perf/harness/options.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loomperf {
namespace {

// strtol with the whole text consumed; base 0 accepts 0x.. like nccl-tests.
bool parseInt(const char* text, long* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 0);
  if (end == text || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

double parseSize(const char* text) {
  double size = 0;
  char unit = 0;
  char extra = 0;
  int n = std::sscanf(text, "%lf%c%c", &size, &unit, &extra);
  if (n < 1 || size < 0) return -1;
  if (n == 1) return size;
  if (n == 3) return -1;
  switch (unit) {
    case 'G':
    case 'g':
      return size * 1024 * 1024 * 1024;
    case 'M':
    case 'm':
      return size * 1024 * 1024;
    case 'K':
    case 'k':
      return size * 1024;
    default:
      return -1;
  }
}

std::string usage(const char* program) {
  std::string u = std::string("USAGE: ") + program + R"(
	[-t,--nthreads <num threads>]        ranks are threads of this process (x -g)
	[-g,--ngpus <ranks per thread>]      each thread drives this many ranks (devices) in groups
	[-b,--minbytes <min size in bytes>]  K, M, G suffixes allowed
	[-e,--maxbytes <max size in bytes>]
	[-i,--stepbytes <increment size>]
	[-f,--stepfactor <increment factor>]
	[-n,--iters <iteration count>]
	[-m,--agg_iters <aggregated iteration count>]
	[-w,--warmup_iters <warmup iteration count>]
	[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)]
	[-p,--parallel_init <0/1>]
	[-c,--check <check iteration count>]
	[-o,--op <sum/prod/min/max/avg/mulsum/all>]
	[-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/f8e4m3/f8e5m2/all>]
	[-r,--root <root, -1 for every root>]
	[-z,--blocking <0/1>]
	[-y,--stream_null <0/1>]
	[-T,--timeout <time in seconds>]
	[-G,--cudagraph <num graph launches>] ignored with --device cpu; refused with cuda
	[-C,--report_cputime <0/1>]
	[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>]
	[-R,--local_register <0/1/2>] 1 or 2: send/recv buffers from loomMemAlloc (single copy between processes)
	[-J,--output_file <file>] write the results as JSON (nccl-tests' layout)
	[--device <cpu/cuda>]                 where buffers live (default cpu); cuda: rank r on device r % count
	[--huge_pages <0/1>] 1: the buffers of every library ask for transparent huge pages
	[-h,--help]
LOOM_CUDA_SIM=1 runs --device cuda on simulated devices, a test double on the CPU (its times
say nothing about GPUs).
Launch: -t N runs N ranks as threads; under mpirun one process per rank (MPI builds);
otherwise RANK/WORLD_SIZE (torchrun) or SLURM_PROCID/SLURM_NTASKS with LOOM_COMM_ID=host:port.
)";
  return u;
}

ParseStatus parseOptions(int argc, char** argv, Options* o, std::string* error) {
  static const option kLong[] = {{"nthreads", required_argument, nullptr, 't'},
                                 {"ngpus", required_argument, nullptr, 'g'},
                                 {"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"agg_iters", required_argument, nullptr, 'm'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"run_cycles", required_argument, nullptr, 'N'},
                                 {"parallel_init", required_argument, nullptr, 'p'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"root", required_argument, nullptr, 'r'},
                                 {"blocking", required_argument, nullptr, 'z'},
                                 {"stream_null", required_argument, nullptr, 'y'},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"cudagraph", required_argument, nullptr, 'G'},
                                 {"report_cputime", required_argument, nullptr, 'C'},
                                 {"average", required_argument, nullptr, 'a'},
                                 {"local_register", required_argument, nullptr, 'R'},
                                 {"output_file", required_argument, nullptr, 'J'},
                                 {"device", required_argument, nullptr, 'D'},
                                 {"huge_pages", required_argument, nullptr, 'H'},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  optind = 0;  // full re-initialisation, so tests may parse several command lines
  opterr = 0;
  auto fail = [&](const std::string& msg) {
    *error = msg;
    return ParseStatus::kError;
  };
  int c;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:J:h", kLong,
                          nullptr)) != -1) {
    long v = 0;
    const char* arg = optarg;
    auto intArg = [&](const char* what, long lo) {
      if (!parseInt(arg, &v) || v < lo) {
        *error = std::string("invalid value '") + arg + "' for " + what +
                 " (an integer >= " + std::to_string(lo) + ")";
        return false;
      }
      return true;
    };
    switch (c) {
      case 't':
        if (!intArg("-t (threads)", 1)) return ParseStatus::kError;
        o->nThreads = static_cast<int>(v);
        break;
      case 'g':
        if (!intArg("-g (ranks per thread)", 1)) return ParseStatus::kError;
        o->nGpus = static_cast<int>(v);
        break;
      case 'b':
      case 'e': {
        double s = parseSize(arg);
        if (s < 0)
          return fail(std::string("invalid size specified for '") +
                      (c == 'b' ? "minbytes" : "maxbytes") + "': " + arg +
                      " (a number with an optional K, M or G suffix)");
        (c == 'b' ? o->minBytes : o->maxBytes) = static_cast<size_t>(s);
        break;
      }
      case 'i': {
        double s = parseSize(arg);
        if (s < 0) return fail(std::string("invalid size for -i (stepbytes): ") + arg);
        o->stepBytes = static_cast<size_t>(s);
        break;
      }
      case 'f':
        if (!intArg("-f (stepfactor)", 1)) return ParseStatus::kError;
        o->stepFactor = static_cast<size_t>(v);
        break;
      case 'n':
        if (!intArg("-n (iters)", 1)) return ParseStatus::kError;
        o->iters = static_cast<int>(v);
        break;
      case 'm':
        if (!intArg("-m (agg_iters)", 1)) return ParseStatus::kError;
        o->aggIters = static_cast<int>(v);
        break;
      case 'w':
        if (!intArg("-w (warmup_iters)", 0)) return ParseStatus::kError;
        o->warmupIters = static_cast<int>(v);
        break;
      case 'N':
        if (!intArg("-N (run_cycles)", 0)) return ParseStatus::kError;
        o->runCycles = static_cast<int>(v);
        break;
      case 'p':
        if (!intArg("-p (parallel_init)", 0)) return ParseStatus::kError;
        o->parallelInit = static_cast<int>(v);
        break;
      case 'c':
        if (!intArg("-c (check)", 0)) return ParseStatus::kError;
        o->check = static_cast<int>(v);
        break;
      case 'o': {
        Op op;
        if (std::strcmp(arg, "all") == 0) {
          o->ops.clear();
          for (int i = 0; i < kNumOps; ++i) o->ops.push_back(static_cast<Op>(i));
        } else if (opByName(arg, &op)) {
          o->ops = {op};
        } else {
          return fail(std::string("invalid op '") + arg +
                      "' for -o: use sum, prod, max, min, avg, mulsum or all");
        }
        break;
      }
      case 'd':
        if (std::strcmp(arg, "all") == 0) {
          o->types.clear();
          for (const TypeInfo& t : allTypes()) o->types.push_back(t.type);
        } else if (const TypeInfo* t = typeByName(arg)) {
          o->types = {t->type};
        } else {
          return fail(std::string("invalid datatype '") + arg +
                      "' for -d: use int8, uint8, int32, uint32, int64, uint64, half, float, "
                      "double, bfloat16, f8e4m3, f8e5m2 or all");
        }
        break;
      case 'r':
        if (!intArg("-r (root)", -1)) return ParseStatus::kError;
        o->root = static_cast<int>(v);
        break;
      case 'z':
        if (!intArg("-z (blocking)", 0)) return ParseStatus::kError;
        o->blocking = static_cast<int>(v);
        break;
      case 'y':
        if (!intArg("-y (stream_null)", 0)) return ParseStatus::kError;
        o->streamNull = static_cast<int>(v);
        break;
      case 'T':
        if (!intArg("-T (timeout)", 0)) return ParseStatus::kError;
        o->timeoutSec = static_cast<int>(v);
        break;
      case 'G':
        if (!intArg("-G (cudagraph)", 0)) return ParseStatus::kError;
        o->cudaGraphLaunches = static_cast<int>(v);
        break;
      case 'C':
        if (!intArg("-C (report_cputime)", 0)) return ParseStatus::kError;
        o->reportCputime = static_cast<int>(v);
        break;
      case 'a':
        if (!intArg("-a (average)", 0) || v > 3)
          return fail(std::string("invalid value '") + arg + "' for -a: use 0, 1, 2 or 3");
        o->average = static_cast<int>(v);
        break;
      case 'R':
        // nccl-tests' 1 (local) and 2 (symmetric) registration are one thing on the host:
        // buffers that peer processes map, from loomMemAlloc.
        if (!intArg("-R (local_register)", 0) || v > 2)
          return fail(std::string("invalid value '") + arg + "' for -R: use 0, 1 or 2");
        o->localRegister = static_cast<int>(v);
        break;
      case 'J':
        o->jsonPath = arg;
        break;
      case 'D':
        if (std::strcmp(arg, "cpu") != 0 && std::strcmp(arg, "cuda") != 0)
          return fail(std::string("invalid value '") + arg + "' for --device: use cpu or cuda");
        o->device = arg;
        break;
      case 'H':
        if (!intArg("--huge_pages", 0) || v > 1)
          return fail(std::string("invalid value '") + arg + "' for --huge_pages: use 0 or 1");
        o->hugePages = static_cast<int>(v);
        break;
      case 'h':
        return ParseStatus::kHelp;
      default:
        return fail(std::string("unknown option '") + argv[optind - 1] + "' (see --help)");
    }
  }
  if (optind < argc) return fail(std::string("unexpected argument '") + argv[optind] + "'");
  if (o->minBytes > o->maxBytes)
    return fail("invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(o->minBytes) +
                " > " + std::to_string(o->maxBytes));
  if (o->stepFactor <= 1 && o->stepBytes == 0)
    return fail("-i (stepbytes) must be > 0 when -f (stepfactor) is 1");
  return ParseStatus::kRun;
}

}  // namespace loomperf
