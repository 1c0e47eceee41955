// The manifest parser accepts exactly what `sha256sum` writes and rejects everything else with the line.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "security/manifest.h"

namespace {

using sanctum::Error;
using namespace sanctum::security;

const std::string kHexA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";  // sha256("")
const std::string kHexB = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";  // sha256("abc")

std::string parse_error(const std::string& text) {
  try {
    parse_manifest(text, "m.sha256");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ManifestParser, AcceptsCoreutilsTextAndBinaryMarkers) {
  Manifest m = parse_manifest(kHexA + "  config.json\n" + kHexB + " *model.safetensors\n", "m");
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.entries[0].path, "config.json");
  EXPECT_EQ(to_hex(m.entries[0].digest), kHexA);
  EXPECT_EQ(m.entries[1].path, "model.safetensors");
  EXPECT_EQ(m.entries[1].line, 2);
}

TEST(ManifestParser, LastLineNeedNotEndInNewline) { EXPECT_EQ(parse_manifest(kHexA + "  a", "m").entries.size(), 1u); }

TEST(ManifestParser, UppercaseHexIsTheSameDigest) {
  std::string upper = kHexB;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(to_hex(parse_manifest(upper + "  a\n", "m").entries[0].digest), kHexB);
}

TEST(ManifestParser, PathsKeepSpacesAndDropDotComponents) {
  Manifest m = parse_manifest(kHexA + "  ./sub/./my file.json \n", "m");
  EXPECT_EQ(m.entries[0].path, "sub/my file.json ");
}

TEST(ManifestParser, ErrorsNameTheLine) {
  EXPECT_NE(parse_error(kHexA + "  a\nnot a line at all\n").find("m.sha256 line 2:"), std::string::npos);
}

TEST(ManifestParser, RejectsParentDirectoryComponents) {
  EXPECT_NE(parse_error(kHexA + "  ../evil.safetensors\n").find("'..'"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "  sub/../../evil\n").find("'..'"), std::string::npos);
  EXPECT_EQ(parse_error(kHexA + "  ..hidden\n"), "");  // a name that merely starts with '..' is fine
}

TEST(ManifestParser, RejectsAbsoluteAndEmptyPaths) {
  EXPECT_NE(parse_error(kHexA + "  /etc/passwd\n").find("absolute path"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "  \n").find("line 1"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "  a//b\n").find("empty component"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "  dir/\n").find("empty component"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "  .\n").find("model directory itself"), std::string::npos);
}

TEST(ManifestParser, RejectsDuplicatesAfterNormalization) {
  std::string err = parse_error(kHexA + "  a.json\n" + kHexB + "  ./a.json\n");
  EXPECT_NE(err.find("line 2: duplicate entry for 'a.json' (first listed on line 1)"), std::string::npos) << err;
}

TEST(ManifestParser, RejectsMalformedDigestsAndSeparators) {
  EXPECT_NE(parse_error(kHexA.substr(0, 63) + "g  a\n").find("hex SHA-256"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "\tconfig.json\n").find("two spaces"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + " a\n").find("line 1"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "x  a\n").find("two spaces"), std::string::npos);
  EXPECT_NE(parse_error(kHexA.substr(0, 40) + "  a\n").find("line 1"), std::string::npos);
}

TEST(ManifestParser, RejectsBlankLinesCrlfEscapesAndBsdFormat) {
  EXPECT_NE(parse_error(kHexA + "  a\n\n" + kHexB + "  b\n").find("line 2: empty line"), std::string::npos);
  EXPECT_NE(parse_error(kHexA + "  a\r\n").find("CRLF"), std::string::npos);
  EXPECT_NE(parse_error("\\" + kHexA + "  a\\\\b\n").find("escaped"), std::string::npos);
  EXPECT_NE(parse_error("SHA256 (a) = " + kHexA + "\n").find("BSD"), std::string::npos);
}

TEST(ManifestParser, RejectsAnEmptyManifest) { EXPECT_NE(parse_error("").find("lists no files"), std::string::npos); }

TEST(ManifestParser, FormatRoundTrips) {
  Manifest m = parse_manifest(kHexA + "  a\n" + kHexB + "  b/c\n", "m");
  EXPECT_EQ(format_manifest(m.entries), kHexA + "  a\n" + kHexB + "  b/c\n");
}

TEST(ManifestParser, ControlBytesInErrorsAreEscaped) {
  std::string err = parse_error(kHexA + "  /x\x1b[2Jy\n");
  EXPECT_EQ(err.find('\x1b'), std::string::npos);
  EXPECT_NE(err.find("\\x1b"), std::string::npos);
}

}  // namespace
