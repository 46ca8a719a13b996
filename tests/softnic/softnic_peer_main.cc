// TEST DOUBLE tests: the second process of the soft NIC's two-process tests. It speaks plain
// verbs (linked against libloom_softnic.so) and talks to the test over stdin/stdout.
//   target N  prints its endpoint, reads the test's, goes to RTS, posts N receives, prints
//             "ready", then prints "wc status opcode imm byte_len checksum" for each of N
//             completions; a message with immediate i lands at offset i * 1024
//   initiator N  the other side: reads a target's endpoint, goes to RTS, prints its own, waits
//             for "ready", writes the N messages, then prints the lines the target must have
//             printed
//   probe     prints "devices <n> last <name> ports <n> port <state of the last port> reg <0 or
//             errno of a registration>", or "no device" (for the SOFTNIC_* settings)
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "softnic_test_util.h"

using namespace softnic::test;

namespace {

int target(int n) {
  Endpoint ep(size_t(n + 1) * 1024);
  std::cout << describe(ep) << std::endl;
  std::string line;
  ibv_gid gid{};
  uint32_t qpn = 0, rkey = 0;
  uint64_t addr = 0;
  if (!std::getline(std::cin, line) || !parse(line, &gid, &qpn, &addr, &rkey)) return 3;
  if (connectTo(ep, gid, qpn) != 0) return 4;
  for (int i = 0; i < n; ++i)
    if (postRecv(ep, uint64_t(i)) != 0) return 2;
  std::cout << "ready" << std::endl;
  auto wcs = pollFor(ep.cq, size_t(n), 30000);
  for (const ibv_wc& wc : wcs) {
    uint64_t sum = 0;
    size_t off = size_t(wc.imm_data) * 1024;
    for (uint32_t k = 0; k < wc.byte_len && off + k < ep.buf.size(); ++k)
      sum += uint8_t(ep.buf[off + k]);
    std::cout << "wc " << wc.status << ' ' << wc.opcode << ' ' << wc.imm_data << ' ' << wc.byte_len
              << ' ' << sum << std::endl;
  }
  return int(wcs.size()) == n ? 0 : 5;
}

// Message i of a run: its length, and the byte sum the target finds at its offset.
uint32_t messageLength(int i) { return uint32_t((i * 53) % 1024 + 1); }

int initiator(int n) {
  Endpoint ep(size_t(n + 1) * 1024);
  std::string line;
  ibv_gid gid{};
  uint32_t qpn = 0, rkey = 0;
  uint64_t addr = 0;
  if (!std::getline(std::cin, line) || !parse(line, &gid, &qpn, &addr, &rkey)) return 3;
  if (connectTo(ep, gid, qpn) != 0) return 4;
  std::cout << describe(ep) << std::endl;
  if (!std::getline(std::cin, line) || line != "ready") return 6;
  for (size_t k = 0; k < ep.buf.size(); ++k) ep.buf[k] = char(k * 11 + 1);
  for (int i = 0; i < n; ++i)
    if (postWrite(ep, uint64_t(i), size_t(i) * 1024, messageLength(i), addr + uint64_t(i) * 1024,
                  rkey, true, uint32_t(i)) != 0)
      return 7;
  auto wcs = pollFor(ep.cq, size_t(n), 30000);
  int ok = 0;
  for (const ibv_wc& wc : wcs) ok += wc.status == IBV_WC_SUCCESS;
  for (int i = 0; i < n; ++i) {
    uint64_t sum = 0;
    for (uint32_t k = 0; k < messageLength(i); ++k) sum += uint8_t(ep.buf[size_t(i) * 1024 + k]);
    std::cout << "wc " << IBV_WC_SUCCESS << ' ' << IBV_WC_RECV_RDMA_WITH_IMM << ' ' << i << ' '
              << messageLength(i) << ' ' << sum << std::endl;
  }
  return ok == n ? 0 : 8;
}

int probe() {
  int devices = 0;
  ibv_device** list = ibv_get_device_list(&devices);
  if (devices == 0) {
    ibv_free_device_list(list);
    std::cout << "no device" << std::endl;
    return 0;
  }
  ibv_context* ctx = ibv_open_device(list[devices - 1]);
  std::string last = ibv_get_device_name(list[devices - 1]);
  ibv_free_device_list(list);
  ibv_device_attr attr{};
  ibv_query_device(ctx, &attr);
  ibv_port_attr port{};
  ibv_query_port(ctx, attr.phys_port_cnt, &port);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  static char buf[4096];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  std::cout << "devices " << devices << " last " << last << " ports " << int(attr.phys_port_cnt)
            << " port " << port.state << " reg " << (mr != nullptr ? 0 : errno) << std::endl;
  if (mr != nullptr) ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "target") == 0) return target(std::atoi(argv[2]));
  if (argc >= 3 && std::strcmp(argv[1], "initiator") == 0) return initiator(std::atoi(argv[2]));
  if (argc >= 2 && std::strcmp(argv[1], "probe") == 0) return probe();
  std::cerr << "usage: loom_softnic_peer target N | initiator N | probe\n";
  return 1;
}
