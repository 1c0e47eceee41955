#pragma once
// The order in which a decode step's mat-vecs read their weights. A step launches its kernels in the
// same order every time, so the weight that followed w last step follows it again: on a GPU the
// mat-vec over w warms the L2 cache with the start of that next weight as its blocks finish, and the
// small kernels between the two (norms, convolution, the recurrent rule, attention) then run while
// the next weight's first bytes arrive, where the memory bus would otherwise idle.
//
// A model owns one WeightStream and opens a Scope around each forward; the GPU mat-vec reports to
// and consults the innermost open scope on its thread. The stream holds copies of the weights it has
// seen (their storage is shared, not copied), so what it points a prefetch at is always alive, and it
// only ever links weights read within its own model's forwards. The CPU ignores it.
#include <cstdint>
#include <unordered_map>

#include "tensor/weight.h"

namespace sanctum::ops {

class WeightStream {
 public:
  // A weight as a mat-vec read it: with the columns split into `parts` ranges of `part_tiles`
  // 64-column tiles (one part: part_tiles is every tile).
  struct Read {
    Weight weight;
    int parts = 1, part_tiles = 0;
  };

  // The weight read after `w` the last time w was read, or null before that is known.
  const Read* next_after(const Weight& w) const;
  // Notes that `read` is the weight read now: it becomes the successor of the one read before it.
  void reading(const Read& read);
  size_t known() const { return next_.size(); }

  // While alive, makes `stream` the one the calling thread's mat-vecs use; scopes nest.
  class Scope {
   public:
    explicit Scope(WeightStream& stream);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    WeightStream* outer_;
  };
  // The stream of the innermost scope open on this thread, or null.
  static WeightStream* current();

 private:
  static const void* key_of(const Weight& w) { return w.data.raw(); }
  std::unordered_map<const void*, Read> next_;
  const void* last_ = nullptr;
};

}  // namespace sanctum::ops
