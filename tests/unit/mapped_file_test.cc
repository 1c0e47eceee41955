// release_mapped_pages: whole pages of a mapped file leave the resident set, their bytes stay
// readable, ranges released one after another merge, and memory that is not a mapped file is left alone.
#include "base/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../resident_memory.h"

namespace sanctum {
namespace {

namespace fs = std::filesystem;

class ReleaseMappedPages : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sanctum-map-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    path_ = dir_ + "/blob";
    bytes_.resize(16 * page_);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<char>(i * 131 + i / 4096);
    std::ofstream(path_, std::ios::binary).write(bytes_.data(), static_cast<std::streamsize>(bytes_.size()));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Reads every byte of the mapping (faulting it in) and checks it against the file's contents.
  void expect_contents(const MappedFile& file) { EXPECT_EQ(std::string(reinterpret_cast<const char*>(file.data()), file.size()), bytes_); }

  const size_t page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::string dir_, path_;
  std::string bytes_;
};

TEST_F(ReleaseMappedPages, drops_whole_pages_and_keeps_the_bytes) {
  MappedFile file(path_);
  expect_contents(file);
  const long before = test::resident_kib(file.data());
  ASSERT_GE(before, static_cast<long>(16 * page_ / 1024)) << "the mapping was not found in /proc/self/smaps or is not resident";
  // From the middle of page 2 to the middle of page 12: pages 3..11 go, 2 and 12 hold bytes outside.
  const size_t released = release_mapped_pages(file.data() + 2 * page_ + 100, 10 * page_);
  EXPECT_EQ(released, 9 * page_);
  EXPECT_EQ(test::resident_kib(file.data()), before - static_cast<long>(9 * page_ / 1024));
  expect_contents(file);  // read again: faulted back in from the file, unchanged
}

// mapped_resident_bytes counts this process's resident pages of the live mappings: what was read, less
// what was released, and nothing once the mapping is gone (whatever the page cache still holds).
TEST_F(ReleaseMappedPages, the_mappings_resident_bytes_follow_reads_and_releases) {
  const size_t before = mapped_resident_bytes();  // other live mappings of the test program, if any
  {
    MappedFile file(path_);
    expect_contents(file);
    EXPECT_EQ(mapped_resident_bytes(), before + 16 * page_);
    release_mapped_pages(file.data(), 4 * page_);
    EXPECT_EQ(mapped_resident_bytes(), before + 12 * page_);
  }
  EXPECT_EQ(mapped_resident_bytes(), before);
  MappedFile again(path_);  // the file's pages are in the page cache, but this mapping has read none
  EXPECT_EQ(mapped_resident_bytes(), before);
}

TEST_F(ReleaseMappedPages, ranges_released_one_after_another_merge) {
  MappedFile file(path_);
  expect_contents(file);
  // Two neighbouring tensors that share page 1: neither range alone covers it, the two together do.
  EXPECT_EQ(release_mapped_pages(file.data(), page_ + page_ / 2), page_);
  EXPECT_EQ(release_mapped_pages(file.data() + page_ + page_ / 2, page_ + page_ / 2), 3 * page_);
  EXPECT_EQ(release_mapped_pages(file.data() + 5 * page_ + 1, 10), 0u) << "no whole page in the range";
  expect_contents(file);
}

TEST_F(ReleaseMappedPages, leaves_memory_that_is_not_a_mapped_file_alone) {
  std::vector<char> heap(bytes_.begin(), bytes_.end());
  EXPECT_EQ(release_mapped_pages(heap.data(), heap.size()), 0u);
  EXPECT_EQ(std::string(heap.begin(), heap.end()), bytes_);
  MappedFile file(path_);
  EXPECT_EQ(release_mapped_pages(file.data() + page_, file.size()), 0u) << "a range running past the mapping";
}

}  // namespace
}  // namespace sanctum
