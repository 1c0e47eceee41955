#include "tensor/step_graph.h"

#include <string>

#include "base/error.h"
#include "tensor/cuda/stream.h"

namespace sanctum {

namespace {
thread_local bool t_recording = false;
}  // namespace

struct StepGraph::Impl {
  cudaGraphExec_t exec = nullptr;
  std::string error;

  void destroy() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    exec = nullptr;
  }
  ~Impl() { destroy(); }
};

StepGraph::StepGraph() : impl_(std::make_unique<Impl>()) {}
StepGraph::~StepGraph() = default;
StepGraph::StepGraph(StepGraph&&) noexcept = default;
StepGraph& StepGraph::operator=(StepGraph&&) noexcept = default;

bool StepGraph::recording_now() { return t_recording; }

bool StepGraph::record(const std::function<void()>& enqueue) {
  impl_->destroy();
  impl_->error.clear();
  const cudaStream_t s = cuda::stream();
  // Thread-local mode: other threads' CUDA calls (a health probe reading memory figures) neither
  // break the recording nor get refused while it runs.
  cuda::check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin step graph");
  t_recording = true;
  try {
    enqueue();
  } catch (const std::exception& e) {
    impl_->error = e.what();
  }
  t_recording = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (impl_->error.empty() && ended != cudaSuccess) impl_->error = std::string("recording failed: ") + cudaGetErrorString(ended);
  if (impl_->error.empty()) {
    const cudaError_t made = cudaGraphInstantiate(&impl_->exec, graph, 0);
    if (made != cudaSuccess) {
      impl_->error = std::string("instantiation failed: ") + cudaGetErrorString(made);
      impl_->exec = nullptr;
    }
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();  // drop the error a failed recording leaves for the next check; the caller falls back
  return impl_->exec != nullptr;
}

bool StepGraph::recorded() const { return impl_->exec != nullptr; }

void StepGraph::replay() {
  check(impl_->exec != nullptr, ErrorKind::internal, "StepGraph::replay without a recording");
  cuda::check_cuda(cudaGraphLaunch(impl_->exec, cuda::stream()), "step graph replay");
}

void StepGraph::clear() { impl_->destroy(); }

const std::string& StepGraph::last_error() const { return impl_->error; }

}  // namespace sanctum
