#include "tensor/step_graph.h"

#include <string>

#include "base/error.h"
#include "tensor/cuda/stream.h"

namespace sanctum {

namespace {
thread_local bool t_recording = false;
}  // namespace

struct StepGraph::Impl {
  cudaGraphExec_t exec = nullptr;  // kept by clear() for the next record() to update
  bool valid = false;              // exec holds the current recording
  bool updated = false;
  std::string error;

  void destroy() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    exec = nullptr;
    valid = false;
  }

  // Makes exec run `graph`: an update in place where the kept exec has the same launches, else a new
  // instantiation. Sets error on failure.
  void adopt(cudaGraph_t graph) {
    updated = false;
    if (exec != nullptr) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(exec, graph, &info) == cudaSuccess) {
        valid = updated = true;
        return;
      }
      cudaGetLastError();  // a refused update (another topology) is not an error: instantiate instead
      destroy();
    }
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    if (made != cudaSuccess) {
      error = std::string("instantiation failed: ") + cudaGetErrorString(made);
      exec = nullptr;
      return;
    }
    valid = true;
  }
  ~Impl() { destroy(); }
};

StepGraph::StepGraph() : impl_(std::make_unique<Impl>()) {}
StepGraph::~StepGraph() = default;
StepGraph::StepGraph(StepGraph&&) noexcept = default;
StepGraph& StepGraph::operator=(StepGraph&&) noexcept = default;

bool StepGraph::recording_now() { return t_recording; }

bool StepGraph::record(const std::function<void()>& enqueue) {
  impl_->valid = false;
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
  if (impl_->error.empty()) impl_->adopt(graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();  // drop the error a failed recording leaves for the next check; the caller falls back
  return impl_->valid;
}

bool StepGraph::recorded() const { return impl_->valid; }

bool StepGraph::updated_in_place() const { return impl_->valid && impl_->updated; }

void StepGraph::replay() {
  check(impl_->valid, ErrorKind::internal, "StepGraph::replay without a recording");
  cuda::check_cuda(cudaGraphLaunch(impl_->exec, cuda::stream()), "step graph replay");
}

void StepGraph::clear() { impl_->valid = false; }

const std::string& StepGraph::last_error() const { return impl_->error; }

}  // namespace sanctum
