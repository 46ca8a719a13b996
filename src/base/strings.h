// Small string helpers shared by the core: concatenation for messages and list parsing for
// environment variables. Kept here so no file grows its own variant.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// Concatenates anything that has operator<< into one string: strCat("rank ", r, " of ", n).
template <typename... Args>
std::string strCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// Splits on `sep`, trimming spaces around each piece and dropping empty pieces.
std::vector<std::string> splitList(std::string_view text, char sep);

// Joins integers as "1, 3, 5" (used to name ranks in error messages).
std::string joinInts(const std::vector<int>& values);

}  // namespace loom
