// The CPU executor: runs a set of operations (one call, or a whole group) to completion on the
// calling thread - the caller's for a NULL stream, a host stream's own thread otherwise.
//
// How it works. Each operation becomes PrimTasks, one per channel (or per peer for
// point-to-point). Connections are made on first use. Tasks that share a connection run in
// the order they were submitted (every rank submits in the same order, so the slots on the
// wire match); tasks on different connections progress together, so sends and receives of a
// group posted in any order cannot deadlock. The loop polls every task and connection; when
// nothing moves it spins briefly, then yields, then sleeps in short naps, so ranks that share
// cores still make progress. A run fails with loomTimeout when nothing moved for the
// communicator's timeout (naming what each unfinished task waits for), and with
// loomInvalidUsage when its communicator is aborted.
#pragma once

#include <vector>

#include "src/core/coll.h"

namespace loom {

void runOps(std::vector<CollOp>& ops);

}  // namespace loom
