#include "weights/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "../weights/safetensors_writer.h"
#include "base/error.h"

namespace sanctum {
namespace {

using testing::bytes_of;
using testing::frame;
using testing::make_safetensors;
using testing::StTensor;
using testing::TempDir;

// Runs f, expects sanctum::Error whose message contains every fragment.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << *fragments.begin();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "errors are one line: " << msg;
  }
}

SafetensorsHeader parse(const std::string& bytes, const std::string& what = "model.safetensors") {
  return parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what);
}

TEST(Safetensors, round_trip_of_every_dtype_is_a_zero_copy_view) {
  TempDir dir;
  std::vector<StTensor> tensors = {
      {"f32", "F32", {2, 3}, bytes_of(std::vector<float>{1, 2, 3, 4, 5, 6})},
      {"bf16", "BF16", {3}, bytes_of(std::vector<uint16_t>{f32_to_bf16(1.5f), f32_to_bf16(-2.0f), f32_to_bf16(0.25f)})},
      {"f16", "F16", {2}, bytes_of(std::vector<uint16_t>{f32_to_f16(3.0f), f32_to_f16(-0.5f)})},
      {"i32", "I32", {2}, bytes_of(std::vector<int32_t>{-7, 9})},
      {"u32", "U32", {1, 2}, bytes_of(std::vector<uint32_t>{0xdeadbeefu, 1})},
      {"u8", "U8", {4}, bytes_of(std::vector<uint8_t>{1, 2, 3, 255})},
      {"i64", "I64", {2}, bytes_of(std::vector<int64_t>{-1, int64_t{1} << 40})},
      {"bool", "BOOL", {3}, bytes_of(std::vector<uint8_t>{1, 0, 1})},
      {"scalar", "F32", {}, bytes_of(std::vector<float>{42})},
      {"empty", "F32", {0, 4}, ""},
  };
  testing::write_bytes(dir.path / "model.safetensors", make_safetensors(tensors, {{"format", "pt"}}));

  std::weak_ptr<SafetensorsFile> weak;
  Tensor bf16;
  {
    auto f = SafetensorsFile::open(dir.file("model.safetensors"));
    weak = f;
    EXPECT_EQ(f->metadata().at("format"), "pt");
    ASSERT_EQ(f->entries().size(), tensors.size());
    auto find = [&](const std::string& name) {
      for (size_t i = 0; i < f->entries().size(); ++i)
        if (f->entries()[i].name == name) return f->view(i);
      ADD_FAILURE() << name;
      return Tensor();
    };
    Tensor t = find("f32");
    EXPECT_EQ(t.dtype(), DType::f32);
    EXPECT_EQ(t.ndim(), 2);
    EXPECT_EQ(t.dim(1), 3);
    EXPECT_EQ(t.data<float>()[5], 6.0f);
    bf16 = find("bf16");
    EXPECT_EQ(bf16.dtype(), DType::bf16);
    EXPECT_EQ(find("f16").dtype(), DType::f16);
    EXPECT_EQ(f16_to_f32(find("f16").data<uint16_t>()[1]), -0.5f);
    EXPECT_EQ(find("i32").data<int32_t>()[0], -7);
    EXPECT_EQ(find("u32").data<uint32_t>()[0], 0xdeadbeefu);
    EXPECT_EQ(find("u8").data<uint8_t>()[3], 255);
    EXPECT_EQ(find("i64").data<int64_t>()[1], int64_t{1} << 40);
    EXPECT_EQ(find("bool").dtype(), DType::u8);
    EXPECT_EQ(find("scalar").ndim(), 0);
    EXPECT_EQ(find("scalar").data<float>()[0], 42.0f);
    EXPECT_EQ(find("empty").numel(), 0);
  }
  // The view keeps the mapping alive after the file object is released.
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(bf16_to_f32(bf16.data<uint16_t>()[1]), -2.0f);
  bf16 = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(Safetensors, missing_file_is_not_found_naming_the_path) {
  TempDir dir;
  try {
    SafetensorsFile::open(dir.file("nope.safetensors"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::not_found);
    EXPECT_NE(std::string(e.what()).find("nope.safetensors"), std::string::npos);
  }
}

TEST(Safetensors, truncated_file_is_rejected) {
  const std::string good = make_safetensors({testing::f32_tensor("model.norm.weight", {1024})});
  expect_error([&] { parse(good.substr(0, 5)); }, {"model.safetensors", "too short", "truncated"});
  // The data section lost its tail: the tensor's offsets point past the end.
  expect_error(
      [&] { parse(good.substr(0, good.size() - 100)); },
      {"model.safetensors: tensor 'model.norm.weight' data_offsets [0, 4096] exceed the data section (3996 bytes): file truncated?"});
  // A file written to disk and cut short.
  TempDir dir;
  testing::write_bytes(dir.path / "model.safetensors", good.substr(0, good.size() / 2));
  expect_error([&] { SafetensorsFile::open(dir.file("model.safetensors")); },
               {dir.file("model.safetensors"), "model.norm.weight", "truncated"});
}

TEST(Safetensors, header_length_larger_than_the_file_is_rejected) {
  std::string bytes = frame("{}", "");
  bytes[0] = static_cast<char>(0xff);
  bytes[1] = static_cast<char>(0xff);
  expect_error([&] { parse(bytes); }, {"model.safetensors", "header length 65535 exceeds the file (10 bytes)"});
  std::string huge = frame("{}", "");
  huge[7] = 0x7f;
  expect_error([&] { parse(huge); }, {"header length", "exceeds the file"});
}

TEST(Safetensors, implausibly_large_header_is_rejected_before_parsing) {
  std::string bytes = frame(std::string(100'000'001, ' '), "");
  expect_error([&] { parse(bytes); }, {"implausibly large"});
}

TEST(Safetensors, header_that_is_not_json_is_rejected) {
  expect_error([&] { parse(frame("{not json", "")); }, {"model.safetensors", "header is not valid JSON"});
  expect_error([&] { parse(frame("[1, 2]", "")); }, {"header is not a JSON object"});
  expect_error([&] { parse(frame("", "")); }, {"not valid JSON"});
  expect_error([&] { parse(frame(R"({"w": 3})", "")); }, {"tensor 'w'", "not a JSON object"});
  expect_error([&] { parse(frame(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", "1234")); }, {"tensor 'w'", "dtype"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", "1234")); }, {"tensor 'w'", "shape"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [1]}})", "1234")); }, {"tensor 'w'", "data_offsets"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", "1234")); },
               {"tensor 'w'", "data_offsets"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "1234")); },
               {"tensor 'w'", "non-negative integers"});
}

TEST(Safetensors, offsets_out_of_range_are_rejected) {
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", "1234")); },
               {"tensor 'w' data_offsets [8, 12] exceed the data section (4 bytes)"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", "1234")); },
               {"tensor 'w'", "end before they begin"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", "1234")); },
               {"tensor 'w'", "non-negative"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551615, 0]}})", "1234")); },
               {"tensor 'w'", "non-negative"});
  // Two tensors claiming the same bytes.
  expect_error(
      [&] {
        parse(frame(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                    "12345678"));
      },
      {"tensor 'b'", "overlap tensor 'a'"});
}

TEST(Safetensors, size_mismatch_between_shape_and_offsets_is_rejected) {
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 8]}})", "12345678")); },
               {"tensor 'w'", "shape (2, 3) F32 needs 6 x 4 bytes but data_offsets [0, 8] hold 8"});
  // Dimensions whose product overflows 64 bits must not wrap around to a matching size.
  expect_error([&] { parse(frame(R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296, 1], "data_offsets": [0, 0]}})", "")); },
               {"tensor 'w'", "more than 2^64"});
  expect_error([&] { parse(frame(R"({"w": {"dtype": "I64", "shape": [2305843009213693952], "data_offsets": [0, 0]}})", "")); },
               {"tensor 'w'", "needs"});
}

TEST(Safetensors, negative_dimension_is_rejected) {
  expect_error([&] { parse(frame(R"({"w": {"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 8]}})", "12345678")); },
               {"tensor 'w'", "negative dimension -1"});
}

TEST(Safetensors, unsupported_dtype_names_the_tensor_and_dtype) {
  for (const char* dt : {"F64", "F8_E4M3", "F8_E5M2", "I8", "I16", "U64", "weird"}) {
    std::string header = std::string(R"({"model.embed.weight": {"dtype": ")") + dt + R"(", "shape": [1], "data_offsets": [0, 8]}})";
    try {
      parse(frame(header, "12345678"));
      ADD_FAILURE() << dt;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tensor 'model.embed.weight'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("dtype ") + dt), std::string::npos) << msg;
    }
  }
}

TEST(Safetensors, metadata_is_optional_and_non_string_values_are_skipped) {
  auto h = parse(frame(R"({"__metadata__": {"format": "mlx", "n": 3}, "w": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "ab"));
  EXPECT_EQ(h.metadata.size(), 1u);
  EXPECT_EQ(h.metadata.at("format"), "mlx");
  ASSERT_EQ(h.entries.size(), 1u);
  EXPECT_EQ(h.data_size, 2u);
  EXPECT_TRUE(parse(frame("{}", "")).entries.empty());
  expect_error([&] { parse(frame(R"({"__metadata__": [1]})", "")); }, {"__metadata__"});
}

TEST(Safetensors, tensors_of_more_than_four_dims_parse_but_refuse_a_view) {
  // Vision towers carry 5-D conv weights; opening the file must not fail because of them.
  TempDir dir;
  std::string bytes = make_safetensors({{"model.visual.patch_embed.proj.weight", "U8", {1, 1, 1, 1, 2}, "ab"}, {"w", "U8", {2}, "cd"}});
  testing::write_bytes(dir.path / "m.safetensors", bytes);
  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_EQ(f->entries().size(), 2u);
  size_t five = f->entries()[0].name == "w" ? 1 : 0;
  expect_error([&] { f->view(five); }, {"model.visual.patch_embed.proj.weight", "5 dimensions"});
  EXPECT_EQ(f->view(1 - five).data<uint8_t>()[0], 'c');
}

}  // namespace
}  // namespace sanctum
