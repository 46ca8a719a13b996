// TEST DOUBLE: the soft NIC's completion queues and completion channels.
//
// A channel is a pipe: arming a CQ (ibv_req_notify_cq) makes the next matching completion write
// the CQ's handle into it, so the channel's fd turns readable exactly as a real one does, and
// ibv_get_cq_event reads the handle back. The caller may make the fd non-blocking.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "qp.h"
#include "verbs_impl.h"

namespace softnic {

void Cq::push(const ibv_wc& wc, bool solicited) {
  std::lock_guard<std::mutex> lock(mu);
  if (int(entries.size()) >= capacity) {
    ibv_async_event event{};
    event.event_type = IBV_EVENT_CQ_ERR;
    event.element.cq = &shell.ibv;
    ctx->postAsync(event);
    return;
  }
  entries.push_back(wc);
  bool fires = armed && (!solicitedOnly || solicited || wc.status != IBV_WC_SUCCESS);
  if (fires && channel != nullptr) {
    armed = false;
    ibv_cq* handle = &shell.ibv;
    ssize_t n = write(channel->writeFd, &handle, sizeof(handle));
    (void)n;
  }
}

int Cq::poll(int max, ibv_wc* out) {
  std::lock_guard<std::mutex> lock(mu);
  int n = 0;
  while (n < max && !entries.empty()) {
    out[n++] = entries.front();
    entries.pop_front();
  }
  return n;
}

ibv_comp_channel* createCompChannel(ibv_context* context) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  auto* ch = new Channel();
  ch->shell.obj = ch;
  ch->ctx = contextOf(context);
  ch->ctx->users++;
  ch->writeFd = fds[1];
  ch->shell.ibv.context = context;
  ch->shell.ibv.fd = fds[0];
  ch->shell.ibv.refcnt = 0;
  return &ch->shell.ibv;
}

int destroyCompChannel(ibv_comp_channel* handle) {
  Channel* ch = ownerOf<Channel>(handle);
  if (ch->users.load() != 0) return EBUSY;
  close(handle->fd);
  close(ch->writeFd);
  ch->ctx->users--;
  delete ch;
  return 0;
}

ibv_cq* createCq(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                 int vector) {
  if (cqe < 1 || cqe > kMaxCqe || vector < 0 || vector >= context->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  auto* cq = new Cq();
  cq->shell.obj = cq;
  cq->ctx = contextOf(context);
  cq->ctx->users++;
  cq->capacity = cqe;
  if (channel != nullptr) {
    cq->channel = ownerOf<Channel>(channel);
    cq->channel->users++;
  }
  ibv_cq& c = cq->shell.ibv;
  c.context = context;
  c.channel = channel;
  c.cq_context = cqContext;
  c.cqe = cqe;
  pthread_mutex_init(&c.mutex, nullptr);
  pthread_cond_init(&c.cond, nullptr);
  return &c;
}

int destroyCq(ibv_cq* handle) {
  Cq* cq = ownerOf<Cq>(handle);
  if (cq->users.load() != 0) return EBUSY;
  if (cq->channel != nullptr) cq->channel->users--;
  cq->ctx->users--;
  pthread_mutex_destroy(&handle->mutex);
  pthread_cond_destroy(&handle->cond);
  delete cq;
  return 0;
}

int getCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) {
  ibv_cq* handle = nullptr;
  ssize_t n = read(channel->fd, &handle, sizeof(handle));
  if (n != ssize_t(sizeof(handle))) {
    if (n >= 0) errno = EIO;
    return -1;
  }
  *cq = handle;
  *cqContext = handle->cq_context;
  return 0;
}

void ackCqEvents(ibv_cq* cq, unsigned count) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += count;
  pthread_mutex_unlock(&cq->mutex);
}

int pollCq(ibv_cq* cq, int num, ibv_wc* wc) { return ownerOf<Cq>(cq)->poll(num, wc); }

int reqNotifyCq(ibv_cq* handle, int solicitedOnly) {
  Cq* cq = ownerOf<Cq>(handle);
  if (cq->channel == nullptr) return EINVAL;
  std::lock_guard<std::mutex> lock(cq->mu);
  cq->armed = true;
  cq->solicitedOnly = solicitedOnly != 0;
  return 0;
}

}  // namespace softnic
