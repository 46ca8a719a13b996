#include "transports/ib/ib_hca_filter.h"

#include <algorithm>
#include <cstdlib>

#include "src/base/error.h"
#include "src/base/strings.h"

namespace loom::transport::ib {

HcaFilter::HcaFilter(const std::string& spec) {
  std::string_view s = spec;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (!s.empty() && s.front() == '^') {
    exclude_ = true;
    s.remove_prefix(1);
  }
  if (!s.empty() && s.front() == '=') {
    exact_ = true;
    s.remove_prefix(1);
  }
  for (const std::string& entry : splitList(s, ',')) {
    Item item;
    const size_t colon = entry.find(':');
    item.name = entry.substr(0, colon);
    LOOM_ENFORCE(!item.name.empty(), InvalidArgument, "LOOM_IB_HCA=", spec, ": entry '", entry,
                 "' has no device name; write e.g. mlx5_0:1,mlx5_1 or ^mlx5_3");
    if (colon != std::string::npos) {
      const std::string port = entry.substr(colon + 1);
      char* end = nullptr;
      const long value = std::strtol(port.c_str(), &end, 10);
      LOOM_ENFORCE(!port.empty() && *end == '\0' && value >= 1 && value <= 255, InvalidArgument,
                   "LOOM_IB_HCA=", spec, ": '", port, "' in '", entry,
                   "' is not a port number (1 to 255)");
      item.port = static_cast<int>(value);
    }
    items_.push_back(std::move(item));
  }
  LOOM_ENFORCE(!(items_.empty() && (exclude_ || exact_)), InvalidArgument, "LOOM_IB_HCA=", spec,
               " names no device after its ^ or =; unset it to use every device");
}

bool HcaFilter::matches(const Item& item, const std::string& device, int port) const {
  const bool name = exact_ ? device == item.name : device.starts_with(item.name);
  return name && (item.port < 0 || item.port == port);
}

bool HcaFilter::accepts(const std::string& device, int port) const {
  if (items_.empty()) return true;
  const bool any = std::any_of(items_.begin(), items_.end(),
                               [&](const Item& item) { return matches(item, device, port); });
  return exclude_ ? !any : any;
}

}  // namespace loom::transport::ib
