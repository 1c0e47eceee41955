#pragma once
// Device work recorded once and replayed as one unit (a CUDA graph). A decode step queues about a
// thousand small kernels whose host-side launch cost would otherwise exceed their run time; replayed,
// it costs one launch. Recorded work must not allocate device memory, copy from pageable host memory
// or wait for the device; values that change between replays live in device memory that the host
// rewrites before each replay (ops/positions.h).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// A StepGraph for one set of buffers, named by a key (the addresses and sizes the step bakes in, and
// the device's allocation count: any allocation may have replaced a scratch buffer it uses).
class KeyedStep {
 public:
  using Key = std::vector<uint64_t>;
  // Runs the step `enqueue` queues. Under the key it was recorded over, replays the recording;
  // otherwise (the set changed) launches the step directly once, which allocates whatever it needs,
  // takes the key `key_after` fills after that run and records on the next call. Returns false where
  // recording failed (the step then ran launched; last_error() says why): give recording up.
  bool run(const Key& key, const std::function<void(Key&)>& key_after, const std::function<void()>& enqueue) {
    if (key != key_) {
      graph_.clear();
      enqueue();
      key_after(key_);
      return true;
    }
    if (!graph_.recorded() && !graph_.record(enqueue)) {
      enqueue();
      return false;
    }
    graph_.replay();
    return true;
  }
  const std::string& last_error() const { return graph_.last_error(); }

 private:
  StepGraph graph_;
  Key key_;
};

}  // namespace sanctum
