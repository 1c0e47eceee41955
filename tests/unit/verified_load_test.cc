// The weights a manifest check verified are the bytes the load maps: `sanctum serve` hands the gate's
// held-open files (VerifyReport::pinned) to load_model, and a file swapped, written, removed or
// added between the check and the load makes the load refuse, naming the file and what to do.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "base/pinned_file.h"
#include "model/model.h"
#include "security/gate.h"
#include "security/secure_io.h"

namespace sanctum {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(SANCTUM_TEST_DATA_DIR) / "hf_fixtures" / "qwen3_5_text";

std::string contents(const fs::path& p) { return security::read_all(p.string(), size_t{1} << 30); }
void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// What `sanctum serve --manifest` does: the gate, then the load of the files it verified.
std::unique_ptr<Model> load_verified(const std::string& dir, const security::VerifyReport& report) {
  return load_model(dir, Device::cpu, Tuning{}, &report.pinned);
}

struct VerifiedLoad : ::testing::Test {
  fs::path root, model, shard;
  std::string manifest;

  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sanctum-vload-XXXXXX").string();
    root = ::mkdtemp(tmpl.data());
    model = root / "model";
    fs::create_directory(model);
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors"}) fs::copy_file(kFixture / f, model / f);
    shard = model / "model.safetensors";
    manifest = (root / "model.sha256").string();
    security::write_file(manifest, security::generate_manifest(model.string()).text, 0644, security::WriteMode::replace);
  }
  void TearDown() override { fs::remove_all(root); }

  security::VerifyReport verify() { return security::verify_model_against_manifest(model.string(), manifest, std::nullopt, std::nullopt); }

  // The load's refusal, or "" when it loaded.
  std::string load_refusal(const security::VerifyReport& report) {
    try {
      load_verified(model.string(), report);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << e.what();
      return e.what();
    }
    return "";
  }
};

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in: " << text;
}

TEST_F(VerifiedLoad, an_untouched_verified_model_loads_and_computes_what_a_plain_load_does) {
  const security::VerifyReport r = verify();
  ASSERT_EQ(r.pinned.size(), 3u);
  auto verified = load_verified(model.string(), r), plain = load_model(model.string());
  const std::vector<int32_t> prompt = {1, 2, 3};
  SequenceState a = verified->new_state(), b = plain->new_state();
  const Tensor la = verified->forward(prompt, a, LogitsFor::last), lb = plain->forward(prompt, b, LogitsFor::last);
  const int64_t vocab = verified->vocab_size();
  EXPECT_EQ(std::vector<float>(la.data<float>(), la.data<float>() + vocab), std::vector<float>(lb.data<float>(), lb.data<float>() + vocab));
}

TEST_F(VerifiedLoad, a_shard_swapped_between_check_and_load_is_refused) {
  const security::VerifyReport r = verify();
  // Another file renamed over the shard: tampered weights, still a valid safetensors file.
  std::string tampered = contents(shard);
  tampered.back() = static_cast<char>(tampered.back() ^ 0x40);
  write(root / "tampered", tampered);
  fs::rename(root / "tampered", shard);
  const std::string err = load_refusal(r);
  expect_has(err, shard.string() + ": replaced since it was verified against " + manifest);
  expect_has(err, "regenerate and sign the manifest");
}

TEST_F(VerifiedLoad, a_shard_replaced_by_an_identical_copy_is_refused) {
  const security::VerifyReport r = verify();
  const std::string same = contents(shard);
  fs::remove(shard);
  write(shard, same);  // a new inode: not the file that was hashed, whatever it holds
  expect_has(load_refusal(r), shard.string() + ": replaced since it was verified");
}

TEST_F(VerifiedLoad, a_shard_written_in_place_between_check_and_load_is_refused) {
  const security::VerifyReport r = verify();
  std::ofstream(shard, std::ios::binary | std::ios::app) << "x";  // same inode, one byte more
  const std::string err = load_refusal(r);
  expect_has(err, shard.string() + ": changed since it was verified");
  expect_has(err, std::to_string(fs::file_size(shard) - 1) + " bytes then");
}

TEST_F(VerifiedLoad, a_config_removed_between_check_and_load_is_refused) {
  const security::VerifyReport r = verify();
  fs::remove(model / "generation_config.json");  // the load would carry on without it
  expect_has(load_refusal(r), (model / "generation_config.json").string() + ": removed since it was verified");
}

TEST_F(VerifiedLoad, an_index_added_between_check_and_load_is_refused) {
  const security::VerifyReport r = verify();
  write(model / "model.safetensors.index.json", R"({"weight_map":{}})");
  const std::string err = load_refusal(r);
  expect_has(err, (model / "model.safetensors.index.json").string() + ": the load reads this file but " + manifest + " does not list it");
}

TEST_F(VerifiedLoad, an_empty_verified_set_refuses_every_weight) {
  // A check that never handed over its files: the load must not fall back to opening paths.
  const security::VerifyReport r;
  expect_has(load_refusal(r), shard.string() + ": the load reads this file but the manifest does not list it");
}

TEST(PinnedFile, mapping_it_reads_the_pinned_bytes_after_its_path_named_another_file) {
  std::string tmpl = (fs::temp_directory_path() / "sanctum-pin-XXXXXX").string();
  const fs::path dir = ::mkdtemp(tmpl.data()), path = dir / "model" / "blob";
  fs::create_directory(dir / "model");
  write(path, "verified bytes");
  auto pinned = PinnedFile::open(path.string());
  // The directory moved aside and another put in its place: the path names a new file, while the
  // pinned one is untouched (renaming over it or removing it would change it, and be refused).
  fs::rename(dir / "model", dir / "aside");
  fs::create_directory(dir / "model");
  write(path, "swapped in!!!!");
  const MappedFile mapped(path.string(), *pinned);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped.data()), mapped.size()), "verified bytes");
  EXPECT_EQ(pinned->read_all(path.string()), "verified bytes");
  fs::remove_all(dir);
}

TEST(PinnedFile, a_pinned_file_unlinked_by_a_swap_is_refused_when_mapped) {
  std::string tmpl = (fs::temp_directory_path() / "sanctum-pin-XXXXXX").string();
  const fs::path dir = ::mkdtemp(tmpl.data()), path = dir / "blob";
  write(path, "verified bytes");
  auto pinned = PinnedFile::open(path.string());
  write(dir / "other", "swapped in!!!!");
  fs::rename(dir / "other", path);
  try {
    MappedFile mapped(path.string(), *pinned);
    ADD_FAILURE() << "mapped a file that was unlinked since it was pinned";
  } catch (const Error& e) {
    expect_has(e.what(), path.string() + ": changed since it was verified");
  }
  fs::remove_all(dir);
}

TEST(PinnedFile, a_symlink_or_a_directory_is_not_pinned) {
  std::string tmpl = (fs::temp_directory_path() / "sanctum-pin-XXXXXX").string();
  const fs::path dir = ::mkdtemp(tmpl.data());
  write(dir / "file", "x");
  fs::create_symlink(dir / "file", dir / "link");
  EXPECT_THROW(PinnedFile::open((dir / "link").string()), Error);
  EXPECT_THROW(PinnedFile::open(dir.string()), Error);
  EXPECT_NO_THROW(PinnedFile::open((dir / "file").string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sanctum
