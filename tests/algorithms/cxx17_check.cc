// Compiled as C++17 (see algorithms_tests.cmake): the algorithm headers must stay includable
// by nvcc, whose CMake 3.25 dialect is C++17, and their arithmetic must be constexpr.
#include "algorithms/alltoall.h"
#include "algorithms/chain.h"
#include "algorithms/primitives.h"
#include "algorithms/ring.h"
#include "algorithms/slicing.h"
#include "algorithms/tree.h"
#include "algorithms/walker.h"

namespace loom::algo {
namespace {

constexpr int kOrder[] = {2, 0, 3, 1};
static_assert(ringNext(kOrder, 4, 1) == 2 && ringPrev(kOrder, 4, 2) == 1);
static_assert(ringAllReduceStep(4, 1, 3).prim == Prim::kRecvReduceCopySend);
static_assert(ringAllReduceStep(4, 1, 3).chunk == 1);
static_assert(ringReduceScatterStep(kOrder, 4, 1, 3, false).chunk == 0);
static_assert(channelSlice(10, 3, 2, 4) == Range{8, 2});
static_assert(ringChunk(Range{0, 3}, 5, 8, 1, 0, 4).empty());
static_assert(chainPrim(ChainColl::kReduce, kOrder, 4, 3, 3, false) == Prim::kRecvReduceCopy);
static_assert(btree(13, 12).parent == 8 && dtree(13, 1, 0).childCount() == 1);
static_assert(treeAllReducePrims(dtree(8, 0, 0), false).down == Prim::kSendFromOutput);
static_assert(allToAllStep(5, 3, 4, 10).sendOffset == 20);
// The walker runs at compile time. 13 elements on 5 ranks, 2 per chunk: the first loop's 9
// steps all carry data; the second loop's 3 elements fill 3 of 5 chunks, touched by 5 steps.
static_assert(stepCount(ringAllReduceProgram(5, 1, Range{0, 13}, 2, 1)) == 14);
static_assert(stepCount(afterSteps(4, pipeProgram(Prim::kSend, 0, 0, 10, 4, false))) == 6);

}  // namespace
}  // namespace loom::algo
