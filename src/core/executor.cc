#include "src/core/executor.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/logging.h"
#include "src/core/planner.h"
#include "src/core/schedules.h"
#include "src/kernels/datatype_traits.h"
#include "transports/wait.h"

namespace loom {
namespace {

using algo::Prim;
using Clock = std::chrono::steady_clock;

// Waiting policy when a pass over the tasks moved nothing (transports/wait.h says why):
// spin a few microseconds (a peer on another core usually answers within that), then yield
// (a peer waiting for this core gets it), then sleep until a connection the blocked tasks wait
// on can move. Every sleep is bounded so aborts and deadlines are still checked.
class Backoff {
 public:
  static constexpr auto kSpin = std::chrono::microseconds(4);
  static constexpr auto kYield = std::chrono::microseconds(60);
  static constexpr auto kMaxSleep = std::chrono::milliseconds(10);

  // `arm` adds what to sleep on to the set and says whether sleeping is safe.
  template <typename Arm>
  void idle(Arm&& arm) {
    if (idle_++ == 0) {
      since_ = Clock::now();
      return;
    }
    for (int i = 0; i < 16; ++i) __builtin_ia32_pause();
    if ((idle_ & 7) != 0) return;  // look at the clock every few rounds only
    const auto waited = Clock::now() - since_;
    if (waited < kSpin) return;
    if (waited < kYield) {
      sched_yield();
      return;
    }
    set_.clear();
    const transport::WaitArm state = arm(set_);
    if (state == transport::WaitArm::kArmed) {
      set_.sleep(std::chrono::duration_cast<std::chrono::microseconds>(kMaxSleep));
    } else if (state == transport::WaitArm::kUnsupported) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    set_.lower();
  }
  void reset() { idle_ = 0; }

 private:
  unsigned idle_ = 0;
  Clock::time_point since_;
  transport::WaitSet set_;
};

}  // namespace

namespace {
void runLocked(std::vector<CollOp>& ops, const std::vector<Comm*>& comms);
}  // namespace

void runOps(std::vector<CollOp>& ops) {
  if (ops.empty()) return;
  // One executor per communicator at a time; lock in a fixed order so groups spanning several
  // communicators cannot deadlock against each other.
  std::vector<Comm*> comms;
  for (const CollOp& op : ops) comms.push_back(op.comm.get());
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (Comm* c : comms) locks.emplace_back(c->executionMutex());
  try {
    runLocked(ops, comms);
  } catch (const Error& e) {
    for (Comm* c : comms) c->markFailed(e.code());
    throw;
  }
}

namespace {

void runLocked(std::vector<CollOp>& ops, const std::vector<Comm*>& comms) {
  // Connect what is missing, each communicator on its own thread when there are several: one
  // thread may drive all ranks of a job (loomCommInitAll + a group), and each rank's setup
  // waits for its peers'.
  std::map<Comm*, std::vector<Comm::ConnectionKey>> wanted;
  for (const CollOp& op : ops) wantedConnections(op, wanted[op.comm.get()]);
  if (wanted.size() == 1) {
    wanted.begin()->first->connect(wanted.begin()->second);
  } else {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(wanted.size());
    size_t i = 0;
    for (auto& [comm, keys] : wanted) {
      threads.emplace_back([&, comm = comm, keys = &keys, i] {
        try {
          comm->connect(*keys);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
      ++i;
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  std::vector<std::unique_ptr<PrimTask>> tasks;
  std::vector<CollOp> selfCopies;
  for (const CollOp& op : ops) {
    if ((op.kind == CollKind::kSend || op.kind == CollKind::kRecv) && op.peer == op.comm->rank())
      continue;  // paired below
    planOp(op, op.comm->nextOpNumber(), tasks);
  }
  // A send to oneself is a local copy: pair it with the receive from oneself of the same
  // communicator, in posting order, as NCCL does.
  std::map<Comm*, std::vector<const CollOp*>> selfSends, selfRecvs;
  for (const CollOp& op : ops) {
    if (op.peer != op.comm->rank()) continue;
    if (op.kind == CollKind::kSend) selfSends[op.comm.get()].push_back(&op);
    if (op.kind == CollKind::kRecv) selfRecvs[op.comm.get()].push_back(&op);
  }
  for (auto& [comm, sendsToSelf] : selfSends) {
    std::vector<const CollOp*>& recvsFromSelf = selfRecvs[comm];
    LOOM_ENFORCE(sendsToSelf.size() == recvsFromSelf.size(), InvalidUsage, "rank ", comm->rank(),
                 " posted ", sendsToSelf.size(), " send(s) to itself and ", recvsFromSelf.size(),
                 " receive(s) from itself; post them in the same group, one receive per send");
    for (size_t i = 0; i < sendsToSelf.size(); ++i) {
      const CollOp& send = *sendsToSelf[i];
      const CollOp& recv = *recvsFromSelf[i];
      LOOM_ENFORCE(send.count * dataTypeSize(send.type) == recv.count * dataTypeSize(recv.type),
                   InvalidUsage, "rank ", comm->rank(), " sends ", send.count,
                   " elements to itself but receives ", recv.count);
      CollOp copy = recv;
      copy.sendbuff = send.sendbuff;
      copy.kind = CollKind::kRecv;
      selfCopies.push_back(copy);
    }
  }
  for (auto& [comm, recvsFromSelf] : selfRecvs) {
    LOOM_ENFORCE(selfSends.count(comm) > 0 || recvsFromSelf.empty(), InvalidUsage, "rank ",
                 comm->rank(), " posted a receive from itself without a send to itself");
  }
  for (const CollOp& copy : selfCopies) {
    tasks.push_back(std::make_unique<PrimTask>(
        copy, pipeSteps(Prim::kCopy, 0, 0, copy.count, size_t{1} << 18, false), TaskLinks{},
        "copy to self"));
  }

  // Tasks sharing a connection run in submission order: a task may step only while it is the
  // first unfinished user of each of its connections.
  std::map<const void*, std::vector<PrimTask*>> users;
  std::set<transport::SendConnection*> sends;
  std::set<transport::RecvConnection*> recvs;
  for (auto& t : tasks) {
    const TaskLinks& l = t->links();
    for (int i = 0; i < l.nsend; ++i) {
      users[l.send[i]].push_back(t.get());
      sends.insert(l.send[i]);
    }
    for (int i = 0; i < l.nrecv; ++i) {
      users[l.recv[i]].push_back(t.get());
      recvs.insert(l.recv[i]);
    }
  }
  auto isHead = [&](const void* conn, PrimTask* t) {
    for (PrimTask* u : users[conn]) {
      if (!u->done()) return u == t;
    }
    return true;
  };
  auto mayStep = [&](PrimTask* t) {
    const TaskLinks& l = t->links();
    for (int i = 0; i < l.nsend; ++i)
      if (!isHead(l.send[i], t)) return false;
    for (int i = 0; i < l.nrecv; ++i)
      if (!isHead(l.recv[i], t)) return false;
    return true;
  };

  std::chrono::milliseconds timeout = comms.front()->options().timeout;
  for (Comm* c : comms) timeout = std::min(timeout, c->options().timeout);
  if (timeout.count() == 0)
    for (Comm* c : comms) timeout = std::max(timeout, c->options().timeout);
  Backoff backoff;
  auto lastProgress = Clock::now();
  for (;;) {
    bool any = false, allDone = true;
    for (auto* s : sends) any |= s->progress();
    for (auto* r : recvs) any |= r->progress();
    for (auto& t : tasks) {
      if (t->done()) continue;
      if (mayStep(t.get())) any |= t->progress();
      allDone &= t->done();
    }
    if (allDone) break;
    if (any) {
      backoff.reset();
      lastProgress = Clock::now();
      continue;
    }
    for (Comm* c : comms) throwIfAborted(c->abortFlag(), "a collective");
    if (timeout.count() > 0 && Clock::now() - lastProgress > timeout) {
      std::string waiting;
      for (auto& t : tasks)
        if (!t->done()) waiting += "\n  " + t->waitingFor();
      throw TimeoutError(strCat("no progress for ", timeout.count() / 1000.0,
                                " s; still waiting for:", waiting,
                                "\nDid every rank call the same operations in the same order?"));
    }
    backoff.idle([&](transport::WaitSet& set) {
      for (auto& t : tasks) {
        if (t->done() || !mayStep(t.get())) continue;
        const transport::WaitArm state = t->armWait(set);
        if (state != transport::WaitArm::kArmed) return state;
      }
      return transport::WaitArm::kArmed;
    });
  }
  // Posted slots must reach the kernel before we return: a rank that goes on to finalize
  // stops pumping its connections, and its peers would wait for data still in our slot ring
  // (socket). shm slots are in the peer's view already, so they drain at once.
  for (;;) {
    bool drained = true;
    for (auto* s : sends) {
      s->progress();
      drained &= s->drained();
    }
    if (drained) break;
    for (Comm* c : comms) throwIfAborted(c->abortFlag(), "a collective");
    backoff.idle([&](transport::WaitSet& set) {
      for (auto* s : sends) {
        const transport::WaitArm state =
            s->drained() ? transport::WaitArm::kArmed : s->armWait(set, /*drain=*/true);
        if (state != transport::WaitArm::kArmed) return state;
      }
      return transport::WaitArm::kArmed;
    });
  }
}

}  // namespace

}  // namespace loom
