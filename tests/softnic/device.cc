// TEST DOUBLE: the soft NIC's devices, contexts, ports, protection domains and memory regions.
//
// Configuration (test-only; these are not loom variables):
//   SOFTNIC_DEVICES     comma-separated device names (default "softnic0"; empty: no device)
//   SOFTNIC_ADDR        IPv4 address the NIC's TCP wire binds to and puts in its GID (127.0.0.1)
//   SOFTNIC_IFNAME      take that address from this interface instead (e.g. a netns veth)
//   SOFTNIC_PORTS       ports per device, 1-4 (default 1); all share the device's wire
//   SOFTNIC_PORT_STATE  "active" (default) or "down"
//   SOFTNIC_FAULT       faults to inject, see injectFaults()
//   SOFTNIC_MAX_WAIT_MS cap on one modelled transport timeout or RNR wait (default 50)
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "qp.h"
#include "softnic.h"
#include "verbs_impl.h"

namespace softnic {
namespace {

std::string envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

void copyName(char* dst, size_t cap, const std::string& src) {
  std::snprintf(dst, cap, "%s", src.c_str());
}

// The IPv4 address of interface `name` (network order), or 0.
uint32_t interfaceAddress(const std::string& name) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return 0;
  uint32_t ip = 0;
  for (ifaddrs* i = all; i != nullptr && ip == 0; i = i->ifa_next)
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET && name == i->ifa_name)
      ip = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
  freeifaddrs(all);
  return ip;
}

std::vector<Device*>* makeDevices() {
  auto* list = new std::vector<Device*>();  // lives for the process: threads refer to it
  std::string addr = envOr("SOFTNIC_ADDR", "");
  uint32_t ip = 0;
  if (addr.empty() && std::getenv("SOFTNIC_IFNAME") != nullptr)
    ip = interfaceAddress(std::getenv("SOFTNIC_IFNAME"));
  else if (inet_pton(AF_INET, addr.c_str(), &ip) != 1)
    ip = 0;
  if (ip == 0) {
    if (!addr.empty() || std::getenv("SOFTNIC_IFNAME") != nullptr)
      std::fprintf(stderr,
                   "softnic (test double): SOFTNIC_ADDR/SOFTNIC_IFNAME name no IPv4 "
                   "address here; the wire uses 127.0.0.1\n");
    ip = htonl(INADDR_LOOPBACK);
  }
  int ports = std::atoi(envOr("SOFTNIC_PORTS", "1").c_str());
  if (ports < 1 || ports > 4) ports = 1;
  bool up = envOr("SOFTNIC_PORT_STATE", "active") != "down";
  std::stringstream names(envOr("SOFTNIC_DEVICES", "softnic0"));
  std::string name;
  while (std::getline(names, name, ',')) {
    if (name.empty()) continue;
    auto* dev = new Device();
    dev->shell.obj = dev;
    dev->name = name;
    dev->ipv4 = ip;
    dev->numPorts = ports;
    dev->portActive.assign(ports, up);
    uint64_t h = 1469598103934665603ull;  // FNV-1a over name, address and pid: unique per "host"
    for (char c : name + std::to_string(ip) + std::to_string(getpid()))
      h = (h ^ uint8_t(c)) * 1099511628211ull;
    dev->guid = htobe64(h);
    ibv_device& d = dev->shell.ibv;
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    copyName(d.name, sizeof(d.name), name);
    copyName(d.dev_name, sizeof(d.dev_name), "uverbs-" + name);
    copyName(d.dev_path, sizeof(d.dev_path), "/nonexistent/softnic/" + name);
    copyName(d.ibdev_path, sizeof(d.ibdev_path), "/nonexistent/softnic/" + name);
    list->push_back(dev);
  }
  injectFaults(envOr("SOFTNIC_FAULT", ""), *list);
  return list;
}

Device* deviceOf(ibv_device* d) { return ownerOf<Device>(d); }

}  // namespace

std::vector<Device*>& devices() {
  static std::vector<Device*>* list = makeDevices();
  return *list;
}

int maxWaitMs() {
  static int ms = [] {
    int v = std::atoi(envOr("SOFTNIC_MAX_WAIT_MS", "50").c_str());
    return v > 0 ? v : 50;
  }();
  return ms;
}

bool Device::portUp(int port) {
  std::lock_guard<std::mutex> lock(mu);
  return port >= 1 && port <= numPorts && portActive[port - 1];
}

std::shared_ptr<Qp> Device::findQp(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = qps.find(qpn);
  return it == qps.end() ? nullptr : it->second;
}

void setPortState(Device* dev, int port, bool active) {
  std::vector<Context*> contexts;
  {
    std::lock_guard<std::mutex> lock(dev->mu);
    if (port < 1 || port > dev->numPorts || dev->portActive[port - 1] == active) return;
    dev->portActive[port - 1] = active;
    contexts = dev->contexts;
  }
  ibv_async_event event{};
  event.event_type = active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
  event.element.port_num = port;
  for (Context* c : contexts) c->postAsync(event);
}

Context* contextOf(ibv_context* ctx) {
  auto* raw = reinterpret_cast<char*>(ctx) - offsetof(verbs_context, context) -
              offsetof(ContextShell, vctx);
  return reinterpret_cast<ContextShell*>(raw)->obj;
}

void Context::postAsync(const ibv_async_event& event) {
  // One record per event; a pipe write under PIPE_BUF is atomic, so readers see whole events.
  ssize_t n = write(asyncWrite, &event, sizeof(event));
  (void)n;
}

void encodeGid(uint32_t ipv4, uint16_t tcpPort, ibv_gid* gid) {
  std::memset(gid, 0, sizeof(*gid));
  gid->raw[8] = uint8_t(tcpPort >> 8);
  gid->raw[9] = uint8_t(tcpPort);
  gid->raw[10] = 0xff;
  gid->raw[11] = 0xff;
  std::memcpy(&gid->raw[12], &ipv4, 4);
}

bool decodeGid(const ibv_gid& gid, uint32_t* ipv4, uint16_t* tcpPort) {
  for (int i = 0; i < 8; ++i)
    if (gid.raw[i] != 0) return false;
  if (gid.raw[10] != 0xff || gid.raw[11] != 0xff) return false;
  *tcpPort = uint16_t(gid.raw[8] << 8 | gid.raw[9]);
  std::memcpy(ipv4, &gid.raw[12], 4);
  return *tcpPort != 0;
}

Mr* findMrLocked(Device* dev, uint32_t key, bool remote, Pd* pd, uint64_t addr, uint64_t len,
                 int access) {
  auto it = dev->mrs.find(key);
  if (it == dev->mrs.end()) return nullptr;
  Mr* mr = it->second;
  uint32_t want = remote ? mr->shell.ibv.rkey : mr->shell.ibv.lkey;
  if (want != key || mr->pd != pd || !mr->covers(addr, len)) return nullptr;
  if ((mr->access & access) != access) return nullptr;
  return mr;
}

ibv_device** getDeviceList(int* num) {
  auto& list = devices();
  auto** out = static_cast<ibv_device**>(std::calloc(list.size() + 1, sizeof(ibv_device*)));
  if (out == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < list.size(); ++i) out[i] = &list[i]->shell.ibv;
  if (num != nullptr) *num = int(list.size());
  return out;
}

void freeDeviceList(ibv_device** list) { std::free(list); }

const char* getDeviceName(ibv_device* device) { return device->name; }

__be64 getDeviceGuid(ibv_device* device) { return deviceOf(device)->guid; }

ibv_context* openDevice(ibv_device* device) {
  Device* dev = deviceOf(device);
  if (!startListener(dev)) return nullptr;  // errno from socket/bind/listen
  auto* c = new Context();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    delete c;
    return nullptr;
  }
  c->asyncRead = fds[0];
  c->asyncWrite = fds[1];
  c->dev = dev;
  c->shell.obj = c;
  verbs_context& v = c->shell.vctx;
  v.sz = sizeof(verbs_context);
  v.query_port = queryPortFull;
  ibv_context& ctx = v.context;
  ctx.device = device;
  ctx.cmd_fd = -1;
  ctx.async_fd = c->asyncRead;
  ctx.num_comp_vectors = 1;
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.ops._compat_query_device = queryDevice;
  ctx.ops._compat_query_port = queryPortCompat;
  ctx.ops.poll_cq = pollCq;
  ctx.ops.req_notify_cq = reqNotifyCq;
  ctx.ops.post_send = postSend;
  ctx.ops.post_recv = postRecv;
  std::lock_guard<std::mutex> lock(dev->mu);
  dev->contexts.push_back(c);
  return &ctx;
}

int closeDevice(ibv_context* context) {
  Context* c = contextOf(context);
  if (c->users.load() != 0) return EBUSY;
  {
    std::lock_guard<std::mutex> lock(c->dev->mu);
    auto& list = c->dev->contexts;
    for (auto it = list.begin(); it != list.end(); ++it)
      if (*it == c) {
        list.erase(it);
        break;
      }
  }
  close(c->asyncRead);
  close(c->asyncWrite);
  pthread_mutex_destroy(&context->mutex);
  delete c;
  return 0;
}

int queryDevice(ibv_context* context, ibv_device_attr* attr) {
  Device* dev = contextOf(context)->dev;
  std::memset(attr, 0, sizeof(*attr));
  copyName(attr->fw_ver, sizeof(attr->fw_ver), "softnic-test-double");
  attr->node_guid = dev->guid;
  attr->sys_image_guid = dev->guid;
  attr->max_mr_size = uint64_t(1) << 40;
  attr->page_size_cap = 4096;
  attr->max_qp = 4096;
  attr->max_qp_wr = kMaxQueueDepth;
  attr->max_sge = kMaxSge;
  attr->max_cq = 4096;
  attr->max_cqe = kMaxCqe;
  attr->max_mr = 65536;
  attr->max_pd = 1024;
  attr->max_qp_rd_atom = 16;
  attr->max_qp_init_rd_atom = 16;
  attr->max_res_rd_atom = 16 * 4096;
  attr->atomic_cap = IBV_ATOMIC_NONE;
  attr->max_pkeys = 1;
  attr->phys_port_cnt = uint8_t(dev->numPorts);
  return 0;
}

int queryPortFull(ibv_context* context, uint8_t port, ibv_port_attr* out, size_t len) {
  Device* dev = contextOf(context)->dev;
  if (port < 1 || port > dev->numPorts) return EINVAL;
  bool up = dev->portUp(port);
  ibv_port_attr a{};
  a.state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = IBV_MTU_4096;
  a.gid_tbl_len = 1;
  a.max_msg_sz = 1u << 31;
  a.pkey_tbl_len = 1;
  a.active_width = 2;                      // 4x
  a.active_speed = 32;                     // EDR
  a.phys_state = up ? 5 : 3;               // LinkUp : Disabled
  a.link_layer = IBV_LINK_LAYER_ETHERNET;  // RoCE: peers are addressed by GID, LID is 0
  std::memcpy(out, &a, std::min(len, sizeof(a)));
  return 0;
}

int queryPortCompat(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) {
  // The compat layout is ibv_port_attr up to and including `flags`.
  return queryPortFull(context, port, reinterpret_cast<ibv_port_attr*>(attr),
                       offsetof(ibv_port_attr, port_cap_flags2));
}

int queryGid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  Device* dev = contextOf(context)->dev;
  if (port < 1 || port > dev->numPorts || index != 0) return EINVAL;
  encodeGid(dev->ipv4, dev->tcpPort, gid);
  return 0;
}

ibv_pd* allocPd(ibv_context* context) {
  auto* pd = new Pd();
  pd->shell.obj = pd;
  pd->ctx = contextOf(context);
  pd->ctx->users++;
  pd->shell.ibv.context = context;
  pd->shell.ibv.handle = pd->ctx->dev->nextKey;
  return &pd->shell.ibv;
}

int deallocPd(ibv_pd* handle) {
  Pd* pd = ownerOf<Pd>(handle);
  if (pd->users.load() != 0) return EBUSY;
  pd->ctx->users--;
  delete pd;
  return 0;
}

namespace {

bool registrationFails() {
  Faults& f = faults();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.regFailAfter >= 0 && f.regsSeen >= f.regFailAfter) return true;
  ++f.regsSeen;
  return false;
}

ibv_mr* registerRegion(ibv_pd* handle, char* base, uint64_t length, uint64_t iova, int access) {
  Pd* pd = ownerOf<Pd>(handle);
  bool remoteWrite = access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  if (length == 0 || (remoteWrite && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;  // verbs requires local write with any remote write right
    return nullptr;
  }
  if (registrationFails()) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* mr = new Mr();
  mr->shell.obj = mr;
  mr->pd = pd;
  mr->base = base;
  mr->iova = iova;
  mr->length = length;
  mr->access = access;
  Device* dev = pd->ctx->dev;
  ibv_mr& m = mr->shell.ibv;
  m.context = handle->context;
  m.pd = handle;
  m.addr = reinterpret_cast<void*>(iova);
  m.length = length;
  std::lock_guard<std::mutex> lock(dev->mu);
  uint32_t key = dev->nextKey++;
  m.handle = key;
  m.lkey = key;
  m.rkey = key | kRkeyBit;
  dev->mrs[m.lkey] = mr;
  dev->mrs[m.rkey] = mr;
  pd->users++;
  return &m;
}

}  // namespace

ibv_mr* regMrIova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  return registerRegion(pd, static_cast<char*>(addr), length, iova, int(access));
}

ibv_mr* regMrIova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return regMrIova2(pd, addr, length, iova, unsigned(access));
}

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  return regMrIova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

ibv_mr* regDmabufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  (void)offset;
  {
    Faults& f = faults();
    std::lock_guard<std::mutex> lock(f.mu);
    if (f.noDmabuf) {
      errno = EOPNOTSUPP;
      return nullptr;
    }
  }
  if (fcntl(fd, F_GETFD) < 0) {
    errno = EBADF;
    return nullptr;
  }
  // The soft NIC reaches the region at `iova` in this process. That is right for simulated
  // device memory (which is host memory at its device address) and for nothing else.
  return registerRegion(pd, reinterpret_cast<char*>(iova), length, iova, access);
}

int deregMr(ibv_mr* handle) {
  Mr* mr = ownerOf<Mr>(handle);
  Device* dev = mr->pd->ctx->dev;
  {
    std::lock_guard<std::mutex> lock(dev->mu);
    dev->mrs.erase(handle->lkey);
    dev->mrs.erase(handle->rkey);
  }
  mr->pd->users--;
  delete mr;
  return 0;
}

int getAsyncEvent(ibv_context* context, ibv_async_event* event) {
  Context* c = contextOf(context);
  ssize_t n = read(c->asyncRead, event, sizeof(*event));
  if (n != ssize_t(sizeof(*event))) {
    if (n >= 0) errno = EIO;
    return -1;
  }
  return 0;
}

void ackAsyncEvent(ibv_async_event* event) { (void)event; }

}  // namespace softnic
