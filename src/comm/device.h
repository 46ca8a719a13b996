// The device a communicator lives on: the CPU or one CUDA device. loom builds without CUDA,
// and a CUDA build runs on machines without a GPU; both are normal cases, reported clearly.
#pragma once

namespace loom {

// Number of CUDA devices visible to this process; 0 without CUDA support, driver or GPU.
int cudaDeviceCount();

// Throws InvalidArgument / InvalidUsage when `device` is neither LOOM_DEVICE_CPU nor a
// visible CUDA device.
void validateDevice(int device);

}  // namespace loom
