#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/mem/memfd.h"

namespace loom::transport::shm {
namespace {

// The check word (fd_passing.h) lies just past the mapped bytes.
constexpr size_t kCheckBytes = sizeof(uint64_t);

std::atomic<int> reserveError{0};

[[noreturn]] void throwNoMemory(size_t bytes, int err) {
  throw SystemError(strCat(
      "cannot reserve ", bytes, " bytes of memory for a shared-memory ring (", std::strerror(err),
      "): the host, or this process's memory cgroup (a container's memory limit, which these "
      "pages count against), has no room. The size of /dev/shm plays no part. Lower "
      "LOOM_BUFFSIZE (bytes per connection and direction), give the job more memory, or set "
      "LOOM_SHM_DISABLE=1 to use TCP between ranks of one host"));
}

void* mapShared(int fd, size_t bytes) {
  // MAP_POPULATE faults every page in now, once per connection, never per message.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    throwSystemError(strCat("mmap of a shared ring of ", bytes, " bytes"), errno);
  return p;
}

// A new open file description of the file that `fd` refers to (see the lock bytes in
// shm_segment.h), or -1 where /proc is not there to reopen it.
int reopen(int fd) { return open(strCat("/proc/self/fd/", fd).c_str(), O_RDWR | O_CLOEXEC); }

// Logs once per owner process that its rings come through its fd server.
void noteServerRoute(const SegmentHandle& handle, int peer, const std::string& why) {
  static std::mutex mutex;
  static std::set<uint64_t>* noted = new std::set<uint64_t>;
  std::lock_guard<std::mutex> lock(mutex);
  if (noted->size() >= 1024 || !noted->insert(handle.owner.token).second) return;
  LOOM_INFO(kLogShm, "rank ", peer, " (pid ", handle.owner.pid,
            "): this process may not take its fds with pidfd_getfd (", why,
            "), so shared rings come from its fd server by SCM_RIGHTS");
}

// A peer that exited is a remote failure, not this host's: the caller's error path then waits for
// the job's verdict, which names the rank that failed first (its exit may follow from that).
[[noreturn]] void throwOwnerGone(const SegmentHandle& handle, int peer) {
  throw RemoteError(
      strCat("rank ", peer, " (pid ", handle.owner.pid,
             ") exited before this rank took its shared ring (did it exit or crash?)"));
}

// The owner's fd for the segment: the number itself in this process, else by pidfd, else by
// SCM_RIGHTS. The result may share its open file description with the owner's.
int importFd(const SegmentHandle& handle, int peer) {
  const ProcessIdentity me = thisProcess();
  if (handle.owner.token == me.token && handle.owner.pid == me.pid) {
    const int fd = fcntl(handle.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throwSystemError(strCat("duplicating the shared ring of rank ", peer), errno);
    return fd;
  }
  std::string whyNotPidfd;
  if (std::shared_ptr<PeerProcess> owner = PeerProcess::open(handle.owner, &whyNotPidfd)) {
    const int fd = owner->takeFd(handle.fd);
    if (fd >= 0) return fd;
    if (errno == ESRCH) throwOwnerGone(handle, peer);
    whyNotPidfd = strCat("pidfd_getfd: ", std::strerror(errno));
  } else {
    noteServerRoute(handle, peer, whyNotPidfd);
  }
  std::string whyNotServer;
  const int fd = fetchOfferedFd(handle.ticket, handle.owner.pid, &whyNotServer);
  if (fd >= 0) return fd;
  if (::kill(handle.owner.pid, 0) != 0 && errno == ESRCH) throwOwnerGone(handle, peer);
  throw SystemError(strCat("cannot get the shared ring of rank ", peer, " (pid ", handle.owner.pid,
                           "): ", whyNotPidfd, "; SCM_RIGHTS: ", whyNotServer,
                           ". Set LOOM_SHM_DISABLE=1 to use TCP between ranks of one host"));
}

}  // namespace

ShmSegment ShmSegment::create(size_t bytes) {
  ShmSegment s;
  s.creator_ = true;
  s.fd_ = createSealedMemfd("loom-ring", bytes + kCheckBytes, "a shared-memory ring");
  // Reserved, not just sized: a page that cannot be had would otherwise be a SIGBUS at its
  // first touch, here or in the peer. This fails now instead.
  const int injected = reserveError.load(std::memory_order_relaxed);
  const int err = injected != 0 ? injected : reserveMemfd(s.fd_, bytes + kCheckBytes);
  if (err == ENOMEM || err == ENOSPC || err == EFBIG) throwNoMemory(bytes, err);
  if (err != 0) throwSystemError(strCat("fallocate of a shared ring of ", bytes, " bytes"), err);
  s.data_ = mapShared(s.fd_, bytes);
  s.size_ = bytes;
  std::memset(s.data_, 0, bytes);  // already zero; the write makes every page ours, now
  s.holdMark();
  s.offer_ = FdOffer::make(s.fd_);
  s.handle_.owner = thisProcess();
  s.handle_.fd = s.fd_;
  s.handle_.ownerMarked = s.marked_ ? 1 : 0;
  s.handle_.bytes = bytes;
  s.handle_.ticket = s.offer_.ticket();
  const uint64_t check = s.handle_.ticket.check;
  if (pwrite(s.fd_, &check, sizeof(check), static_cast<off_t>(bytes)) != sizeof(check))
    throwSystemError("writing a shared ring's check word", errno);
  LOOM_TRACE(kLogShm, "created a shared ring of ", bytes, " bytes (memfd ", s.fd_, ")");
  return s;
}

ShmSegment ShmSegment::attach(const SegmentHandle& handle, size_t bytes, int peer) {
  ShmSegment s;
  LOOM_ENFORCE(handle.bytes == bytes, RemoteError, "rank ", peer, " announced a shared ring of ",
               handle.bytes, " bytes where ", bytes, " were expected");
  s.fd_ = importFd(handle, peer);  // the destructor closes it from here on
  // Checked before anything else touches it: a wrong number may name any file of the owner.
  const std::optional<MemfdInfo> info = sealedMemfd(s.fd_);
  uint64_t check = 0;
  const bool right = info && info->size == bytes + kCheckBytes &&
                     pread(s.fd_, &check, sizeof(check), static_cast<off_t>(bytes)) ==
                         static_cast<ssize_t>(sizeof(check)) &&
                     check == handle.ticket.check;
  LOOM_ENFORCE(right, RemoteError, "the fd that came for the shared ring of rank ", peer,
               " is not the ring it announced (another process's file?)");
  // A description of our own, so that our lock byte is ours (shm_segment.h).
  const int own = reopen(s.fd_);
  struct stat sb = {};
  if (own >= 0 && fstat(own, &sb) == 0 && sb.st_ino == info->inode && sb.st_dev == info->device) {
    close(s.fd_);
    s.fd_ = own;
    s.holdMark();
  } else {
    LOOM_INFO(kLogShm, "cannot reopen the shared ring of rank ", peer, " through /proc (",
              std::strerror(errno), "): a peer that dies will only be noticed by the timeout");
    if (own >= 0) close(own);
  }
  s.data_ = mapShared(s.fd_, bytes);
  s.size_ = bytes;
  s.peerMarked_ = handle.ownerMarked != 0;
  return s;
}

namespace {
struct flock markRange(bool creatorsMark, short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = creatorsMark ? 0 : 1;
  lock.l_len = 1;
  return lock;
}
}  // namespace

void ShmSegment::holdMark() {
  struct flock lock = markRange(creator_, F_RDLCK);
  marked_ = fcntl(fd_, F_OFD_SETLK, &lock) == 0;
  if (!marked_)
    LOOM_INFO(kLogShm, "F_OFD_SETLK on a shared ring: ", std::strerror(errno),
              " (a peer that dies will only be noticed by the timeout)");
}

void ShmSegment::peerAttached(bool peerMarked) {
  offer_.withdraw();
  peerMarked_ = peerMarked;
}

bool ShmSegment::peerHoldsIt() const {
  if (!marked_ || !peerMarked_) return true;
  struct flock lock = markRange(!creator_, F_WRLCK);  // would a write lock on its mark conflict?
  if (fcntl(fd_, F_OFD_GETLK, &lock) != 0) return true;
  return lock.l_type != F_UNLCK;
}

void checkPeerHolds(const ShmSegment& segment, int peer) {
  LOOM_ENFORCE(segment.peerHoldsIt(), RemoteError, "rank ", peer,
               " is gone: its process no longer holds the shared memory of its connection with "
               "this rank (did it exit or crash?)");
}

void ShmSegment::release() noexcept {
  offer_.withdraw();
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);  // drops our mark
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
  marked_ = false;
  peerMarked_ = false;
}

ShmSegment::~ShmSegment() { release(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      creator_(other.creator_),
      marked_(std::exchange(other.marked_, false)),
      peerMarked_(std::exchange(other.peerMarked_, false)),
      handle_(other.handle_),
      offer_(std::move(other.offer_)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    creator_ = other.creator_;
    marked_ = std::exchange(other.marked_, false);
    peerMarked_ = std::exchange(other.peerMarked_, false);
    handle_ = other.handle_;
    offer_ = std::move(other.offer_);
  }
  return *this;
}

namespace testing {
void setReserveError(int err) { reserveError.store(err, std::memory_order_relaxed); }
}  // namespace testing

}  // namespace loom::transport::shm
