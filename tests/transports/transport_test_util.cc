#include "tests/transports/transport_test_util.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "src/base/strings.h"

namespace loom::transport::test {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: cheap, and every input bit matters
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t seedOf(int sender, int channel, uint64_t step) {
  return mix((static_cast<uint64_t>(sender) << 48) ^ (static_cast<uint64_t>(channel) << 40) ^ step);
}

// Byte `offset` of the pattern: byte offset % 8 of word offset / 8.
uint8_t patternByte(uint64_t seed, size_t offset) {
  return static_cast<uint8_t>(mix(seed + offset / 8) >> (8 * (offset % 8)));
}

struct SendSide {
  SendConnection* conn;
  int sender;
  int channel;
  uint64_t next = 0;
};

struct RecvSide {
  RecvConnection* conn;
  int sender;
  int channel;
  uint64_t next = 0;
};

// Fills and posts the next step if a slot is free; true if it did.
bool postOne(SendSide& s) {
  void* slot = s.conn->tryAcquire();
  if (slot == nullptr) return false;
  size_t n = stepBytes(s.conn->slotBytes(), s.sender, s.channel, s.next);
  fillStep(slot, n, s.sender, s.channel, s.next);
  s.conn->post(n, stepTag(s.sender, s.channel, s.next));
  ++s.next;
  return true;
}

}  // namespace

size_t stepBytes(size_t slotBytes, int sender, int channel, uint64_t step) {
  switch (step % 8) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return slotBytes;
    case 3:
      return slotBytes - 1;
    case 4:
      return 7;
    case 5:
      return std::min<size_t>(4096 + 3, slotBytes);
    default:
      return seedOf(sender, channel, step) % (slotBytes + 1);
  }
}

void fillStep(void* data, size_t bytes, int sender, int channel, uint64_t step) {
  uint64_t seed = seedOf(sender, channel, step);
  auto* out = static_cast<uint8_t*>(data);
  size_t words = bytes / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = mix(seed + w);
    std::memcpy(out + 8 * w, &v, 8);
  }
  for (size_t i = 8 * words; i < bytes; ++i) out[i] = patternByte(seed, i);
}

std::string checkStep(const void* data, size_t bytes, int sender, int channel, uint64_t step) {
  uint64_t seed = seedOf(sender, channel, step);
  const auto* in = static_cast<const uint8_t*>(data);
  size_t words = bytes / 8;
  size_t i = 0;
  for (size_t w = 0; w < words; ++w) {  // words first (fast); the byte loop finds the culprit
    uint64_t v = mix(seed + w), got;
    std::memcpy(&got, in + 8 * w, 8);
    if (got != v) {
      i = 8 * w;
      break;
    }
    i = 8 * (w + 1);
  }
  for (; i < bytes; ++i) {
    if (in[i] != patternByte(seed, i)) {
      return strCat("rank ", sender, " channel ", channel, " step ", step, ": byte ", i, " of ",
                    bytes, " is ", int{in[i]}, ", expected ", int{patternByte(seed, i)});
    }
  }
  return "";
}

uint32_t stepTag(int sender, int channel, uint64_t step) {
  return static_cast<uint32_t>(seedOf(sender, channel, step) >> 32);
}

std::vector<ConnectionRequest> ringRequests(const Comm& comm, int channels, Protocol protocol,
                                            int firstChannel) {
  const int n = comm.nranks(), r = comm.rank();
  std::vector<ConnectionRequest> requests;
  for (int c = firstChannel; c < firstChannel + channels; ++c) {
    requests.push_back({(r + 1) % n, c, true, protocol});
    requests.push_back({(r + n - 1) % n, c, false, protocol});
  }
  return requests;
}

std::string exchange(Comm& comm, const std::vector<ConnectionRequest>& requests, Connections& conns,
                     uint64_t steps, std::chrono::seconds limit) {
  std::vector<SendSide> sends;
  std::vector<RecvSide> recvs;
  for (const ConnectionRequest& r : requests) {
    if (r.send) {
      sends.push_back({conns.sends[sends.size()].get(), comm.rank(), r.channel});
    } else {
      recvs.push_back({conns.recvs[recvs.size()].get(), r.peer, r.channel});
    }
  }
  // Fill the window, and check that it is exactly kSlots deep.
  for (SendSide& s : sends) {
    for (int i = 0; i < kSlots && s.next < steps; ++i) {
      if (!postOne(s)) return strCat("tryAcquire failed after ", i, " of ", kSlots, " slots");
    }
    if (s.next == static_cast<uint64_t>(kSlots) && s.conn->tryAcquire() != nullptr)
      return strCat("tryAcquire gave a slot with all ", kSlots, " slots in flight");
  }
  comm.bootstrap().barrier();

  auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool busy = false, moved = false;
    for (SendSide& s : sends) {
      if (s.next < steps) moved |= postOne(s);
      if (s.next < steps || !s.conn->drained()) {
        busy = true;
        moved |= s.conn->progress();
      }
    }
    for (RecvSide& r : recvs) {
      if (r.next >= steps) continue;
      busy = true;
      moved |= r.conn->progress();  // only while waiting: see SocketRecvConnection::progress
      size_t bytes = 0;
      uint32_t tag = 0;
      const void* data = r.conn->tryReceive(&bytes, &tag);
      if (data == nullptr) continue;
      moved = true;
      size_t want = stepBytes(r.conn->slotBytes(), r.sender, r.channel, r.next);
      if (bytes != want)
        return strCat("rank ", r.sender, " channel ", r.channel, " step ", r.next, ": ", bytes,
                      " bytes arrived, ", want, " expected");
      if (tag != stepTag(r.sender, r.channel, r.next))
        return strCat("rank ", r.sender, " channel ", r.channel, " step ", r.next, ": tag ", tag,
                      " arrived, ", stepTag(r.sender, r.channel, r.next), " expected");
      std::string bad = checkStep(data, bytes, r.sender, r.channel, r.next);
      if (!bad.empty()) return bad;
      r.conn->release();
      ++r.next;
    }
    if (!busy) return "";
    if (!moved) {
      if (std::chrono::steady_clock::now() > end) {
        std::string where;
        for (const SendSide& s : sends)
          where += strCat(" send ch", s.channel, " at ", s.next, s.conn->drained() ? "" : "+");
        for (const RecvSide& r : recvs)
          where += strCat(" recv from ", r.sender, " ch", r.channel, " at ", r.next);
        return "timed out:" + where;
      }
      std::this_thread::yield();  // other ranks may share our cores
    }
  }
}

std::vector<std::string> devShmNamesOf(long pid) {
  std::vector<std::string> found;
  const std::string prefix = strCat("loom-", pid, "-");
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) found.emplace_back(e->d_name);
  }
  closedir(dir);
  return found;
}

int ringMemfdsOf(long pid) {
  const std::string dirName = strCat("/proc/", pid, "/fd");
  DIR* dir = opendir(dirName.c_str());
  if (dir == nullptr) return 0;
  int found = 0;
  const std::string ring = "/memfd:loom-ring";
  while (dirent* e = readdir(dir)) {
    char target[256] = {};
    const std::string link = dirName + "/" + e->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 &&
        std::strncmp(target, ring.c_str(), ring.size()) == 0)
      ++found;
  }
  closedir(dir);
  return found;
}

}  // namespace loom::transport::test
