#include "src/mem/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "src/base/error.h"

namespace loom {

int createSealedMemfd(const char* name, size_t bytes, const char* what) {
  LOOM_ENFORCE(bytes > 0, InternalError, "a memfd of 0 bytes for ", what);
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throwSystemError(strCat("memfd_create for ", what), errno);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    throwSystemError(strCat("sizing the memfd of ", bytes, " bytes for ", what), err);
  }
  return fd;
}

int reserveMemfd(int fd, size_t bytes) {
  int err;
  do {
    err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (err == EINTR);
  return err;
}

std::optional<MemfdInfo> sealedMemfd(int fd) {
  constexpr int kSized = F_SEAL_SHRINK | F_SEAL_GROW;
  struct stat sb = {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSized) != kSized || fstat(fd, &sb) != 0) return std::nullopt;
  return MemfdInfo{static_cast<size_t>(sb.st_size), sb.st_dev, sb.st_ino};
}

}  // namespace loom
