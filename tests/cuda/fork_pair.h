// Two ranks as two processes of a test: the test process is rank 0 and a forked child rank 1.
// The fork comes before this process starts any thread (the unique id's root listener is one):
// a child forked while another thread holds a lock, such as a sanitizer's allocator lock, can
// deadlock. The child gets the id through a pipe. As with CUDA, whose state a forked child
// cannot use, the process must not have used the device runtime before: run such a test in a
// process of its own (ctest does).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "loom/loom.h"

namespace loom::test {

struct ForkedPair {
  int parent = -1;       // what rank(0, id) returned
  int childStatus = -1;  // the child's exit status (rank(1, id)), or -1 when it did not exit
};

// Runs rank(r, id) in both processes; rank returns 0 on success, else a code saying where it
// failed (the child exits with it).
inline ForkedPair runForkedPair(const std::function<int(int rank, const loomUniqueId& id)>& rank) {
  ForkedPair out;
  int idPipe[2];
  if (pipe(idPipe) != 0) return out;
  const pid_t child = fork();
  if (child < 0) return out;
  if (child == 0) {
    close(idPipe[1]);
    loomUniqueId id;
    const bool got = read(idPipe[0], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id));
    _exit(got ? rank(1, id) : 100);
  }
  close(idPipe[0]);
  loomUniqueId id;
  const bool sent = loomGetUniqueId(&id) == loomSuccess &&
                    write(idPipe[1], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id));
  close(idPipe[1]);
  out.parent = sent ? rank(0, id) : 101;
  int status = 0;
  if (waitpid(child, &status, 0) == child && WIFEXITED(status))
    out.childStatus = WEXITSTATUS(status);
  return out;
}

}  // namespace loom::test
