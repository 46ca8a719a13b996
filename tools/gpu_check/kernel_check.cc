// The kernels and bandwidth phases: the CUDA reduceCopy (src/kernels/cuda) against the CPU one,
// bit for bit, for every type x op; and its speed against a plain device-to-device copy. Both
// mean something only on a GPU, so under the simulated runtime they say SKIP.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "tools/gpu_check/coll_cases.h"
#include "tools/gpu_check/gpu_check.h"

#if LOOM_HAVE_CUDA
#include "src/kernels/cuda/reduce_copy_cuda.h"
#endif

namespace loom::gpucheck {
namespace {

// Bit patterns that float kernels get wrong first: signed zeros, the smallest and largest
// subnormals, infinities, NaNs of both signs, the largest finite value, one; each format
// lists its own bits.
std::vector<uint64_t> specials(size_t size, loomDataType_t t) {
  switch (size) {
    case 8:
      return {0x0,
              0x8000000000000000,
              0x1,
              0x000fffffffffffff,
              0x7ff0000000000000,
              0xfff0000000000000,
              0x7ff8000000000000,
              0xfff8000000000001,
              0x7fefffffffffffff,
              0x3ff0000000000000};
    case 4:
      return {0x0,        0x80000000, 0x1,        0x007fffff, 0x7f800000,
              0xff800000, 0x7fc00000, 0xffc00001, 0x7f7fffff, 0x3f800000};
    case 2:
      if (t == loomBfloat16)
        return {0x0, 0x8000, 0x1, 0x007f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f7f, 0x3f80};
      return {0x0, 0x8000, 0x1, 0x03ff, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7bff, 0x3c00};
    default:  // fp8: e4m3 has no infinity (0x7f is NaN); e5m2 is float16's top byte
      if (t == loomFloat8e4m3) return {0x00, 0x80, 0x01, 0x07, 0x7f, 0xff, 0x7e, 0x38};
      return {0x00, 0x80, 0x01, 0x03, 0x7c, 0xfc, 0x7e, 0xff, 0x7b, 0x3c};
  }
}

// A source of `count` elements: random bits, and for floats one element in four from the
// special patterns, so NaN, -0, subnormals and infinities meet every op.
std::vector<unsigned char> sourceData(loomDataType_t t, size_t count, unsigned seed) {
  const size_t size = dataTypeSize(t);
  std::vector<unsigned char> out(count * size);
  std::mt19937_64 gen(seed);
  const std::vector<uint64_t> special = specials(size, t);
  for (size_t i = 0; i < count; ++i) {
    uint64_t bits = gen();
    if (isFloatingDataType(t) && gen() % 4 == 0) bits = special[gen() % special.size()];
    std::memcpy(out.data() + i * size, &bits, size);  // little-endian: the low bytes
  }
  return out;
}

#if LOOM_HAVE_CUDA
// One case: the CPU's and the GPU's results for the same sources, compared bit for bit.
// Returns "" or what differed.
std::string compareOne(loomDataType_t t, ReduceOpKind op, int nsrc, int ndst, size_t count,
                       unsigned seed) {
  cuda::DeviceRuntime& rt = runtime();
  const size_t bytes = count * dataTypeSize(t);
  ReduceCopyArgs host, dev;
  host.nsrc = dev.nsrc = nsrc;
  host.ndst = dev.ndst = ndst;
  host.count = dev.count = count;
  if (op == ReduceOpKind::kPreMulSum) host.scalar = ReduceScalar{0.75, 3};
  if (op == ReduceOpKind::kSumPostDiv) host.scalar = ReduceScalar{3.0, 3};
  dev.scalar = host.scalar;
  host.preOpOnSource = dev.preOpOnSource = 0b101;  // sources 0 and 2, as a step mixes them
  host.postOp = dev.postOp = true;
  std::vector<std::vector<unsigned char>> srcs, cpuOut(ndst, std::vector<unsigned char>(bytes));
  std::vector<void*> devPtrs;
  for (int s = 0; s < nsrc; ++s) {
    srcs.push_back(sourceData(t, count, seed * 16 + s));
    host.src[s] = srcs.back().data();
    void* d = rt.malloc(bytes);
    rt.memcpy(d, srcs.back().data(), bytes);
    dev.src[s] = d;
    devPtrs.push_back(d);
  }
  for (int d = 0; d < ndst; ++d) {
    host.dst[d] = cpuOut[d].data();
    void* p = rt.malloc(bytes);
    rt.memsetAsync(p, 0xa5, bytes, nullptr);
    dev.dst[d] = p;
    devPtrs.push_back(p);
  }
  reduceCopy(t, op, host);
  reduceCopyCuda(t, op, dev, nullptr);
  rt.synchronizeDevice();
  std::string problem;
  std::vector<unsigned char> gpuOut(bytes);
  for (int d = 0; d < ndst && problem.empty(); ++d) {
    rt.memcpy(gpuOut.data(), dev.dst[d], bytes);
    const size_t size = dataTypeSize(t);
    for (size_t i = 0; i < count; ++i) {
      if (std::memcmp(gpuOut.data() + i * size, cpuOut[d].data() + i * size, size) == 0) continue;
      uint64_t g = 0, c = 0;
      std::memcpy(&g, gpuOut.data() + i * size, size);
      std::memcpy(&c, cpuOut[d].data() + i * size, size);
      char line[160];
      std::snprintf(line, sizeof line, "dst %d element %zu: gpu 0x%llx cpu 0x%llx", d, i,
                    static_cast<unsigned long long>(g), static_cast<unsigned long long>(c));
      problem = line;
      break;
    }
  }
  for (void* p : devPtrs) rt.free(p);
  return problem;
}
#endif

}  // namespace

int kernels(const Options&) {
  if (simulated()) return report("kernels", Verdict::kSkip, "needs a GPU (simulated runtime)");
#if !LOOM_HAVE_CUDA
  return report("kernels", Verdict::kSkip, "built without CUDA");
#else
  runtime().setDevice(0);
  int cases = 0, failures = 0;
  for (loomDataType_t t : kAllDataTypes) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto op = static_cast<ReduceOpKind>(o);
      for (size_t count : {size_t{1}, size_t{7}, size_t{4097}, size_t{1048579}}) {
        for (auto [nsrc, ndst] :
             {std::pair{1, 1}, std::pair{2, 1}, std::pair{3, 2}, std::pair{8, 8}}) {
          if (count > 4097 && nsrc != 2) continue;  // the large count once, as a step runs it
          ++cases;
          const std::string problem = compareOne(t, op, nsrc, ndst, count, cases);
          if (!problem.empty()) {
            ++failures;
            std::printf("MISMATCH %s %s nsrc %d ndst %d count %zu: %s\n", dataTypeName(t),
                        reduceOpKindName(op), nsrc, ndst, count, problem.c_str());
          }
        }
      }
    }
  }
  std::printf("%d cases (%zu types x %d ops x sources/destinations/counts), %d mismatched\n", cases,
              kAllDataTypes.size(), kNumReduceOps, failures);
  return report("kernels", failures == 0 ? Verdict::kPass : Verdict::kFail,
                std::to_string(cases) + " type x op cases bit-identical to the CPU" +
                    (failures ? ", " + std::to_string(failures) + " NOT" : std::string()));
#endif
}

int bandwidth(const Options& options) {
  if (simulated()) return report("bandwidth", Verdict::kSkip, "needs a GPU (simulated runtime)");
#if !LOOM_HAVE_CUDA
  return report("bandwidth", Verdict::kSkip, "built without CUDA");
#else
  cuda::DeviceRuntime& rt = runtime();
  rt.setDevice(0);
  cuda::Stream s = rt.streamCreate();
  cuda::Event start = rt.eventCreate(true), end = rt.eventCreate(true);
  // Median of `iters` timings of `launch`, in milliseconds, after two warm-ups.
  auto timeMs = [&](auto launch) {
    for (int w = 0; w < 2; ++w) launch();
    std::vector<float> ms;
    for (int i = 0; i < options.iters; ++i) {
      rt.eventRecord(start, s);
      launch();
      rt.eventRecord(end, s);
      rt.eventSynchronize(end);
      ms.push_back(rt.eventElapsedMs(start, end));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  double worst = 1e9;
  std::printf("%10s %10s %14s %14s %8s\n", "MiB", "type", "copy GB/s", "reduce GB/s", "ratio");
  for (size_t mib : options.bandwidthMiB) {
    const size_t bytes = mib << 20;
    void* a = rt.malloc(bytes);
    void* b = rt.malloc(bytes);
    void* c = rt.malloc(bytes);
    rt.memsetAsync(a, 0x3c, bytes, s);
    rt.memsetAsync(b, 0x3c, bytes, s);
    // A copy reads and writes `bytes`; the fused 2 -> 1 reduce reads 2x and writes 1x.
    const float copyMs = timeMs([&] { rt.memcpyAsync(c, a, bytes, s); });
    const double copyGBs = 2.0 * bytes / (copyMs * 1e6);
    for (loomDataType_t t : {loomFloat32, loomBfloat16}) {
      ReduceCopyArgs args;
      args.nsrc = 2;
      args.ndst = 1;
      args.src[0] = a;
      args.src[1] = b;
      args.dst[0] = c;
      args.count = bytes / dataTypeSize(t);
      const float reduceMs = timeMs(
          [&] { reduceCopyCuda(t, ReduceOpKind::kSum, args, static_cast<cudaStream_t>(s)); });
      const double reduceGBs = 3.0 * bytes / (reduceMs * 1e6);
      worst = std::min(worst, reduceGBs / copyGBs);
      std::printf("%10zu %10s %14.1f %14.1f %8.3f\n", mib, dataTypeName(t), copyGBs, reduceGBs,
                  reduceGBs / copyGBs);
    }
    rt.free(a);
    rt.free(b);
    rt.free(c);
  }
  rt.eventDestroy(start);
  rt.eventDestroy(end);
  rt.streamDestroy(s);
  char summary[160];
  std::snprintf(summary, sizeof summary,
                "fused 2->1 reduce at %.0f%% of a device copy's bytes/s at worst (target 90%%)",
                worst * 100);
  return report("bandwidth", worst >= 0.9 ? Verdict::kPass : Verdict::kFail, summary);
#endif
}

}  // namespace loom::gpucheck
