// LOOM_IB_HCA: which RDMA devices and ports loom may use, in NCCL's NCCL_IB_HCA syntax.
//
//   mlx5                 every device whose name starts with "mlx5", every port
//   mlx5_0:1,mlx5_1      port 1 of mlx5_0 (and mlx5_01 ...), every port of mlx5_1*
//   =mlx5_0              exactly mlx5_0 (not mlx5_01)
//   ^mlx5_3              every device but mlx5_3* ("^=" excludes exact names)
//
// A leading '^' and then '=' apply to the whole list, as in NCCL. An empty value accepts
// every device.
#pragma once

#include <string>
#include <vector>

namespace loom::transport::ib {

class HcaFilter {
 public:
  // Throws InvalidArgument naming LOOM_IB_HCA for a malformed entry (empty name, bad port).
  explicit HcaFilter(const std::string& spec);
  bool accepts(const std::string& device, int port) const;
  bool empty() const { return items_.empty(); }
  bool excludes() const { return exclude_; }

 private:
  struct Item {
    std::string name;
    int port = -1;  // -1: every port
  };
  bool matches(const Item& item, const std::string& device, int port) const;
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<Item> items_;
};

}  // namespace loom::transport::ib
