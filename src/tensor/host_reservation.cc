#include "tensor/host_reservation.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/error.h"

namespace sanctum {

namespace {
size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}
size_t whole_pages(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }
}  // namespace

std::shared_ptr<HostReservation> HostReservation::reserve(size_t bytes) {
  const size_t size = whole_pages(bytes == 0 ? 1 : bytes);
  // Private anonymous memory without PROT_WRITE is address space only: the kernel charges the commit
  // limit when mprotect makes it writable, so an over-commit fails there, cleanly, not at a page fault.
  void* p = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<HostReservation>(new HostReservation(p, size));
}

HostReservation::~HostReservation() { ::munmap(base_, reserved_); }

void HostReservation::commit(size_t bytes) {
  check(bytes <= reserved_, ErrorKind::internal,
        "HostReservation::commit: " + std::to_string(bytes) + " bytes past the " + std::to_string(reserved_) + " reserved");
  const size_t end = whole_pages(bytes);
  if (end <= committed_) return;
  if (::mprotect(static_cast<char*>(base_) + committed_, end - committed_, PROT_READ | PROT_WRITE) != 0)
    fail(ErrorKind::io, "out of memory committing " + std::to_string(end - committed_) + " more bytes of host memory (" +
                            std::to_string(committed_) + " committed): " + std::strerror(errno) +
                            "; lower --memory-limit-mb or --max-seqs, or raise the commit limit (vm.overcommit_ratio)");
  committed_ = end;
}

}  // namespace sanctum
