// A GPU rank's connection over a wire transport (socket, ib), staged through pinned host memory
// by a proxy: NCCL's proxy, as a transport adapter.
//
// Why. The device program steps only rings it can reach with loads and stores
// (connection_view.h). A wire connection's ring is private host memory, moved by its
// progress() with system calls or verbs, which no kernel can make. So a CUDA rank's wire
// connection gets a second ring in front of it: a Simple ring in pinned host memory mapped into
// the rank's GPU, laid out like a memory transport's (SimpleRingView), which the device program
// steps as it steps a shm ring mapped into the GPU. A host thread calls progress() while a
// launch runs (src/exec/cuda/proxy_thread.h), and that moves the steps between this ring and
// the wire connection:
//   - send: every step the device posted (tail) is copied into a slot of the wire connection
//     and posted there with its byte count and tag; then the proxy ring's head frees it;
//   - receive: every step the wire connection received is copied into the proxy ring's next
//     free slot with its byte count and tag, then published by tail; the device frees it with
//     head.
// Each side of the proxy ring writes only its own counter, as in shm, so the device program
// and the proxy need no other handshake, and a launch resumes where the last one left off.
//
// The rings of the two ends are independent: the peer may be a CPU rank, a GPU rank with its
// own proxy, or a rank on another host; the wire carries the same slots as between CPU ranks.
// The host-side calls (tryAcquire, post, tryReceive, release) step the proxy ring as the
// device program does, so host code could drive the connection too; progress() is driven by
// one thread at a time.
//
// Errors. A send whose wire fails throws from progress(): a step it holds cannot be delivered.
// A receive reads ahead, so its wire may meet the end of a peer that has sent everything it
// will (it finished and destroyed its communicator), which looks like a death. So the receive
// keeps the wire's error and raises it only to a consumer that asks for a step the ring does
// not have (tryReceive, checkPeer). A kernel cannot ask: a peer's death reaches it through
// the control channel (src/bootstrap/control_channel.h), which stops every rank's waits, and
// a data connection that broke fails its sending side, whose communicator reports it there.
// A fault of this side's own (RecvConnection::failedHere: a local NIC error) is raised at
// once: no peer's end explains it, and the sender may be waiting for a credit with nothing in
// flight, so nothing else would fail.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace loom::transport {

// `wire` (a connection without a view) behind a proxy ring mapped into CUDA device `device`.
// Throws CudaError when the runtime cannot give pinned mapped memory.
std::unique_ptr<SendConnection> proxySend(std::unique_ptr<SendConnection> wire, int device);
std::unique_ptr<RecvConnection> proxyRecv(std::unique_ptr<RecvConnection> wire, int device);

}  // namespace loom::transport
