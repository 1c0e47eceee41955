// The pre-bind gate: signature first, then containment, completeness and hashes; every refusal
// names the file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "base/pinned_file.h"
#include "security/ed25519.h"
#include "security/gate.h"
#include "security/model_files.h"
#include "security/parallel_hash.h"
#include "security/secure_io.h"

namespace {

using sanctum::Error;
using namespace sanctum::security;
namespace fs = std::filesystem;

struct Fixture : ::testing::Test {
  fs::path root, model;
  std::string manifest, pub, key;

  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sanctum-gate-XXXXXX").string();
    root = ::mkdtemp(tmpl.data());
    model = root / "model";
    fs::create_directory(model);
    put("config.json", R"({"model_type":"qwen2"})");
    put("tokenizer.json", "{}");
    put("model-00001-of-00002.safetensors", std::string(300000, 'a'));
    put("model-00002-of-00002.safetensors", std::string(200001, 'b'));
    put("model.safetensors.index.json",
        R"({"weight_map":{"x":"model-00001-of-00002.safetensors","y":"model-00002-of-00002.safetensors"}})");
    put("README.md", "not read by a load");
    manifest = (root / "m.sha256").string();
    key = (root / "k").string();
    pub = key + ".pub";
    write_key_pair(key, ed25519_generate(), false);
    regenerate_and_sign();
  }
  void TearDown() override { fs::remove_all(root); }

  void put(const std::string& rel, const std::string& bytes) { std::ofstream(model / rel, std::ios::binary) << bytes; }
  void regenerate_and_sign() {
    write_file(manifest, generate_manifest(model.string()).text, 0644, WriteMode::replace);
    sign();
  }
  void sign() {
    auto sig = ed25519_sign(load_private_key(key), read_all(manifest));
    write_file(manifest + ".sig", std::string(sig.begin(), sig.end()), 0644, WriteMode::replace);
  }
  VerifyReport verify() { return verify_model_against_manifest(model.string(), manifest, std::nullopt, pub); }
  std::string refusal() {
    try {
      verify();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(Fixture, IntactSignedModelPasses) {
  VerifyReport r = verify();
  EXPECT_TRUE(r.signature_checked);
  EXPECT_EQ(r.files, 5u);  // README.md is not something a load reads
  EXPECT_EQ(r.bytes, fs::file_size(model / "config.json") + 2 + 300000 + 200001 + fs::file_size(model / "model.safetensors.index.json"));
}

TEST_F(Fixture, ReportHoldsTheVerifiedFilesOpenForTheLoader) {
  VerifyReport r = verify();
  ASSERT_EQ(r.pinned.size(), 5u);
  const std::string rel = "model-00001-of-00002.safetensors";
  const sanctum::PinnedFile& shard = r.pinned.at(model.string(), rel);
  EXPECT_EQ(shard.identity().bytes, 300000u);
  EXPECT_TRUE(sanctum::still_same_file(shard.fd(), shard.identity()));
  EXPECT_NO_THROW(r.pinned.check_in_place(model.string()));
  // Replaced after verification by identical bytes under a new inode: the loader can still tell.
  fs::remove(model / rel);
  put(rel, std::string(300000, 'a'));
  int replaced = ::open((model / rel).c_str(), O_RDONLY);
  ASSERT_GE(replaced, 0);
  EXPECT_FALSE(sanctum::still_same_file(replaced, shard.identity()));
  ::close(replaced);
  try {
    r.pinned.check_in_place(model.string());
    ADD_FAILURE() << "a replaced shard passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(rel + ": replaced since it was verified against " + manifest), std::string::npos) << e.what();
  }
}

TEST_F(Fixture, AHeldFileWrittenInPlaceIsNoLongerTheSameFile) {
  VerifyReport r = verify();
  const sanctum::PinnedFile& tok = r.pinned.at(model.string(), "tokenizer.json");
  std::ofstream(model / "tokenizer.json", std::ios::binary | std::ios::app) << " ";
  EXPECT_FALSE(sanctum::still_same_file(tok.fd(), tok.identity()));
  EXPECT_THROW(tok.check_unchanged("tokenizer.json"), Error);
}

TEST_F(Fixture, GeneratedManifestIsSortedAndStable) {
  std::string a = generate_manifest(model.string(), 1).text, b = generate_manifest(model.string(), 4).text;
  EXPECT_EQ(a, b);
  EXPECT_LT(a.find("config.json"), a.find("model-00001"));
  EXPECT_LT(a.find("model-00002"), a.find("model.safetensors.index.json"));
  EXPECT_EQ(a.find("README.md"), std::string::npos);
}

TEST_F(Fixture, FlippedByteInAShardIsNamed) {
  std::fstream f(model / "model-00002-of-00002.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(123456);
  f.put('c');
  f.close();
  std::string err = refusal();
  EXPECT_NE(err.find("hash mismatch: model-00002-of-00002.safetensors"), std::string::npos) << err;
}

TEST_F(Fixture, TruncatedShardIsNamed) {
  fs::resize_file(model / "model-00001-of-00002.safetensors", 1000);
  EXPECT_NE(refusal().find("hash mismatch: model-00001-of-00002.safetensors"), std::string::npos);
}

TEST_F(Fixture, MissingShardIsNamed) {
  fs::remove(model / "model-00001-of-00002.safetensors");
  EXPECT_NE(refusal().find("missing file: model-00001-of-00002.safetensors"), std::string::npos);
}

TEST_F(Fixture, AddedUnlistedShardIsNamed) {
  put("model-00003-of-00002.safetensors", "extra");
  EXPECT_NE(refusal().find("unlisted file the load would read: model-00003-of-00002.safetensors"), std::string::npos);
}

TEST_F(Fixture, UnlistedFilesThatALoadDoesNotReadAreIgnored) {
  put("notes.txt", "x");
  fs::create_directory(model / "original");
  put("original/consolidated.safetensors", "x");
  EXPECT_NO_THROW(verify());
}

TEST_F(Fixture, EditedManifestFailsTheSignatureBeforeAnyHashing) {
  std::string text = read_all(manifest);
  text[0] = text[0] == '0' ? '1' : '0';
  write_file(manifest, text, 0644, WriteMode::replace);
  std::string err = refusal();
  EXPECT_EQ(err.rfind("signature verification FAILED", 0), 0u) << err;
  EXPECT_NE(err.find("not signed by this key"), std::string::npos);
}

TEST_F(Fixture, ManifestSignedByAnotherKeyFails) {
  auto other = ed25519_generate();
  auto sig = ed25519_sign(other.seed, read_all(manifest));
  write_file(manifest + ".sig", std::string(sig.begin(), sig.end()), 0644, WriteMode::replace);
  std::string err = refusal();
  EXPECT_EQ(err.rfind("signature verification FAILED", 0), 0u) << err;
}

TEST_F(Fixture, WrongPublicKeyFails) {
  write_key_pair((root / "other").string(), ed25519_generate(), false);
  try {
    verify_model_against_manifest(model.string(), manifest, std::nullopt, (root / "other.pub").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("signature verification FAILED", 0), 0u) << e.what();
  }
}

TEST_F(Fixture, SignatureWithoutPublicKeyIsAnArgumentError) {
  try {
    verify_model_against_manifest(model.string(), manifest, manifest + ".sig", std::nullopt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), sanctum::ErrorKind::invalid_argument);
  }
}

TEST_F(Fixture, SymlinkOutOfTheDirectoryIsRefused) {
  std::ofstream(root / "outside.safetensors") << "x";
  fs::create_symlink(root / "outside.safetensors", model / "model-00003-of-00002.safetensors");
  std::string text = read_all(manifest) + std::string(64, '0') + "  model-00003-of-00002.safetensors\n";
  write_file(manifest, text, 0644, WriteMode::replace);
  sign();
  std::string err = refusal();
  EXPECT_NE(err.find("path escapes the model directory: model-00003-of-00002.safetensors"), std::string::npos) << err;
  EXPECT_THROW(generate_manifest(model.string()), Error);
}

TEST_F(Fixture, SymlinkInsideTheDirectoryIsFollowed) {
  fs::create_directory(model / "blobs");
  fs::rename(model / "tokenizer.json", model / "blobs" / "tok");
  fs::create_symlink("blobs/tok", model / "tokenizer.json");
  regenerate_and_sign();
  EXPECT_NO_THROW(verify());
}

TEST_F(Fixture, DanglingSymlinkIsReportedMissing) {
  fs::remove(model / "tokenizer.json");
  fs::create_symlink("nowhere.json", model / "tokenizer.json");
  std::string err = refusal();
  EXPECT_NE(err.find("missing file: tokenizer.json"), std::string::npos) << err;
  EXPECT_NE(err.find("symlink"), std::string::npos) << err;
}

TEST_F(Fixture, DotDotAndAbsoluteEntriesAreRefusedByLine) {
  write_file(manifest, read_all(manifest) + std::string(64, '0') + "  ../k\n", 0644, WriteMode::replace);
  sign();
  EXPECT_NE(refusal().find("'..'"), std::string::npos);
  regenerate_and_sign();
  write_file(manifest, read_all(manifest) + std::string(64, '0') + "  /etc/hostname\n", 0644, WriteMode::replace);
  sign();
  EXPECT_NE(refusal().find("absolute path '/etc/hostname'"), std::string::npos);
}

TEST_F(Fixture, IndexNamingAMissingShardIsAFileTheLoadWouldRead) {
  put("model.safetensors.index.json", R"({"weight_map":{"x":"model-00001-of-00002.safetensors","z":"model-00009.safetensors"}})");
  auto files = files_a_load_reads(model.string());
  EXPECT_NE(std::find(files.begin(), files.end(), "model-00009.safetensors"), files.end());
  EXPECT_THROW(generate_manifest(model.string()), Error);
}

TEST_F(Fixture, IndexEscapingTheDirectoryIsRefused) {
  put("model.safetensors.index.json", R"({"weight_map":{"x":"../k"}})");
  EXPECT_THROW(files_a_load_reads(model.string()), Error);
}

TEST(ParallelHash, AgreesWithOneThreadAndReportsFailuresPerFile) {
  std::string tmpl = (fs::temp_directory_path() / "sanctum-ph-XXXXXX").string();
  fs::path dir = ::mkdtemp(tmpl.data());
  std::vector<std::string> paths;
  for (int i = 0; i < 7; ++i) {
    paths.push_back((dir / std::to_string(i)).string());
    std::ofstream(paths.back(), std::ios::binary) << std::string(static_cast<size_t>(i) * 1000003, static_cast<char>('a' + i));
  }
  paths.push_back((dir / "missing").string());
  HashRun one = hash_files_parallel(paths, 1), many = hash_files_parallel(paths, 4);
  for (size_t i = 0; i + 1 < paths.size(); ++i) {
    ASSERT_TRUE(one.outcomes[i].ok && many.outcomes[i].ok);
    EXPECT_EQ(one.outcomes[i].digest.digest, many.outcomes[i].digest.digest);
    EXPECT_EQ(many.outcomes[i].digest.bytes, i * 1000003);
  }
  EXPECT_FALSE(many.outcomes.back().ok);
  EXPECT_NE(many.outcomes.back().error.find("missing"), std::string::npos);
  EXPECT_EQ(many.threads, 4);
  fs::remove_all(dir);
}

}  // namespace
