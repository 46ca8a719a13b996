// Element-type traits generated from datatype_table.def: loomDataType_t <-> C++ type, size
// and name, at compile time (templates) and at run time (switches). C++17-clean.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "loom/loom.h"
#include "src/kernels/numeric_types.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

// DataTypeOf<T>::kType / kName for each element type T.
template <typename T>
struct DataTypeOf;
// TypeOf<loomInt32>::type is int32_t, and so on.
template <loomDataType_t kType>
struct TypeOf;

#define LOOM_DATATYPE(e, Type, name)           \
  template <>                                  \
  struct DataTypeOf<Type> {                    \
    static constexpr loomDataType_t kType = e; \
    static constexpr const char* kName = name; \
  };                                           \
  template <>                                  \
  struct TypeOf<e> {                           \
    using type = Type;                         \
  };
#include "src/kernels/datatype_table.def"

inline constexpr bool isValidDataType(loomDataType_t type) {
  return static_cast<int>(type) >= 0 && static_cast<int>(type) < loomNumTypes;
}

// Size in bytes of one element; 0 for a value outside the table.
inline constexpr size_t dataTypeSize(loomDataType_t type) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    return sizeof(Type);
#include "src/kernels/datatype_table.def"
    default:
      return 0;
  }
}

// "float16", "int32", ...; nullptr for a value outside the table.
inline constexpr const char* dataTypeName(loomDataType_t type) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    return name;
#include "src/kernels/datatype_table.def"
    default:
      return nullptr;
  }
}

// Floating-point (including the small floats) as opposed to integer; false when out of range.
inline constexpr bool isFloatingDataType(loomDataType_t type) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    return !std::is_integral_v<Type>;
#include "src/kernels/datatype_table.def"
    default:
      return false;
  }
}

// True for the 16- and 8-bit floating-point types, which reduce in float.
template <typename T>
inline constexpr bool kIsSmallFloat = false;
template <>
inline constexpr bool kIsSmallFloat<Float16> = true;
template <>
inline constexpr bool kIsSmallFloat<BFloat16> = true;
template <>
inline constexpr bool kIsSmallFloat<Float8E4M3> = true;
template <>
inline constexpr bool kIsSmallFloat<Float8E5M2> = true;

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom
