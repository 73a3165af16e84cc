// Device tensors and CUDA-event timing, for `kdsl run --bench`, `kdsl bench` and bench/.
#pragma once

#include <cuda.h>

#include <functional>

#include "driver.h"
#include "host_tensor.h"
#include "kdsl/kdsl.h"

namespace kdsl {

/// A contiguous tensor in device memory (current context) with its TensorRef.
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorRef ref;

  /// Allocates and copies `t` to the device (synchronous).
  static DeviceTensor upload(const HostTensor& t);
  /// Allocates an uninitialized tensor of t's dtype and shape.
  static DeviceTensor like(const HostTensor& t);
  /// Copies the device contents into `t` (synchronous; same dtype and shape).
  void download(HostTensor& t) const;
  /// Sets every byte to `byte` (0xff makes every float NaN), so unwritten elements show.
  void poison(uint8_t byte = 0xff);
};

/// One timed measurement: median, minimum and maximum over `reps` runs, microseconds.
struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
  int reps = 0;
};

/// Times `fn` (which enqueues work on `stream`) with CUDA events: `warmup` untimed runs, then
/// `reps` timed runs, each preceded (when `flush_l2`) by writing a buffer of twice the L2 size so
/// every run starts with a cold L2. Synchronizes the stream.
Timing time_cuda(CUstream stream, const std::function<void()>& fn, int warmup, int reps,
                 bool flush_l2);

/// The bandwidth of a device-to-device copy of `bytes` bytes (counting read + write), GB/s
/// (1e9 bytes), timed as time_cuda does: the ceiling kernels are compared against.
double copy_bandwidth_gbps(CUstream stream, size_t bytes = size_t{1} << 30,
                           Timing* timing = nullptr);

}  // namespace kdsl
