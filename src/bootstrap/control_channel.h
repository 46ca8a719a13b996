// The control channel of a communicator: authenticated bootstrap connections kept open for the
// communicator's life, so that what one rank learns about the job's health reaches every rank
// at once, whatever each rank is doing (waiting on a peer that is alive, setting up a
// connection, or outside any loom call).
//
// Shape: a star through rank 0. Every other rank opens one connection to rank 0 at init, just
// before the bootstrap ring (Hello kind kControl; rank 0's control thread takes them from its
// listener as they come), so a rank that dies from then on is named to all. One control thread per
// communicator and rank blocks in poll() on its control socket(s) and an eventfd (shutdown, local
// requests): it costs nothing while the job is healthy. Rank 0 relays what one rank reports to all
// the others. A star keeps detection simple and fast: every rank watches exactly one socket (rank 0
// watches all), and a process that dies closes its sockets in the kernel, so its peer sees EOF or a
// reset within milliseconds. A connection that ends without BYE is the death of the rank at its
// other end (on rank 0: that rank; elsewhere: rank 0). The price is rank 0's n-1 sockets, which
// the bootstrap of a job of thousands of ranks already pays once at the root.
//
// Wire format: frames, each
//   offset 0  u32  body length in bytes, big-endian (at most kMaxControlBody)
//   offset 4  u8   type (ControlFrame below)
//   offset 5  u8   zero, three bytes
//   offset 8  body, by type; every integer big-endian:
//     FAILED          i32 rank the failure is about (-1: unknown), i32 loomResult_t, then the
//                     message's bytes (no terminator; at most kMaxFailureText)
//     LEAVING         i32 rank that leaves (loomCommAbort)
//     BYE             i32 rank that closes cleanly (destroy); the EOF that follows is no failure
//     PROGRESS_REQ    u32 request id
//     PROGRESS        u32 request id, one progress entry
//     PROGRESS_TABLE  u32 request id, u32 n, n progress entries (entry r is rank r's)
// A progress entry is 64 bytes:
//   u64 issued, u64 completed (sequence numbers of the last call issued and completed, 0: none),
//   u64 count, i32 datatype, i32 root (of the last call issued), u32 ms since it was issued,
//   u32 ms since the last completion (0xffffffff: never), u32 flags (bit 0: answered),
//   u32 zero, char[16] kind ("AllReduce", NUL-padded).
// Rank -> 0: FAILED, LEAVING, BYE, PROGRESS_REQ, PROGRESS. 0 -> rank: FAILED, LEAVING, BYE,
// PROGRESS_REQ, PROGRESS_TABLE. Rank 0 turns a LEAVING or a lost connection into FAILED for
// the others.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/base/interrupt.h"
#include "src/net/auth_listener.h"
#include "src/net/socket.h"

namespace loom {

enum class ControlFrame : uint8_t {
  kFailed = 1,
  kLeaving = 2,
  kBye = 3,
  kProgressRequest = 4,
  kProgress = 5,
  kProgressTable = 6,
};

inline constexpr size_t kControlHeaderBytes = 8;
inline constexpr size_t kProgressEntryBytes = 64;
inline constexpr size_t kMaxFailureText = 1024;
inline constexpr uint32_t kMaxControlBody = 8 + (1u << 16) * kProgressEntryBytes;

// What a rank did last on one communicator (the answer to PROGRESS_REQ).
struct RankProgress {
  uint64_t issued = 0;
  uint64_t completed = 0;
  uint64_t count = 0;
  int32_t datatype = -1;
  int32_t root = -1;
  uint32_t msSinceIssued = 0;
  uint32_t msSinceCompleted = kNever;
  bool answered = false;  // false: the rank did not answer in time (or is gone)
  char kind[16] = {};
  static constexpr uint32_t kNever = 0xffffffffu;
};

void encodeProgress(const RankProgress& p, uint8_t* out);  // kProgressEntryBytes
RankProgress decodeProgress(const uint8_t* in);

class ControlChannel {
 public:
  struct Hooks {
    // Called on the control thread to answer PROGRESS_REQ; must not block.
    std::function<RankProgress()> progress;
    // Called on the control thread every tickMs while the channel lives (0: never).
    std::function<void()> tick;
    int tickMs = 0;
  };
  // links[r]: on rank 0 the connection from rank r (links[0] unused); elsewhere links[0] is the
  // connection to rank 0. On rank 0 the connections not given come from `accept` (Hello kind
  // kControl) as the ranks connect; a rank that connects after a failure is told at once.
  // Failures land in `failures`. Starts the control thread (nranks > 1).
  ControlChannel(int rank, int nranks, std::vector<Socket> links, Interrupt& failures, Hooks hooks,
                 std::string owner, AuthListener* accept = nullptr);
  // Says BYE unless leave() said LEAVING, stops the thread and closes the connections.
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Records the failure here and, if it is the first, tells every rank (through rank 0).
  // `rank` is the rank the failure is about (-1: unknown).
  void reportFailure(loomResult_t code, int rank, const std::string& message);
  // Waits up to kVerdictWaitMs for a failure of the job (or the parent's) to be recorded, or for
  // a local abort. Called when a connection to a peer ended without a goodbye: the peer may be
  // a survivor that exited on the job's first failure, which rank 0 has sent, or is sending,
  // to every rank; naming that peer instead would blame the wrong rank.
  void awaitVerdict() const;
  // A dead peer's control connection closes too, so the verdict comes unless only a data
  // connection broke; the wait is long enough for a loaded machine's scheduling delays, and
  // costs nothing when the verdict comes at once.
  static constexpr int kVerdictWaitMs = 2000;
  // loomCommAbort: the others see this rank leave.
  void leave();
  // Asks every rank what it did last (through rank 0); entries of ranks that did not answer
  // within `wait` have answered == false. Empty when the channel is down.
  std::vector<RankProgress> gatherProgress(std::chrono::milliseconds wait);

 private:
  struct Link {
    Socket socket;
    std::vector<uint8_t> in;        // bytes of an incomplete frame
    std::atomic<bool> down{false};  // closed (read by senders on any thread)
    bool saidBye = false;           // BYE or LEAVING came: its EOF is no failure
    bool adopted = false;           // rank 0: the rank's connection was taken
    std::mutex sendMutex;
  };
  struct Round {  // rank 0: a progress round in flight
    bool active = false;
    uint32_t id = 0;
    std::vector<RankProgress> table;
    std::vector<std::pair<int, uint32_t>> requesters;  // (rank, its request id)
    std::chrono::steady_clock::time_point deadline;
  };

  void run();
  // Rank 0: takes the control connections that have arrived (control thread, or after it).
  void adoptPending();
  void send(int link, ControlFrame type, const std::vector<uint8_t>& body);
  void sendToAll(ControlFrame type, const std::vector<uint8_t>& body, int except);
  // Reads and handles what link `l` has; a closed link is handled too.
  void readLink(int l);
  void onFrame(int l, ControlFrame type, const uint8_t* body, size_t size);
  void onLinkLost(int l);
  // Records a failure and, on rank 0 when it is the first, relays it to every other rank.
  void failAndRelay(loomResult_t code, int rank, const std::string& message, int from);
  void startRound();
  void finishRoundIfDone(bool deadlinePassed);
  void deliver(uint32_t id, std::vector<RankProgress> table);
  void poke();

  const int rank_;
  const int nranks_;
  Interrupt& failures_;
  Hooks hooks_;
  const std::string owner_;
  std::vector<std::unique_ptr<Link>> links_;
  AuthListener* accept_ = nullptr;
  int missing_ = 0;  // rank 0: control connections not taken yet
  int wake_ = -1;    // eventfd
  std::thread thread_;
  std::mutex mutex_;  // everything below
  std::condition_variable delivered_;
  bool stopping_ = false;
  bool left_ = false;
  std::atomic<bool> claimed_{false};  // a failure is being reported (failAndRelay)
  uint32_t nextRequest_ = 1;
  std::vector<uint32_t> localRequests_;  // rank 0: this rank's own, for the next round
  std::map<uint32_t, std::vector<RankProgress>> results_;
  Round round_;  // control thread only
};

}  // namespace loom
