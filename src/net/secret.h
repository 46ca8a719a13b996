// The job's shared secret: every rank proves it knows it before a listener accepts its
// connection (auth_listener.h), so a stranger on the network cannot join or feed a job.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace loom {

using Secret = std::array<uint8_t, 16>;

// A fresh random secret (getrandom).
Secret randomSecret();
// The secret every rank derives from LOOM_COMM_ID (and LOOM_COMM_SECRET when set).
Secret derivedSecret(const std::string& commId, const std::string& sharedSecret);
// Compares in constant time, so a stranger cannot learn the secret byte by byte from timing.
bool secretsEqual(const Secret& a, const Secret& b);

}  // namespace loom
