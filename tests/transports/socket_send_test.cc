// The socket transport's send side (transports/socket/socket_connection.h) on a local socket
// pair: a step posted by address (zero-copy) is read from the caller's buffer until it has
// wholly left, and dropPostedSteps() - a failed call about to return, its buffers about to be
// freed - ends that: no byte of the buffer is read after the drop.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "src/base/error.h"
#include "transports/socket/socket_connection.h"

namespace loom::transport::test {
namespace {

constexpr size_t kSlotBytes = 1 << 20;
constexpr size_t kStepBytes = 512 * 1024;  // more than a socket pair's buffers hold

struct Pair {
  Socket sender, receiver;
};

Pair socketPair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw SystemError("socketpair failed");
  for (int fd : fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return {Socket(fds[0]), Socket(fds[1])};
}

// Reads what is in the receiver's socket now.
std::vector<uint8_t> readAvailable(Socket& s) {
  std::vector<uint8_t> got, chunk(64 * 1024);
  for (;;) {
    const long n = s.recvSome(chunk.data(), chunk.size());
    if (n <= 0) return got;
    got.insert(got.end(), chunk.begin(), chunk.begin() + n);
  }
}

TEST(SocketSend, DroppedStepIsNeverReadAgain) {
  Pair pair = socketPair();
  std::vector<Socket> streams;
  streams.push_back(std::move(pair.sender));
  SocketSendConnection send(std::move(streams), kSlotBytes, LinkName{0, 1, 0});
  std::vector<uint8_t> buffer(kStepBytes, 0xAB);
  const StepMemory step{buffer.data(), buffer.size(), nullptr, false};
  ASSERT_TRUE(send.acceptsStep(step));
  ASSERT_NE(send.tryAcquire(), nullptr);
  send.postStep(step, 7);
  send.progress();
  ASSERT_FALSE(send.drained()) << "the step must still be partly in the buffer for this test";
  std::vector<uint8_t> wire = readAvailable(pair.receiver);
  ASSERT_GT(wire.size(), sizeof(SlotHeader));

  send.dropPostedSteps();
  EXPECT_TRUE(send.drained()) << "nothing is left to wait for";
  std::fill(buffer.begin(), buffer.end(), 0xCD);  // what a freed and reused buffer may hold
  EXPECT_THROW(send.progress(), RemoteError);
  EXPECT_THROW(send.progress(), RemoteError) << "every later use fails";
  const std::vector<uint8_t> after = readAvailable(pair.receiver);
  wire.insert(wire.end(), after.begin(), after.end());
  EXPECT_LT(wire.size(), sizeof(SlotHeader) + kStepBytes);
  for (size_t i = sizeof(SlotHeader); i < wire.size(); ++i)
    ASSERT_EQ(wire[i], 0xAB) << "byte " << i << " of the wire was read after the drop";
}

TEST(SocketSend, DropKeepsAConnectionWhoseStepsLeft) {
  Pair pair = socketPair();
  std::vector<Socket> streams;
  streams.push_back(std::move(pair.sender));
  SocketSendConnection send(std::move(streams), kSlotBytes, LinkName{0, 1, 0});
  std::vector<uint8_t> buffer(8192, 0x11);
  const StepMemory step{buffer.data(), buffer.size(), nullptr, false};
  ASSERT_NE(send.tryAcquire(), nullptr);
  send.postStep(step, 7);
  while (!send.drained()) send.progress();  // small enough for the socket's buffer
  send.dropPostedSteps();
  // Nothing was cut short: the connection goes on.
  void* slot = send.tryAcquire();
  ASSERT_NE(slot, nullptr);
  std::memset(slot, 0x22, 16);
  send.post(16, 8);
  EXPECT_NO_THROW(while (!send.drained()) send.progress());
  const std::vector<uint8_t> wire = readAvailable(pair.receiver);
  EXPECT_EQ(wire.size(), 2 * sizeof(SlotHeader) + 8192 + 16);
}

}  // namespace
}  // namespace loom::transport::test
