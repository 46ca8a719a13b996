#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "src/base/error.h"
#include "src/base/logging.h"

namespace loom::transport::shm {
namespace {

std::atomic<uint64_t> fallocateOverride{0};

std::string randomName() {
  uint64_t bits[1] = {};
  // getrandom: a name nobody can predict, so no one can create it first or open it by guess.
  if (getrandom(bits, sizeof(bits), 0) != static_cast<ssize_t>(sizeof(bits)))
    throwSystemError("getrandom for a shared-memory segment name", errno);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(bits[0]));
  return "/" + segmentNamePrefix(static_cast<long>(getpid())) + hex;
}

[[noreturn]] void throwNoSpace(const std::string& name, size_t bytes, int err) {
  std::string room;
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) == 0 && fs.f_blocks > 0) {
    room = strCat("; /dev/shm has ", static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize,
                  " bytes free of ", static_cast<unsigned long long>(fs.f_blocks) * fs.f_frsize);
  }
  throw SystemError(strCat(
      "cannot reserve ", bytes, " bytes of shared memory in /dev/shm for segment ", name, " (",
      std::strerror(err), room,
      "). /dev/shm is too small for the shm transport: enlarge it (as root: mount -o "
      "remount,size=<bytes> /dev/shm; in Docker: docker run --shm-size=<bytes>; in Kubernetes: "
      "an emptyDir volume with medium: Memory mounted at /dev/shm), lower LOOM_BUFFSIZE "
      "(bytes per connection and direction), or set LOOM_SHM_DISABLE=1 to use TCP between "
      "ranks of one host"));
}

void* mapShared(int fd, size_t bytes, const std::string& name) {
  // MAP_POPULATE faults every page in now, once per connection, never per message.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) throwSystemError(strCat("mmap of shared-memory segment ", name), errno);
  return p;
}

}  // namespace

std::string segmentNamePrefix(long pid) { return strCat("loom-", pid, "-"); }

ShmSegment ShmSegment::create(size_t bytes) {
  ShmSegment s;
  s.name_ = randomName();
  int fd = shm_open(s.name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throwSystemError(strCat("shm_open(", s.name_, ") in /dev/shm"), errno);
  s.fd_ = fd;  // the destructor closes it from here on
  s.creator_ = true;
  s.linked_ = true;  // from here on the destructor removes the name if anything fails

  // posix_fallocate, not just ftruncate: ftruncate makes a sparse file that /dev/shm may be
  // unable to back, and the first touch of a missing page is a SIGBUS. This fails now instead.
  uint64_t override = fallocateOverride.load(std::memory_order_relaxed);
  auto reserve = static_cast<off_t>(override != 0 ? override : bytes);
  int err;
  do {
    err = posix_fallocate(fd, 0, reserve);
  } while (err == EINTR);
  if (err == ENOSPC || err == EFBIG) throwNoSpace(s.name_, static_cast<size_t>(reserve), err);
  if (err != 0)
    throwSystemError(strCat("posix_fallocate of ", reserve, " bytes for ", s.name_), err);

  s.data_ = mapShared(fd, bytes, s.name_);
  s.size_ = bytes;
  std::memset(s.data_, 0, bytes);  // already zero; the write makes every page ours, now
  s.holdMark();
  LOOM_TRACE(kLogShm, "created shared-memory segment ", s.name_, " of ", bytes, " bytes");
  return s;
}

ShmSegment ShmSegment::attach(const std::string& name, size_t bytes) {
  ShmSegment s;
  s.name_ = name;
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  s.linked_ = fd >= 0;  // either side may remove the name; the first to do so wins
  if (fd < 0) {
    throwSystemError(strCat("shm_open(", name,
                            ") of a peer's segment in /dev/shm (do both ranks "
                            "see the same /dev/shm? Containers need a shared IPC namespace, "
                            "e.g. docker run --ipc=host; else set LOOM_SHM_DISABLE=1)"),
                     errno);
  }
  s.fd_ = fd;
  struct stat st {};
  if (fstat(fd, &st) != 0) throwSystemError(strCat("fstat of ", name), errno);
  LOOM_ENFORCE(static_cast<size_t>(st.st_size) >= bytes, SystemError, "shared-memory segment ",
               name, " holds ", st.st_size, " bytes where ", bytes, " were expected");
  s.data_ = mapShared(fd, bytes, name);
  s.size_ = bytes;
  s.holdMark();
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
    LOOM_INFO(kLogShm, "F_OFD_SETLK on ", name_, ": ", std::strerror(errno),
              " (a peer that dies will only be noticed by the timeout)");
}

bool ShmSegment::peerHoldsIt() const {
  if (!marked_) return true;
  struct flock lock = markRange(!creator_, F_WRLCK);  // would a write lock on its mark conflict?
  if (fcntl(fd_, F_OFD_GETLK, &lock) != 0) return true;
  return lock.l_type != F_UNLCK;
}

void checkPeerHolds(const ShmSegment& segment, int peer) {
  LOOM_ENFORCE(segment.peerHoldsIt(), RemoteError, "rank ", peer,
               " is gone: its process no longer holds the shared memory of its connection with "
               "this rank (did it exit or crash?)");
}

void ShmSegment::unlink() {
  if (!linked_) return;
  linked_ = false;
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT)
    LOOM_WARN(kLogShm, "shm_unlink(", name_, "): ", std::strerror(errno));
}

void ShmSegment::release() noexcept {
  if (linked_) {
    linked_ = false;
    shm_unlink(name_.c_str());
  }
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);  // drops our mark
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
  marked_ = false;
}

ShmSegment::~ShmSegment() { release(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      name_(std::move(other.name_)),
      fd_(std::exchange(other.fd_, -1)),
      creator_(other.creator_),
      marked_(std::exchange(other.marked_, false)),
      linked_(std::exchange(other.linked_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    name_ = std::move(other.name_);
    fd_ = std::exchange(other.fd_, -1);
    creator_ = other.creator_;
    marked_ = std::exchange(other.marked_, false);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

namespace testing {
void setFallocateBytesOverride(uint64_t bytes) {
  fallocateOverride.store(bytes, std::memory_order_relaxed);
}
}  // namespace testing

}  // namespace loom::transport::shm
