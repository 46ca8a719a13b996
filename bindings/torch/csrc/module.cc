// The Python module loom_torch._C: the backend class and its creator. Registration with
// torch.distributed happens in loom_torch/__init__.py.
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "backend.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<c10d::Backend> createBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                int rank, int size, double timeoutSeconds,
                                                const std::string& groupName,
                                                std::vector<uint64_t> globalRanks) {
  auto options = c10::make_intrusive<loom_torch::LoomBackend::Options>(
      std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000)));
  options->group_name = groupName;
  options->global_ranks_in_group = std::move(globalRanks);
  return c10::make_intrusive<loom_torch::LoomBackend>(store, rank, size, options);
}

// A group that torch makes by splitting the default group (new_group when the default group
// is bound to a device): loomCommSplit of the parent, with the color of the member list.
c10::intrusive_ptr<c10d::Backend> splitBackend(
    const c10::intrusive_ptr<loom_torch::LoomBackend>& parent,
    const c10::intrusive_ptr<c10d::Store>& store, double timeoutSeconds,
    const std::string& groupName, const std::vector<int>& globalRanks) {
  auto options = c10::make_intrusive<loom_torch::LoomBackend::Options>(
      std::chrono::milliseconds(static_cast<int64_t>(timeoutSeconds * 1000)));
  options->group_name = groupName;
  return parent->split(store, globalRanks, options);
}

int loomVersion() {
  int version = 0;
  loomGetVersion(&version);
  return version;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "loom collectives as a torch.distributed backend";
  py::class_<loom_torch::LoomBackend, c10d::Backend, c10::intrusive_ptr<loom_torch::LoomBackend>>(
      m, "LoomBackend")
      .def(
          "perform_nocolor_split",
          [](loom_torch::LoomBackend& self, const py::object& /*device*/) {
            self.performNocolorSplit();
          },
          py::arg("device") = py::none(), py::call_guard<py::gil_scoped_release>(),
          "Takes part in a split of this group as a rank that joins no new group.");
  m.def("create_backend", &createBackend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout_seconds"), py::arg("group_name"), py::arg("global_ranks"),
        py::call_guard<py::gil_scoped_release>(),
        "Joins the group's loom communicator (collective over the group's ranks).");
  m.def("split_backend", &splitBackend, py::arg("parent"), py::arg("store"),
        py::arg("timeout_seconds"), py::arg("group_name"), py::arg("global_ranks"),
        py::call_guard<py::gil_scoped_release>(),
        "Makes a group's backend by loomCommSplit of the parent's communicator (collective over "
        "the parent's ranks).");
  m.def("loom_version", &loomVersion, "LOOM_VERSION_CODE of the loaded libloom.");
}
