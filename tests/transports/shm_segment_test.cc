// The shared ring's memory (transports/shm/shm_segment.h) and how its fd reaches the peer
// (fd_passing.h): one memory without a name, the check word that refuses any other file, the
// fd server's once-only offers, the out-of-memory error, and the lock bytes that tell whether
// the peer still holds the ring, between threads and between processes killed with SIGKILL,
// with the fd passed by pidfd_getfd and by SCM_RIGHTS.
#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>

#include "src/base/error.h"
#include "src/base/strings.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/shm/fd_passing.h"

namespace loom::transport::test {
namespace {

using loom::test::contains;

constexpr size_t kBytes = 3 * 4096;

ino_t inodeOf(int fd) {
  struct stat sb = {};
  return fstat(fd, &sb) == 0 ? sb.st_ino : 0;
}

TEST(ShmSegment, ThreadsShareOneMemoryWithoutAName) {
  const long pid = getpid();
  {
    shm::ShmSegment created = shm::ShmSegment::create(kBytes);
    shm::ShmSegment attached = shm::ShmSegment::attach(created.handle(), kBytes, 1);
    static_cast<char*>(created.data())[5000] = 42;
    EXPECT_EQ(static_cast<char*>(attached.data())[5000], 42);  // one memory, two mappings
    EXPECT_EQ(ringMemfdsOf(pid), 2);                           // each side's
    EXPECT_EQ(devShmNamesOf(pid), std::vector<std::string>{});
  }
  EXPECT_EQ(ringMemfdsOf(pid), 0);
}

// Each side holds a lock byte on an open file description of its own, even in one process:
// the peer's lock shows while it holds the ring and vanishes when it lets go.
TEST(ShmSegment, LockBytesShowWhetherThePeerHoldsIt) {
  shm::ShmSegment created = shm::ShmSegment::create(kBytes);
  EXPECT_TRUE(created.peerHoldsIt());  // no peer yet: nothing to say
  auto attached =
      std::make_unique<shm::ShmSegment>(shm::ShmSegment::attach(created.handle(), kBytes, 1));
  ASSERT_TRUE(created.marked());
  ASSERT_TRUE(attached->marked());
  created.peerAttached(attached->marked());
  EXPECT_TRUE(created.peerHoldsIt());
  EXPECT_TRUE(attached->peerHoldsIt());
  attached.reset();
  EXPECT_FALSE(created.peerHoldsIt());
  EXPECT_PRED2(contains,
               loom::test::messageOf<RemoteError>([&] { shm::checkPeerHolds(created, 1); }),
               "rank 1 is gone");
}

// What comes for a ring must be that ring: another file, or a wrong check word, is refused.
TEST(ShmSegment, AnythingButTheAnnouncedRingIsRefused) {
  shm::ShmSegment created = shm::ShmSegment::create(kBytes);
  shm::SegmentHandle wrongCheck = created.handle();
  wrongCheck.ticket.check ^= 1;
  EXPECT_PRED2(contains, loom::test::messageOf<RemoteError>([&] {
                 shm::ShmSegment::attach(wrongCheck, kBytes, 3);
               }),
               "is not the ring it announced");
  shm::ShmSegment other = shm::ShmSegment::create(kBytes);
  shm::SegmentHandle otherFile = created.handle();
  otherFile.fd = other.handle().fd;
  EXPECT_PRED2(contains, loom::test::messageOf<RemoteError>([&] {
                 shm::ShmSegment::attach(otherFile, kBytes, 3);
               }),
               "rank 3 is not the ring it announced");
  EXPECT_PRED2(contains, loom::test::messageOf<RemoteError>([&] {
                 shm::ShmSegment::attach(created.handle(), 2 * kBytes, 3);
               }),
               "announced a shared ring of");
}

TEST(ShmSegment, OutOfMemoryNamesTheRemedy) {
  shm::testing::setReserveError(ENOMEM);
  const std::string error =
      loom::test::messageOf<SystemError>([] { shm::ShmSegment::create(4096); });
  shm::testing::setReserveError(0);
  EXPECT_PRED2(contains, error, "cannot reserve 4096 bytes of memory for a shared-memory ring");
  EXPECT_PRED2(contains, error, "memory cgroup");
  EXPECT_PRED2(contains, error, "/dev/shm plays no part");
  EXPECT_PRED2(contains, error, "LOOM_BUFFSIZE");
  EXPECT_PRED2(contains, error, "LOOM_SHM_DISABLE=1");
  EXPECT_EQ(ringMemfdsOf(getpid()), 0);
}

// A container's 64 MB /dev/shm (here: a 64 KiB one, in a mount namespace of a child process)
// limits no ring: rings are not in /dev/shm. Needs CAP_SYS_ADMIN for the namespace, else skips.
TEST(ShmSegment, DevShmSizeDoesNotLimitRings) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=64k") != 0)
      _exit(2);
    try {
      shm::ShmSegment created = shm::ShmSegment::create(size_t{16} << 20);
      shm::ShmSegment attached = shm::ShmSegment::attach(created.handle(), size_t{16} << 20, 1);
      static_cast<char*>(created.data())[(size_t{16} << 20) - 1] = 5;
      _exit(static_cast<char*>(attached.data())[(size_t{16} << 20) - 1] == 5 ? 0 : 3);
    } catch (const std::exception&) {
      _exit(4);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "no mount namespace here (needs CAP_SYS_ADMIN)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a 16 MiB ring failed beside a 64 KiB /dev/shm";
}

// The fd server hands an offered fd out once, to the one request word that names it.
TEST(FdServer, HandsAnOfferOutOnceToItsTicketOnly) {
  const int fd = memfd_create("fd-server-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  shm::FdOffer offer = shm::FdOffer::make(fd);
  std::string why;
  shm::FdTicket guess = offer.ticket();
  guess.request ^= 1;
  EXPECT_EQ(shm::fetchOfferedFd(guess, getpid(), &why), -1);
  EXPECT_PRED2(contains, why, "no such offer");
  const int got = shm::fetchOfferedFd(offer.ticket(), getpid(), &why);
  ASSERT_GE(got, 0) << why;
  EXPECT_EQ(inodeOf(got), inodeOf(fd));
  EXPECT_NE(fcntl(got, F_GETFD) & FD_CLOEXEC, 0);
  close(got);
  EXPECT_EQ(shm::fetchOfferedFd(offer.ticket(), getpid(), &why), -1);  // taken already
  EXPECT_PRED2(contains, why, "no such offer");

  shm::FdOffer withdrawn = shm::FdOffer::make(fd);
  withdrawn.withdraw();
  EXPECT_EQ(shm::fetchOfferedFd(withdrawn.ticket(), getpid(), &why), -1);
  shm::FdTicket nowhere = offer.ticket();
  std::snprintf(nowhere.server, sizeof(nowhere.server), "loom-fd-%d-1", getpid());
  EXPECT_EQ(shm::fetchOfferedFd(nowhere, getpid(), &why), -1);
  EXPECT_PRED2(contains, why, "connecting to its fd server");
  // Only the owner's fd server is ever asked, whatever a blob names.
  EXPECT_EQ(shm::fetchOfferedFd(offer.ticket(), getpid() + 1, &why), -1);
  EXPECT_PRED2(contains, why, "names no fd server of process");
  close(fd);
}

// ---- Between processes ----------------------------------------------------------------------

// Reads exactly `bytes` from a pipe (false at EOF).
bool readAll(int fd, void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Which side the forked child plays, and how the importer gets the fd.
using Case = std::tuple<bool, bool>;  // child creates, by SCM_RIGHTS

class ShmSegmentProcess : public ::testing::TestWithParam<Case> {};

// The peer process imports (or creates) the ring, proves it sees our bytes, holds it, and is
// SIGKILLed: its lock byte is then gone, and nothing of the ring is left anywhere.
TEST_P(ShmSegmentProcess, PeerKilledLosesItsLock) {
  const auto [childCreates, scm] = GetParam();
  int toParent[2];
  ASSERT_EQ(pipe(toParent), 0);
  std::optional<shm::ShmSegment> created;
  if (!childCreates) {
    created = shm::ShmSegment::create(kBytes);
    static_cast<char*>(created->data())[100] = 7;
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: no gtest here; it reports through the pipe and is killed in pause().
    try {
      shm::testing::refusePidfd(scm);
      if (childCreates) {
        shm::ShmSegment mine = shm::ShmSegment::create(kBytes);
        static_cast<char*>(mine.data())[100] = 9;
        const shm::SegmentHandle h = mine.handle();
        if (write(toParent[1], &h, sizeof(h)) != sizeof(h)) _exit(3);
        for (;;) pause();
      }
      shm::ShmSegment mine = shm::ShmSegment::attach(created->handle(), kBytes, 0);
      const char seen[2] = {static_cast<const char*>(mine.data())[100], mine.marked() ? '1' : '0'};
      if (write(toParent[1], seen, 2) != 2) _exit(3);
      for (;;) pause();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      (void)!write(2, what.data(), what.size());
      _exit(4);
    }
  }
  close(toParent[1]);
  std::optional<shm::ShmSegment> attached;
  if (childCreates) {
    shm::SegmentHandle h;
    ASSERT_TRUE(readAll(toParent[0], &h, sizeof(h)));
    shm::testing::refusePidfd(scm);
    try {
      attached = shm::ShmSegment::attach(h, kBytes, 1);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
    shm::testing::refusePidfd(false);
    ASSERT_TRUE(attached.has_value());
    EXPECT_EQ(static_cast<char*>(attached->data())[100], 9);
    EXPECT_TRUE(attached->marked());
    EXPECT_TRUE(attached->peerHoldsIt());
  } else {
    char seen[2] = {};
    ASSERT_TRUE(readAll(toParent[0], seen, 2));
    EXPECT_EQ(seen[0], 7);
    EXPECT_EQ(seen[1], '1');
    created->peerAttached(seen[1] == '1');
    EXPECT_TRUE(created->peerHoldsIt());
  }
  EXPECT_EQ(devShmNamesOf(child), std::vector<std::string>{});
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  shm::ShmSegment& ours = childCreates ? *attached : *created;
  EXPECT_FALSE(ours.peerHoldsIt());
  EXPECT_EQ(devShmNamesOf(child), std::vector<std::string>{});
  close(toParent[0]);
}

INSTANTIATE_TEST_SUITE_P(Routes, ShmSegmentProcess,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return strCat(std::get<0>(info.param) ? "ChildCreates" : "ParentCreates",
                                         std::get<1>(info.param) ? "_ScmRights" : "_Pidfd");
                         });

}  // namespace
}  // namespace loom::transport::test
