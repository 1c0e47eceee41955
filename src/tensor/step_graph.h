#pragma once
// Device work recorded once and replayed as one unit (a CUDA graph). A decode step queues about a
// thousand small kernels whose host-side launch cost would otherwise exceed their run time; replayed,
// it costs one launch. Recorded work must not allocate device memory, copy from pageable host memory
// or wait for the device; values that change between replays live in device memory that the host
// rewrites before each replay (ops/positions.h).
#include <functional>
#include <memory>
#include <string>

namespace sanctum {

class StepGraph {
 public:
  StepGraph();
  ~StepGraph();
  StepGraph(StepGraph&&) noexcept;
  StepGraph& operator=(StepGraph&&) noexcept;

  // Records what `enqueue` queues on the process's stream (nothing runs), replacing any previous
  // recording. Returns false and holds no recording when the work cannot be recorded (enqueue threw,
  // or queued something a graph cannot hold); the reason is in last_error(). Where an earlier
  // recording of the same launches (over other buffers or values) was kept, the new one updates it in
  // place, which costs a fraction of building it anew: a step of a thousand kernels takes milliseconds
  // to instantiate.
  bool record(const std::function<void()>& enqueue);
  bool recorded() const;
  // Whether the last successful record() updated a kept recording rather than building a new one.
  bool updated_in_place() const;
  // Queues the recorded work on the stream.
  void replay();
  // Drops the recording (recorded() turns false) but keeps what a later record() can update in place.
  void clear();
  const std::string& last_error() const;

  // True while the calling thread is recording into a StepGraph (device allocation refuses then).
  static bool recording_now();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sanctum
