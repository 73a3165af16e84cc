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

/// One timed measurement: median, minimum and maximum over `reps` runs, microseconds, and the
/// untimed warm-up runs before them.
struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
  int reps = 0;
  int warmup = 0;
};

/// The least warm-up, in milliseconds of back-to-back runs, before any run is timed: the
/// default of triton.testing.do_bench (warmup=25), which times the peers. Measured on an H100
/// (bench/RESULTS.md, thirty-first session): a row kernel of 2^27 bytes a tensor took 107-108 us
/// after 10 warm-up runs in a new process and 93.2 us after 180 or more (about 17 ms).
inline constexpr double kMinWarmupMs = 25.0;

/// time_cuda's warm-up in batches: how many runs the next batch takes, given `done` runs so far
/// that took `done_ms` milliseconds of GPU time, the last batch `last` of them in `last_ms`; 0:
/// warm enough. The first batch is `warmup` runs (at least one when `min_warmup_ms` > 0); later
/// ones are sized from the last batch's mean time to fill the rest of `min_warmup_ms`, at least 1
/// run, and stop after kMaxExtraWarmup runs beyond `warmup` (a launch that does nothing, M = 0,
/// adds no GPU time). A NaN `min_warmup_ms` counts as 0.
inline constexpr int kMaxExtraWarmup = 100000;
int next_warmup_batch(int warmup, double min_warmup_ms, int done, double done_ms, int last,
                      double last_ms);

/// Times `fn` (which enqueues work on `stream`) with CUDA events: at least `warmup` untimed runs,
/// and more until they have taken `min_warmup_ms` milliseconds of GPU time (estimated from the
/// first ones; 0: `warmup` runs only), then `reps` timed runs, each preceded (when `flush_l2`) by
/// writing a buffer of twice the L2 size so every run starts with a cold L2. Synchronizes the
/// stream.
Timing time_cuda(CUstream stream, const std::function<void()>& fn, int warmup, int reps,
                 bool flush_l2, double min_warmup_ms = kMinWarmupMs);

/// The bandwidth of a device-to-device copy of `bytes` bytes (counting read + write), GB/s
/// (1e9 bytes), timed as time_cuda does: the ceiling kernels are compared against.
double copy_bandwidth_gbps(CUstream stream, size_t bytes = size_t{1} << 30,
                           Timing* timing = nullptr);

}  // namespace kdsl
