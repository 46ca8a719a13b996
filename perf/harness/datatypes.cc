#include "perf/harness/datatypes.h"

#include <array>

namespace loomperf {
namespace {

constexpr double k2p24 = 16777216.0;
constexpr double k2p53 = 9007199254740992.0;

// 8-bit floats: e4m3 has 3 mantissa bits (integers exact to 16), e5m2 has 2 (to 8).
constexpr std::array<TypeInfo, 12> kTypes = {{
    {loomInt8, "int8", 1, 127},
    {loomUint8, "uint8", 1, 255},
    {loomInt32, "int32", 4, 2147483647.0},
    {loomUint32, "uint32", 4, 4294967295.0},
    {loomInt64, "int64", 8, k2p53},
    {loomUint64, "uint64", 8, k2p53},
    {loomFloat16, "half", 2, 2048},
    {loomFloat32, "float", 4, k2p24},
    {loomFloat64, "double", 8, k2p53},
    {loomBfloat16, "bfloat16", 2, 256},
    {loomFloat8e4m3, "f8e4m3", 1, 16},
    {loomFloat8e5m2, "f8e5m2", 1, 8},
}};

constexpr std::array<const char*, kNumOps> kOpNames = {"sum", "prod", "max",
                                                       "min", "avg",  "mulsum"};

}  // namespace

std::span<const TypeInfo> allTypes() { return kTypes; }

const TypeInfo& typeInfo(loomDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];  // unreachable for valid types; float keeps callers safe
}

const TypeInfo* typeByName(std::string_view name) {
  for (const TypeInfo& t : kTypes)
    if (name == t.name) return &t;
  // Aliases nccl-tests accepts too.
  if (name == "char") return &kTypes[0];
  if (name == "int") return &kTypes[2];
  if (name == "float16") return &kTypes[6];
  if (name == "float32") return &kTypes[7];
  if (name == "float64") return &kTypes[8];
  if (name == "bf16") return &kTypes[9];
  return nullptr;
}

const char* opName(Op op) {
  int i = static_cast<int>(op);
  return i >= 0 && i < kNumOps ? kOpNames[i] : "none";
}

bool opByName(std::string_view name, Op* op) {
  for (int i = 0; i < kNumOps; ++i) {
    if (name == kOpNames[i]) {
      *op = static_cast<Op>(i);
      return true;
    }
  }
  return false;
}

}  // namespace loomperf
