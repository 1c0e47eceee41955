// Ed25519 through OpenSSL: RFC 8032 vectors, tamper detection, and private-key file hygiene.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "security/ed25519.h"
#include "security/secure_io.h"
#include "security/sha256.h"

namespace {

using sanctum::Error;
using namespace sanctum::security;
namespace fs = std::filesystem;

template <size_t N>
std::array<uint8_t, N> from_hex(const std::string& hex) {
  std::array<uint8_t, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sanctum-ed25519-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// RFC 8032 section 7.1, TEST 1 (empty message) and TEST 2 (one byte 0x72).
TEST(Ed25519, MatchesRfc8032Vectors) {
  struct Vector {
    const char *seed, *pub, *message, *sig;
  };
  const Vector vectors[] = {
      {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
       "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
       "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
      {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
       "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "\x72",
       "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
  };
  for (const Vector& v : vectors) {
    const auto seed = from_hex<32>(v.seed);
    const auto pub = from_hex<32>(v.pub);
    const auto sig = from_hex<64>(v.sig);
    EXPECT_EQ(ed25519_public_from_seed(seed), pub);
    EXPECT_EQ(ed25519_sign(seed, v.message), sig);
    EXPECT_TRUE(ed25519_verify(pub, v.message, sig));
  }
}

TEST(Ed25519, OneChangedByteOrAnotherKeyFailsVerification) {
  auto a = ed25519_generate(), b = ed25519_generate();
  const std::string msg = "abc  config.json\n";
  auto sig = ed25519_sign(a.seed, msg);
  EXPECT_TRUE(ed25519_verify(a.public_key, msg, sig));
  EXPECT_FALSE(ed25519_verify(b.public_key, msg, sig));
  EXPECT_FALSE(ed25519_verify(a.public_key, "abd  config.json\n", sig));
  sig[10] ^= 1;
  EXPECT_FALSE(ed25519_verify(a.public_key, msg, sig));
}

TEST(Ed25519, KeyFilesAreWrittenPrivateAndNotOverwritten) {
  TempDir dir;
  auto pair = ed25519_generate();
  write_key_pair(dir / "k", pair, false);
  struct stat st {};
  ASSERT_EQ(::stat((dir / "k").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  ASSERT_EQ(::stat((dir / "k.pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 32);
  EXPECT_EQ(load_private_key(dir / "k"), pair.seed);
  EXPECT_EQ(load_public_key(dir / "k.pub"), pair.public_key);

  auto other = ed25519_generate();
  EXPECT_THROW(write_key_pair(dir / "k", other, false), Error);
  EXPECT_EQ(load_private_key(dir / "k"), pair.seed);  // untouched by the refusal
  write_key_pair(dir / "k", other, true);
  EXPECT_EQ(load_private_key(dir / "k"), other.seed);
  ASSERT_EQ(::stat((dir / "k").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Ed25519, GroupOrWorldReadablePrivateKeyIsRefusedWithTheFix) {
  TempDir dir;
  write_key_pair(dir / "k", ed25519_generate(), false);
  ASSERT_EQ(::chmod((dir / "k").c_str(), 0640), 0);
  try {
    load_private_key(dir / "k");
    FAIL() << "a 0640 key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
}

TEST(Ed25519, WrongSizedFilesNameTheFile) {
  TempDir dir;
  write_file(dir / "sig", std::string(63, 'x'), 0644, WriteMode::replace);
  try {
    load_signature(dir / "sig");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir / "sig"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos);
  }
}

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
