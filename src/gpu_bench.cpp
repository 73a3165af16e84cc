#include "gpu_bench.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kdsl {

DeviceTensor DeviceTensor::like(const HostTensor& t) {
  DeviceTensor d;
  d.buffer = DeviceBuffer(std::max<size_t>(t.bytes.size(), 1));
  d.ref = TensorRef::contiguous(reinterpret_cast<void*>(d.buffer.ptr()), t.dtype,
                                std::span<const int64_t>(t.shape.data(), t.shape.size()));
  return d;
}

DeviceTensor DeviceTensor::upload(const HostTensor& t) {
  DeviceTensor d = like(t);
  if (!t.bytes.empty()) {
    check(driver().cuMemcpyHtoD(d.buffer.ptr(), t.bytes.data(), t.bytes.size()), "cuMemcpyHtoD");
  }
  return d;
}

void DeviceTensor::download(HostTensor& t) const {
  if (!t.bytes.empty()) {
    check(driver().cuMemcpyDtoH(t.bytes.data(), buffer.ptr(), t.bytes.size()), "cuMemcpyDtoH");
  }
}

void DeviceTensor::poison(uint8_t byte) {
  check(driver().cuMemsetD8(buffer.ptr(), byte, buffer.size()), "cuMemsetD8");
}

int next_warmup_batch(int warmup, double min_warmup_ms, int done, double done_ms, int last,
                      double last_ms) {
  const bool timed = min_warmup_ms > 0;  // false for NaN
  if (done == 0) return std::max(warmup, timed ? 1 : 0);
  if (!timed || !(min_warmup_ms > done_ms) || done >= warmup + kMaxExtraWarmup) return 0;
  const double per_run = std::max(last_ms / std::max(last, 1), 1e-4);
  return static_cast<int>(std::clamp(std::ceil((min_warmup_ms - done_ms) / per_run), 1.0,
                                     static_cast<double>(warmup + kMaxExtraWarmup - done)));
}

Timing time_cuda(CUstream stream, const std::function<void()>& fn, int warmup, int reps,
                 bool flush_l2, double min_warmup_ms) {
  const Driver& d = driver();
  CUcontext ctx = nullptr;
  check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  CUdevice dev = 0;
  check(d.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  size_t l2 = device_info(static_cast<int>(dev)).l2_bytes;
  DeviceBuffer flush(flush_l2 ? std::max<size_t>(2 * l2, 1 << 20) : 0);
  CUevent start, stop;
  check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  // Warm-up: `warmup` runs, then batches sized from their mean time until they have taken
  // min_warmup_ms (as triton.testing.do_bench sizes its warm-up from an estimate; a slow first
  // run only makes the next batch too small, and the loop goes on).
  int warm = 0;
  double warm_ms = 0;
  float batch_ms = 0;
  for (int batch = next_warmup_batch(warmup, min_warmup_ms, 0, 0, 0, 0); batch > 0;
       batch = next_warmup_batch(warmup, min_warmup_ms, warm, warm_ms, batch, batch_ms)) {
    check(d.cuEventRecord(start, stream), "cuEventRecord");
    for (int i = 0; i < batch; ++i) fn();
    check(d.cuEventRecord(stop, stream), "cuEventRecord");
    check(d.cuEventSynchronize(stop), "cuEventSynchronize");
    check(d.cuEventElapsedTime(&batch_ms, start, stop), "cuEventElapsedTime");
    warm += batch;
    warm_ms += batch_ms;
  }
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    if (flush_l2)
      check(d.cuMemsetD8Async(flush.ptr(), static_cast<unsigned char>(i), flush.size(), stream),
            "cuMemsetD8Async");
    check(d.cuEventRecord(start, stream), "cuEventRecord");
    fn();
    check(d.cuEventRecord(stop, stream), "cuEventRecord");
    check(d.cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    us.push_back(ms * 1e3);
  }
  d.cuEventDestroy(start);
  d.cuEventDestroy(stop);
  Timing t;
  t.reps = reps;
  t.warmup = warm;
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  t.median_us =
      us.size() % 2 ? us[us.size() / 2] : 0.5 * (us[us.size() / 2 - 1] + us[us.size() / 2]);
  t.min_us = us.front();
  t.max_us = us.back();
  return t;
}

double copy_bandwidth_gbps(CUstream stream, size_t bytes, Timing* timing) {
  DeviceBuffer a(bytes), b(bytes);
  check(driver().cuMemsetD8(a.ptr(), 1, bytes), "cuMemsetD8");
  Timing t = time_cuda(
      stream,
      [&] {
        check(driver().cuMemcpyDtoDAsync(b.ptr(), a.ptr(), bytes, stream), "cuMemcpyDtoDAsync");
      },
      3, 20, true);
  if (timing) *timing = t;
  return 2.0 * static_cast<double>(bytes) / (t.median_us * 1e3);
}

}  // namespace kdsl
