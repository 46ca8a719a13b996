#include "src/core/host_stream.h"

#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/handle_registry.h"
#include "src/core/logging.h"

namespace loom {

HostStream::HostStream(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {
  worker_ = std::thread([this] { serve(); });
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

uint64_t HostStream::enqueue(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ != loomSuccess)
    throw Error(error_, strCat("the stream failed earlier and accepts no more work: ",
                               errorMessage_, ". Destroy it and create a new one"));
  queue_.push_back(std::move(work));
  ++enqueued_;
  changed_.notify_all();
  return enqueued_;
}

uint64_t HostStream::enqueued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

void HostStream::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything enqueued has run
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    bool failed = error_ != loomSuccess;
    lock.unlock();
    loomResult_t code = loomSuccess;
    std::string message;
    if (!failed) {
      try {
        work();
      } catch (const Error& e) {
        code = e.code();
        message = e.what();
      } catch (const std::exception& e) {
        code = loomInternalError;
        message = e.what();
      }
    }
    work = nullptr;  // release what the item captured before reporting completion
    lock.lock();
    if (code != loomSuccess && error_ == loomSuccess) {
      error_ = code;
      errorMessage_ = message;
      comm_->setLastError(message);
      LOOM_WARN(kLogColl, "stream operation failed: ", message);
    }
    ++completed_;
    changed_.notify_all();
  }
}

loomResult_t HostStream::query(uint64_t position) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ != loomSuccess) return error_;
  return completed_ >= position ? loomSuccess : loomInProgress;
}

loomResult_t HostStream::wait(uint64_t position) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return completed_ >= position; });
  return error_;
}

std::string HostStream::errorMessage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errorMessage_;
}

void HostEvent::record(std::shared_ptr<HostStream> stream) {
  uint64_t position = stream->enqueued();
  std::lock_guard<std::mutex> lock(mutex_);
  stream_ = std::move(stream);
  position_ = position;
}

loomResult_t HostEvent::query() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream_ ? stream_->query(position_) : loomSuccess;
}

loomResult_t HostEvent::wait() const {
  std::shared_ptr<HostStream> stream;
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stream = stream_;
    position = position_;
  }
  return stream ? stream->wait(position) : loomSuccess;
}

namespace {

HandleRegistry<loomStream, HostStream>& streams() {
  static auto* table = new HandleRegistry<loomStream, HostStream>("stream");
  return *table;
}
HandleRegistry<loomEvent, HostEvent>& events() {
  static auto* table = new HandleRegistry<loomEvent, HostEvent>("event");
  return *table;
}

}  // namespace

loomStream* registerStream(std::shared_ptr<HostStream> s) { return streams().add(std::move(s)); }
std::shared_ptr<HostStream> findStream(const loomStream* h) { return streams().find(h); }
std::shared_ptr<HostStream> unregisterStream(const loomStream* h) { return streams().remove(h); }
loomEvent* registerEvent(std::shared_ptr<HostEvent> e) { return events().add(std::move(e)); }
std::shared_ptr<HostEvent> findEvent(const loomEvent* h) { return events().find(h); }
std::shared_ptr<HostEvent> unregisterEvent(const loomEvent* h) { return events().remove(h); }

}  // namespace loom
