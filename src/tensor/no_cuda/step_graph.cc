// Without CUDA nothing records: callers see record() fail and run their work directly.
#include "tensor/step_graph.h"

#include <string>

namespace sanctum {

struct StepGraph::Impl {
  std::string error = "built without CUDA";
};

StepGraph::StepGraph() : impl_(std::make_unique<Impl>()) {}
StepGraph::~StepGraph() = default;
StepGraph::StepGraph(StepGraph&&) noexcept = default;
StepGraph& StepGraph::operator=(StepGraph&&) noexcept = default;

bool StepGraph::recording_now() { return false; }
bool StepGraph::record(const std::function<void()>&) { return false; }
bool StepGraph::recorded() const { return false; }
bool StepGraph::updated_in_place() const { return false; }
void StepGraph::replay() {}
void StepGraph::clear() {}
const std::string& StepGraph::last_error() const { return impl_->error; }

}  // namespace sanctum
