#include "src/comm/hang_report.h"

#include <cstdio>
#include <cstring>

#include "loom/loom.h"
#include "src/base/strings.h"

namespace loom {
namespace {

const char* typeName(int datatype) {
  switch (datatype) {
#define LOOM_DATATYPE(enumerator, Type, name) \
  case enumerator:                            \
    return name;
#include "src/kernels/datatype_table.def"
  }
  return "?";
}

bool isPointToPoint(const RankProgress& p) {
  return std::strcmp(p.kind, "Send") == 0 || std::strcmp(p.kind, "Recv") == 0;
}

bool sameCall(const RankProgress& a, const RankProgress& b) {
  return std::strcmp(a.kind, b.kind) == 0 && a.count == b.count && a.datatype == b.datatype &&
         (isPointToPoint(a) || a.root == b.root);
}

std::string seconds(uint32_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", ms / 1000.0);
  return buf;
}

std::string ranksVerb(const std::vector<int>& ranks, const char* one, const char* many) {
  return strCat(describeRanks(ranks), " ", ranks.size() == 1 ? one : many);
}

}  // namespace

std::string describeCall(const RankProgress& p) {
  std::string text =
      strCat(p.kind, " #", p.issued, " (count ", p.count, ", ", typeName(p.datatype));
  if (isPointToPoint(p))
    text += strCat(", peer ", p.root);
  else if (std::strcmp(p.kind, "Broadcast") == 0 || std::strcmp(p.kind, "Reduce") == 0)
    text += strCat(", root ", p.root);
  return text + ")";
}

std::string describeRanks(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) text += ", ";
    text += j > i ? strCat(ranks[i], "-", ranks[j]) : strCat(ranks[i]);
    i = j + 1;
  }
  return text;
}

std::string formatHangReport(int me, const std::vector<RankProgress>& table) {
  if (me < 0 || static_cast<size_t>(me) >= table.size()) return "";
  const RankProgress& mine = table[static_cast<size_t>(me)];
  if (mine.issued == 0 || mine.completed >= mine.issued) return "";
  const uint64_t call = mine.issued;
  std::vector<int> waiting, finished, silent, other;
  std::vector<int> behind;
  for (size_t r = 0; r < table.size(); ++r) {
    const RankProgress& p = table[r];
    const int rank = static_cast<int>(r);
    if (!p.answered)
      silent.push_back(rank);
    else if (p.completed >= call)
      finished.push_back(rank);
    else if (p.issued < call)
      behind.push_back(rank);
    else if (p.issued == call && !sameCall(p, mine))
      other.push_back(rank);
    else
      waiting.push_back(rank);
  }
  std::string text =
      strCat(describeCall(mine), ": ", ranksVerb(waiting, "is waiting", "are waiting"));
  if (!finished.empty())
    text += strCat("; ", ranksVerb(finished, "has finished it", "have finished it"));
  for (int r : other)
    text += strCat("; rank ", r, " called ", describeCall(table[static_cast<size_t>(r)]),
                   " instead (every rank must make the same calls in the same order)");
  if (!silent.empty())
    text += strCat("; ", ranksVerb(silent, "did not answer", "did not answer"),
                   " (gone, or its control thread is stuck)");
  for (int r : behind) {
    const RankProgress& p = table[static_cast<size_t>(r)];
    text += strCat("; rank ", r, " has not called it. ");
    if (p.issued == 0) {
      text += "It has made no call on this communicator yet";
    } else if (p.completed >= p.issued) {
      text += strCat("Its last call was ", describeCall(p), ", completed ",
                     seconds(p.msSinceCompleted), " ago");
    } else {
      text += strCat("Its last call, ", describeCall(p), ", is still running (issued ",
                     seconds(p.msSinceIssued), " ago)");
    }
  }
  return text + ".";
}

}  // namespace loom
