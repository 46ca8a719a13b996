// Which host a rank runs on: hostname + kernel boot id (two containers on one machine share the
// boot id but not, usually, the hostname; a reinstalled host keeps its name but not its boot
// id). LOOM_HOSTID replaces it, so tests can simulate several hosts on one machine.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

std::string hostIdentity();
uint64_t hashString(const std::string& text);

}  // namespace loom
