#pragma once
// Host address space reserved up front and committed a prefix at a time: a buffer that grows in
// place, so its address never changes and growing never holds an old and a new copy at once.
// Reserved pages can be neither read nor written and are not counted against the kernel's commit
// limit (whatever vm.overcommit_memory says); commit() makes a longer prefix readable and writable.
// Committed pages read as zero until written and become resident only once touched.
#include <cstddef>
#include <memory>

namespace sanctum {

class HostReservation {
 public:
  // Null when the kernel refuses `bytes` of address space (e.g. under a ulimit -v): the caller
  // reserves less.
  static std::shared_ptr<HostReservation> reserve(size_t bytes);
  ~HostReservation();
  HostReservation(const HostReservation&) = delete;
  HostReservation& operator=(const HostReservation&) = delete;

  void* data() const { return base_; }
  size_t reserved() const { return reserved_; }
  size_t committed() const { return committed_; }  // whole pages; never shrinks
  // Makes bytes [0, bytes) usable (bytes <= reserved()). Throws Error(io) naming the sizes when the
  // kernel refuses (the commit limit under vm.overcommit_memory=2).
  void commit(size_t bytes);

 private:
  HostReservation(void* base, size_t reserved) : base_(base), reserved_(reserved) {}
  void* base_;
  size_t reserved_;
  size_t committed_ = 0;
};

}  // namespace sanctum
