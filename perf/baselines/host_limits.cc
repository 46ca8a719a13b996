// The physical limits the host figures are read against (docs/performance.md), measured with
// nothing but the OS between two processes:
//   - a cache line handed back and forth between two processes (the floor of a small call's
//     latency over shared memory), and both writing their own line and waiting for the
//     other's (the floor of a 2-rank exchange);
//   - one loopback TCP stream, and two streams in opposite directions at once (what a 2-rank
//     ring needs: every rank sends and receives the same bytes at the same time), with a thread
//     per direction and, as loom's executor does it, one thread per process driving both
//     directions of 2 connections with nonblocking calls;
//   - the memory traffic two processes reach copying large buffers at once (what every large
//     host collective is bound by: docs/performance.md divides it by the bytes a collective
//     moves per byte of data);
//   - what a single copy between processes costs: process_vm_readv (CMA) of another process's
//     buffer against a memcpy of the same bytes, with 4 KiB pages and with transparent huge
//     pages (the kernel pins every page it reads, on every call).
// Usage: host_limits [MiB per TCP transfer, default 1024] (the one-thread exchange is fixed:
// 20 rounds of 16 MiB each way)
//        host_limits --cache-line   only the round trip, in a fraction of a second: one line
//                                   "cache_line_round_trip_ns N" (perf/compare tags each run
//                                   with it, before and after)
//        host_limits --lines        the per-line costs perf/model/medium_model reads: the round
//                                   trip, and what one 64-byte line costs to read when the other
//                                   process just wrote it, to write when the other process just
//                                   read it, to memcpy into and out of such lines, to reduce
//                                   them, to copy inside one core's cache, and to pull
//                                   another process's buffer with CMA, as "name value" lines
//                                   (reductions and streamed stores run loom's own kernels)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "src/kernels/reduce_copy_dispatch.h"

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void die(const char* what) {
  perror(what);
  exit(1);
}

struct alignas(64) Line {
  std::atomic<long> value;
};

// Forks a child running `child`; the parent runs `parent` and returns its result.
template <typename Child, typename Parent>
double withChild(Child&& child, Parent&& parent) {
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    child();
    _exit(0);
  }
  const double result = parent();
  waitpid(pid, nullptr, 0);
  return result;
}

void cacheLines() {
  auto* lines = static_cast<Line*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (lines == MAP_FAILED) die("mmap");
  constexpr long kRounds = 2000000;
  const double pingPong = withChild(
      [&] {
        for (long i = 1; i <= kRounds; ++i) {
          while (lines[0].value.load(std::memory_order_acquire) != i) {
          }
          lines[1].value.store(i, std::memory_order_release);
        }
      },
      [&] {
        const auto t0 = Clock::now();
        for (long i = 1; i <= kRounds; ++i) {
          lines[0].value.store(i, std::memory_order_release);
          while (lines[1].value.load(std::memory_order_acquire) != i) {
          }
        }
        return secondsSince(t0) / kRounds;
      });
  auto exchange = [&](int mine, int theirs) {
    for (long i = 1; i <= kRounds; ++i) {
      lines[mine].value.store(i, std::memory_order_release);
      while (lines[theirs].value.load(std::memory_order_acquire) < i) {
      }
    }
  };
  const double period = withChild([&] { exchange(3, 2); },
                                  [&] {
                                    const auto t0 = Clock::now();
                                    exchange(2, 3);
                                    return secondsSince(t0) / kRounds;
                                  });
  printf("cache line round trip between two processes: %.0f ns\n", pingPong * 1e9);
  printf("two processes exchanging a line each (period): %.0f ns\n", period * 1e9);
}

// The round trip alone, quickly: the median of batches of 200, up to 15 batches and no more
// than about 30 ms once 3 are done, 0.3 s in all (a few ms when lines move fast; on a loaded
// machine, where a descheduled partner stretches a round trip to a time slice, it stops early
// instead of taking seconds).
double quickRoundTrip() {
  auto* lines = static_cast<Line*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (lines == MAP_FAILED) die("mmap");
  constexpr long kBatches = 15, kPerBatch = 200;
  constexpr double kEnoughSeconds = 0.03, kMostSeconds = 0.3;
  std::vector<double> batches;
  withChild(
      [&] {
        for (long i = 1;; ++i) {
          long seen;
          while ((seen = lines[0].value.load(std::memory_order_acquire)) != i) {
            if (seen < 0) return;  // the parent is done
          }
          lines[1].value.store(i, std::memory_order_release);
        }
      },
      [&] {
        const auto start = Clock::now();
        long i = 1;
        for (long b = 0; b < kBatches; ++b) {
          const auto t0 = Clock::now();
          long k = 0;
          for (; k < kPerBatch; ++k, ++i) {
            lines[0].value.store(i, std::memory_order_release);
            while (lines[1].value.load(std::memory_order_acquire) != i) {
            }
            // Every round trip a time slice: the batch so far is the answer.
            if ((k & 7) == 7 && secondsSince(start) > kMostSeconds) break;
          }
          batches.push_back(secondsSince(t0) / static_cast<double>(std::max(k, 1L)));
          if (secondsSince(start) > kMostSeconds ||
              (b >= 2 && secondsSince(start) > kEnoughSeconds))
            break;
        }
        lines[0].value.store(-1, std::memory_order_release);
        return 0.0;
      });
  munmap(lines, 4096);
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

// out = a + b with loom's own reduction kernel (the dispatcher's best ISA for this CPU): the
// reduction a receiving step does, priced as loom runs it.
void sumInto(float* out, const float* a, const float* b, size_t n) {
  loom::ReduceCopyArgs args;
  args.nsrc = 2;
  args.ndst = 1;
  args.src[0] = a;
  args.src[1] = b;
  args.dst[0] = out;
  args.count = n;
  loom::reduceCopy(loomFloat32, loom::ReduceOpKind::kSum, args);
}

// Data lines between the two processes, per 64-byte line, for a buffer of `bytes` in shared
// memory, in turns, 40 rounds; medians. Each round has six turns:
//   0. write: the parent stores one word per line (its lines were last read by the child, so
//      every store first takes the line back from the child's cache);
//   1. read: the child loads one word per line (every line comes from the parent's cache,
//      dirty);
//   2. memcpy in: the parent memcpy's a warm buffer of its own into those lines. This is how
//      loom fills a peer's slot (byte-copy steps, and the reduction's block copies);
//   3. in even rounds memcpy out: the child memcpy's the lines into a buffer of its own, as a
//      step that receives a copy does; in odd rounds reduce: the child sums the lines (float)
//      with a warm buffer of its own into a third, as a step that receives and reduces does.
//      (Both in one round, the second after another memcpy in, timed the second 2-3x slower
//      at 64 KiB whichever it was: each is timed right after the lines were written.)
//   4. stream in: the parent copies its warm buffer into the lines with non-temporal stores,
//      as a streamed slot is filled (the lines go to memory, out of both caches);
//   5. as turn 3, out of those lines, which now come from memory.
// Also a memcpy of the same bytes inside the parent's cache (both buffers warm), and, after
// turn 2, the parent pulling the child's own warm buffer with process_vm_readv (CMA), as a
// receiver pulls a peer's input or output by address (transports/shm/direct_read.h): one
// kernel copy of clean lines that pins every page it reads. Not printed where CMA is refused
// (ptrace restrictions).
void dataLines(size_t bytes) {
  constexpr int kRounds = 40;
  constexpr int kTurns = 6;
  const size_t lineCount = bytes / 64;
  auto* shared = static_cast<char*>(
      mmap(nullptr, bytes + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) die("mmap");
  auto* turn = reinterpret_cast<Line*>(shared);
  auto* childTimes = reinterpret_cast<double*>(shared + 64);  // 3 x kRounds of them
  // The child's pid and the address of its own buffer, for the pull.
  auto* childBuffer = reinterpret_cast<std::atomic<uintptr_t>*>(shared + 2048);
  childBuffer[0].store(0);
  auto* data = reinterpret_cast<uint64_t*>(shared + 4096);
  const size_t words = bytes / sizeof(uint64_t);
  auto awaitTurn = [&](int t) {
    while (turn->value.load(std::memory_order_acquire) != t) {
    }
  };
  auto pass = [&](int t) { turn->value.store(t, std::memory_order_release); };
  std::vector<double> writes, copiesIn, copies, pulls, streamsIn;
  withChild(
      [&] {
        std::vector<float> mine(bytes / sizeof(float), 1.0f), out(bytes / sizeof(float));
        childBuffer[1].store(static_cast<uintptr_t>(getpid()));
        childBuffer[0].store(reinterpret_cast<uintptr_t>(mine.data()), std::memory_order_release);
        const auto* peer = reinterpret_cast<const float*>(data);
        uint64_t sum = 0;
        for (int r = 0; r < kRounds; ++r) {
          double* times = childTimes + 3 * r;
          awaitTurn(kTurns * r + 1);
          auto t0 = Clock::now();
          for (size_t w = 0; w < words; w += 8) sum += data[w];  // one load per line
          times[0] = secondsSince(t0);
          pass(kTurns * r + 2);
          // Turns 3 and 5: copy the lines out (even rounds) or reduce them (odd ones).
          auto receive = [&](int t, double* time) {
            awaitTurn(kTurns * r + t);
            const auto start = Clock::now();
            if (r % 2 == 0) {
              memcpy(out.data(), data, bytes);
            } else {
              sumInto(out.data(), peer, mine.data(), out.size());
            }
            *time = secondsSince(start);
            sum += static_cast<uint64_t>(out[static_cast<size_t>(r + t)]);
            pass(kTurns * r + t + 1);
          };
          receive(3, &times[1]);
          receive(5, &times[2]);
        }
        asm volatile("" : : "r"(sum));  // keeps the loads
      },
      [&] {
        std::vector<char> a(bytes, 1), b(bytes, 2);
        bool pullWorks = true;
        for (int r = 0; r < kRounds; ++r) {
          awaitTurn(kTurns * r);
          auto t0 = Clock::now();
          for (size_t w = 0; w < words; w += 8) data[w] = static_cast<uint64_t>(r) + w;
          writes.push_back(secondsSince(t0));
          pass(kTurns * r + 1);
          t0 = Clock::now();
          memcpy(b.data(), a.data(), bytes);
          copies.push_back(secondsSince(t0));
          a[static_cast<size_t>(r) * 64 % bytes] = b[bytes - 1];  // keeps every copy
          awaitTurn(kTurns * r + 2);
          t0 = Clock::now();
          memcpy(data, a.data(), bytes);
          copiesIn.push_back(secondsSince(t0));
          const uintptr_t remote = childBuffer[0].load(std::memory_order_acquire);
          if (pullWorks && remote != 0) {
            iovec local{b.data(), bytes}, theirs{reinterpret_cast<void*>(remote), bytes};
            const auto pid = static_cast<pid_t>(childBuffer[1].load());
            t0 = Clock::now();
            pullWorks =
                process_vm_readv(pid, &local, 1, &theirs, 1, 0) == static_cast<ssize_t>(bytes);
            if (pullWorks) pulls.push_back(secondsSince(t0));
          }
          pass(kTurns * r + 3);
          awaitTurn(kTurns * r + 4);
          t0 = Clock::now();
          loom::streamCopy(data, a.data(), bytes);  // as a streamed slot is written
          streamsIn.push_back(secondsSince(t0));
          pass(kTurns * r + 5);
        }
        awaitTurn(kTurns * kRounds);
        if (!pullWorks) pulls.clear();
        return 0.0;
      });
  std::vector<double> reads, copiesOut, reduces, copiesOutOfMemory, reducesOutOfMemory;
  for (int r = 0; r < kRounds; ++r) {
    reads.push_back(childTimes[3 * r]);
    (r % 2 == 0 ? copiesOut : reduces).push_back(childTimes[3 * r + 1]);
    (r % 2 == 0 ? copiesOutOfMemory : reducesOutOfMemory).push_back(childTimes[3 * r + 2]);
  }
  auto perLine = [&](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2] * 1e9 / static_cast<double>(lineCount);
  };
  const unsigned kib = static_cast<unsigned>(bytes >> 10);
  printf("line_read_from_peer_ns_%uk %.2f\n", kib, perLine(reads));
  printf("line_write_after_peer_ns_%uk %.2f\n", kib, perLine(writes));
  printf("line_memcpy_to_peer_ns_%uk %.2f\n", kib, perLine(copiesIn));
  printf("line_memcpy_from_peer_ns_%uk %.2f\n", kib, perLine(copiesOut));
  printf("line_reduce_from_peer_ns_%uk %.2f\n", kib, perLine(reduces));
  printf("line_copy_local_ns_%uk %.2f\n", kib, perLine(copies));
  if (!pulls.empty()) printf("line_cma_pull_ns_%uk %.2f\n", kib, perLine(pulls));
  printf("line_stream_to_peer_ns_%uk %.2f\n", kib, perLine(streamsIn));
  printf("line_memcpy_streamed_ns_%uk %.2f\n", kib, perLine(copiesOutOfMemory));
  printf("line_reduce_streamed_ns_%uk %.2f\n", kib, perLine(reducesOutOfMemory));
  munmap(shared, bytes + 4096);
}

// A connected loopback pair: the listener's end for the parent, the connecting end for the
// child (made before fork, so no port is guessed).
void socketPair(int* parentEnd, int* childEnd) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0) die("bind");
  if (listen(listener, 1) != 0) die("listen");
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    die("getsockname");
  *childEnd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(*childEnd, reinterpret_cast<sockaddr*>(&address), length) != 0) die("connect");
  *parentEnd = accept(listener, nullptr, nullptr);
  if (*parentEnd < 0) die("accept");
  close(listener);
  const int one = 1;
  setsockopt(*parentEnd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(*childEnd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void sendBytes(int fd, size_t total) {
  std::vector<char> buffer(1 << 20, 1);
  for (size_t done = 0; done < total;) {
    const ssize_t n = send(fd, buffer.data(), std::min(buffer.size(), total - done), 0);
    if (n <= 0) die("send");
    done += static_cast<size_t>(n);
  }
}

void receiveBytes(int fd, size_t total) {
  std::vector<char> buffer(1 << 20);
  for (size_t done = 0; done < total;) {
    const ssize_t n = recv(fd, buffer.data(), buffer.size(), 0);
    if (n <= 0) die("recv");
    done += static_cast<size_t>(n);
  }
}

void tcp(size_t total) {
  int parentEnd, childEnd;
  socketPair(&parentEnd, &childEnd);
  const double one = withChild([&] { sendBytes(childEnd, total); },
                               [&] {
                                 const auto t0 = Clock::now();
                                 receiveBytes(parentEnd, total);
                                 return secondsSince(t0);
                               });
  // Both ends send and receive at once, each direction on its own thread.
  auto both = [&](int fd) {
    std::thread sender([&] { sendBytes(fd, total); });
    receiveBytes(fd, total);
    sender.join();
  };
  const double two = withChild([&] { both(childEnd); },
                               [&] {
                                 const auto t0 = Clock::now();
                                 both(parentEnd);
                                 return secondsSince(t0);
                               });
  printf("one loopback TCP stream: %.2f GB/s\n", total / one / 1e9);
  printf("two opposite loopback TCP streams at once: %.2f GB/s each direction\n",
         total / two / 1e9);
  close(parentEnd);
  close(childEnd);
}

// Both directions from one thread per process: each process sends 16 MiB (half on each of
// 2 connections) while it receives the other's 16 MiB, with nonblocking send/recv round the
// connections and poll when neither moves; 20 rounds on warm buffers, the median round.
void tcpOneThread() {
  constexpr int kConnections = 2, kRounds = 20;
  constexpr size_t kBytes = size_t{16} << 20, kPer = kBytes / kConnections;
  int parentEnds[kConnections], childEnds[kConnections];
  for (int c = 0; c < kConnections; ++c) {
    socketPair(&parentEnds[c], &childEnds[c]);
    fcntl(parentEnds[c], F_SETFL, O_NONBLOCK);
    fcntl(childEnds[c], F_SETFL, O_NONBLOCK);
  }
  // Each side's buffers are its own, made after the fork and touched before its first round.
  auto exchange = [&](const int* fds, std::vector<char>& out, std::vector<char>& in) {
    size_t sent[kConnections] = {}, got[kConnections] = {};
    for (bool done = false; !done;) {
      bool moved = false;
      done = true;
      pollfd waits[kConnections];
      for (int c = 0; c < kConnections; ++c) {
        const size_t at = static_cast<size_t>(c) * kPer;
        if (sent[c] < kPer) {
          const ssize_t n = send(fds[c], out.data() + at + sent[c], kPer - sent[c], 0);
          if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) die("send");
          if (n > 0) {
            sent[c] += static_cast<size_t>(n);
            moved = true;
          }
        }
        if (got[c] < kPer) {
          const ssize_t n = recv(fds[c], in.data() + at + got[c], kPer - got[c], 0);
          if (n == 0) die("recv: peer closed");
          if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) die("recv");
          if (n > 0) {
            got[c] += static_cast<size_t>(n);
            moved = true;
          }
        }
        const short events =
            static_cast<short>((sent[c] < kPer ? POLLOUT : 0) | (got[c] < kPer ? POLLIN : 0));
        waits[c] = pollfd{fds[c], events, 0};
        done = done && events == 0;
      }
      if (!moved && !done) poll(waits, kConnections, 1000);
    }
  };
  const double median = withChild(
      [&] {
        std::vector<char> out(kBytes, 1), in(kBytes, 0);
        for (int r = 0; r < kRounds; ++r) exchange(childEnds, out, in);
      },
      [&] {
        std::vector<char> out(kBytes, 2), in(kBytes, 0);
        std::vector<double> rounds;
        for (int r = 0; r < kRounds; ++r) {
          const auto t0 = Clock::now();
          exchange(parentEnds, out, in);
          rounds.push_back(secondsSince(t0));
        }
        std::sort(rounds.begin(), rounds.end());
        return rounds[rounds.size() / 2];
      });
  printf(
      "two opposite loopback TCP streams, one thread per process, 2 connections: %.2f GB/s "
      "each direction\n",
      kBytes / median / 1e9);
  for (int c = 0; c < kConnections; ++c) {
    close(parentEnds[c]);
    close(childEnds[c]);
  }
}

// Two processes each memcpy a 64 MiB buffer into another, 8 times, starting together: reads
// plus writes of both, per second. (glibc copies that large with non-temporal stores, as loom's
// large calls do, so there is no read-for-ownership to count.)
void memoryTraffic() {
  constexpr size_t kBytes = size_t{64} << 20;
  constexpr int kRounds = 8;
  auto* start = static_cast<Line*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (start == MAP_FAILED) die("mmap");
  auto copyRounds = [&] {
    std::vector<char> from(kBytes, 1), to(kBytes, 2);  // touched here, before the clock
    start->value.fetch_add(1);
    while (start->value.load() < 2) {
    }
    const auto t0 = Clock::now();
    for (int r = 0; r < kRounds; ++r) {
      memcpy(to.data(), from.data(), kBytes);
      from[static_cast<size_t>(r) * 4096] = to[kBytes - 1];  // keeps every copy
    }
    return secondsSince(t0);
  };
  const double seconds = withChild([&] { copyRounds(); }, [&] { return copyRounds(); });
  printf("memory traffic of two processes copying 64 MiB at once: %.1f GB/s (reads + writes)\n",
         2.0 * 2.0 * kRounds * kBytes / seconds / 1e9);
  munmap(start, 4096);
}

// A child fills `kBytes` of its own memory (so no page is shared copy-on-write with us, which
// would make the kernel copy it on the first pin) and waits until the parent is done; the parent
// reads `kStep`-byte pieces of it with process_vm_readv and memcpys the same amount between two
// buffers of its own, all warm, and reports the medians. `hugePages`: every buffer is advised
// MADV_HUGEPAGE.
void singleCopy(bool hugePages) {
  constexpr size_t kBytes = size_t{16} << 20, kStep = size_t{1} << 20, kAlign = size_t{2} << 20;
  constexpr int kRounds = 64;
  auto* shared = static_cast<std::atomic<uintptr_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) die("mmap");
  for (int i = 0; i < 3; ++i) shared[i].store(0);  // the child's buffer, done, the child's pid
  auto buffer = [&](int fill) {
    void* p = aligned_alloc(kAlign, kBytes);
    if (p == nullptr) die("aligned_alloc");
    if (hugePages) (void)madvise(p, kBytes, MADV_HUGEPAGE);
    memset(p, fill, kBytes);
    return static_cast<char*>(p);
  };
  std::vector<double> cma, copy;
  withChild(
      [&] {
        shared[2].store(static_cast<uintptr_t>(getpid()));  // before the address it waits on
        shared[0].store(reinterpret_cast<uintptr_t>(buffer(1)));
        while (shared[1].load() == 0) usleep(1000);
      },
      [&] {
        // Allocated after the fork, as the child's, so neither side shares a page with the other.
        char* to = buffer(0);
        char* from = buffer(1);
        uintptr_t remote;
        while ((remote = shared[0].load()) == 0) usleep(1000);
        const pid_t child = static_cast<pid_t>(shared[2].load());
        for (int r = 0; r < kRounds; ++r) {
          const size_t offset = static_cast<size_t>(r) * kStep % kBytes;
          iovec local{to + offset, kStep};
          iovec peer{reinterpret_cast<void*>(remote + offset), kStep};
          const auto t0 = Clock::now();
          if (process_vm_readv(child, &local, 1, &peer, 1, 0) != static_cast<ssize_t>(kStep)) {
            perror("process_vm_readv (CMA; not permitted here?)");
            break;
          }
          cma.push_back(secondsSince(t0));
          const auto t1 = Clock::now();
          memcpy(to + offset, from + offset, kStep);
          copy.push_back(secondsSince(t1));
        }
        shared[1].store(1);
        free(to);
        free(from);
        return 0.0;
      });
  if (cma.size() > kBytes / kStep) {  // the first pass over the buffers is not counted
    cma.erase(cma.begin(), cma.begin() + kBytes / kStep);
    copy.erase(copy.begin(), copy.begin() + kBytes / kStep);
    std::sort(cma.begin(), cma.end());
    std::sort(copy.begin(), copy.end());
    const double c = cma[cma.size() / 2], m = copy[copy.size() / 2];
    printf(
        "one copy from another process (process_vm_readv of 1 MiB, %s): %.2f GB/s, "
        "memcpy %.2f GB/s: %.0f ns more per 4 KiB page\n",
        hugePages ? "huge pages" : "4 KiB pages", kStep / c / 1e9, kStep / m / 1e9,
        (c - m) * 1e9 / (kStep / 4096));
  }
  munmap(shared, 4096);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--cache-line") == 0) {
    printf("cache_line_round_trip_ns %.0f\n", quickRoundTrip() * 1e9);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--lines") == 0) {
    printf("cache_line_round_trip_ns %.0f\n", quickRoundTrip() * 1e9);
    for (size_t kib : {64, 512, 2048}) dataLines(kib << 10);
    printf("cache_line_round_trip_after_ns %.0f\n", quickRoundTrip() * 1e9);
    return 0;
  }
  const long mib = argc > 1 ? atol(argv[1]) : 1024;
  if (mib <= 0) {
    fprintf(stderr, "usage: %s [MiB per TCP transfer, > 0]\n", argv[0]);
    return 2;
  }
  cacheLines();
  tcp(static_cast<size_t>(mib) << 20);
  tcpOneThread();
  memoryTraffic();
  singleCopy(false);
  singleCopy(true);
  return 0;
}
