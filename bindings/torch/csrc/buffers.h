// Tensors as loom buffers: loom takes one contiguous buffer per argument. Contiguous tensors go
// to loom as they are (no copy). A non-contiguous one goes through a contiguous copy; the copy
// is made only after the lane's earlier operations finished, and an output is copied back when
// its operation finishes, so results are those of stream order, never silently wrong.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "wire.h"
#include "work.h"

namespace loom_torch {

// The one tensor of a list argument (loom takes one tensor per rank and call).
inline const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* name) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "loom: ", name, " takes one tensor per rank, got ",
                    tensors.size());
  checkTensor(tensors[0], name);
  return tensors[0];
}

// What loom reads: `t`, or a contiguous copy; `work` keeps it alive (an asynchronous op may
// outlive the caller's last reference to its input).
inline at::Tensor readable(Lane& lane, LoomWork& work, const at::Tensor& t) {
  if (t.is_contiguous()) {
    work.keep(t);
    return t;
  }
  lane.drain();
  at::Tensor c = t.contiguous();
  work.keep(c);
  return c;
}

// What loom writes (and, in place, reads): `t`, or a contiguous copy written back into `t`.
inline at::Tensor writable(Lane& lane, LoomWork& work, const at::Tensor& t) {
  if (t.is_contiguous()) return t;
  lane.drain();
  at::Tensor c = t.contiguous();
  work.keep(c);
  work.then([t, c]() mutable { t.copy_(c); });
  return c;
}

// A contiguous buffer of `like`'s dtype and `numel` elements that `work` keeps alive.
inline at::Tensor scratch(LoomWork& work, const at::Tensor& like, int64_t numel) {
  at::Tensor b = at::empty({numel}, like.options().memory_format(at::MemoryFormat::Contiguous));
  work.keep(b);
  return b;
}

}  // namespace loom_torch
