// The CPU executor: runs a set of operations (one call, or a whole group) to completion on the
// calling thread - the caller's for a NULL stream, a host stream's own thread otherwise.
//
// How it works. Each operation becomes PrimTasks, one per channel (or per peer for
// point-to-point). Connections are made on first use (Comm::connect says how that stays
// deadlock-free with other operations in flight). The tasks of a call join their
// communicator's progress engine (progress_engine.h), where whichever thread drives steps them
// together with those of the other calls running on other streams or threads of the
// communicator. Tasks that share a connection run in the order they were submitted (every rank
// submits in the same order, so the slots on the wire match); tasks on different connections
// progress together, so sends and receives posted in any order - in one group, or on
// different streams - cannot deadlock. The loop polls every task and connection; when nothing
// moves it spins briefly, then yields, then sleeps in short naps, so ranks that share cores
// still make progress. A run fails with loomTimeout when nothing moved for the communicator's
// timeout (naming what each unfinished task waits for), and with loomInvalidUsage when its
// communicator is aborted; a failure fails every operation in flight on the communicator, and
// marks it failed.
#pragma once

#include <vector>

#include "src/core/coll.h"

namespace loom {

void runOps(std::vector<CollOp>& ops);

}  // namespace loom
