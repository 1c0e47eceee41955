#pragma once
// Timing for the GPU perf tests (not assertions: machines are noisy). Built only with the CUDA
// backend: time_graph drives the runtime's graph capture directly.
#include <chrono>
#include <functional>

#include "tensor/cuda/stream.h"
#include "tensor/device_memory.h"

namespace sanctum::test {

// Mean seconds per call of f over `reps` calls after `warmups` calls, synchronised at both ends.
inline double time_calls(const std::function<void()>& f, int reps, int warmups = 3) {
  for (int i = 0; i < warmups; ++i) f();
  device_memory::cuda_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  device_memory::cuda_synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// GPU seconds per call without the host's launch costs: `reps` calls captured into one CUDA graph,
// replayed once after a warm-up replay. For ops that allocate nothing once warmed up.
inline double time_graph(const std::function<void()>& f, int reps) {
  f();
  device_memory::cuda_synchronize();
  cudaStream_t s = cuda::stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda::check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < reps; ++i) f();
  cuda::check_cuda(cudaStreamEndCapture(s, &graph), "end capture");
  cuda::check_cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cuda::check_cuda(cudaGraphLaunch(exec, s), "replay");
  device_memory::cuda_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  cuda::check_cuda(cudaGraphLaunch(exec, s), "replay");
  device_memory::cuda_synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return seconds;
}

}  // namespace sanctum::test
