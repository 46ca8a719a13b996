// Asynchronous events of the RDMA devices: a QP that went fatal, a port that went down, a
// device that failed. The devices are shared by every connection of the process, so their
// events are read in one place (whichever thread asks first, without blocking) and kept by
// QP number and port until the connection they concern asks.
#pragma once

#include <cstdint>
#include <string>

namespace loom::transport::ib {

// Reads every event the devices have queued (non-blocking); thread-safe.
void pollAsyncEvents();

// What fatal event concerns QP `qpn` on port `port` of device `device` (index into
// IbDevices::devices()), or "" when none was reported.
std::string fatalEventFor(uint32_t qpn, int device, int port);

// Forgets the events of a destroyed QP (the device may reuse its number).
void forgetQp(uint32_t qpn);

}  // namespace loom::transport::ib
