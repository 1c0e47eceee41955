// Images in requests: the three APIs' image parts become {"type": "image"} content items (the form the
// chat template test renders, tests/image/test_image_chat_template.py) plus the image bytes in prompt
// order; limits, URL policy and bad data are 400s naming the client's field; placeholders expand to
// each image's token count.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/messages_request.h"
#include "server/openai_request.h"
#include "server/request_images.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace sanctum::server {
namespace {

using json = nlohmann::ordered_json;

// "hello" and "world" in base64.
const std::string kHello = "aGVsbG8=", kWorld = "d29ybGQ=";

std::string data_url(const std::string& b64) { return "data:image/png;base64," + b64; }

OpenAiRequest chat(const json& messages) { return parse_chat_request(json{{"model", "m"}, {"messages", messages}}); }

std::string param_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.param();
  }
  return "(accepted)";
}

TEST(ImageRequest, chat_image_parts_become_image_items_in_order) {
  const OpenAiRequest r = chat(json::parse(R"([{"role": "user", "content": [
      {"type": "text", "text": "Compare"},
      {"type": "image_url", "image_url": {"url": ")" +
                                           data_url(kHello) + R"(", "detail": "low"}},
      {"type": "text", "text": "with"},
      {"type": "image_url", "image_url": ")" +
                                           data_url(kWorld) + R"("}]}])"));
  const json want =
      json::parse(R"([{"type": "text", "text": "Compare"}, {"type": "image"}, {"type": "text", "text": "with"}, {"type": "image"}])");
  EXPECT_EQ(r.messages[0]["content"], want);
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].bytes, "hello");
  EXPECT_EQ(r.images[1].bytes, "world");
  EXPECT_EQ(r.images[1].param, "messages[0].content[3]");
}

TEST(ImageRequest, text_only_content_stays_one_joined_string) {
  const OpenAiRequest r =
      chat(json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])"));
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
  EXPECT_TRUE(r.images.empty());
}

TEST(ImageRequest, images_across_turns_keep_conversation_order) {
  const OpenAiRequest r = chat(json::parse(R"([
      {"role": "user", "content": [{"type": "image_url", "image_url": {"url": ")" +
                                           data_url(kHello) + R"("}}, {"type": "text", "text": "?"}]},
      {"role": "assistant", "content": "red"},
      {"role": "user", "content": [{"type": "image_url", "image_url": {"url": ")" +
                                           data_url(kWorld) + R"("}}]}])"));
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].bytes, "hello");
  EXPECT_EQ(r.images[1].bytes, "world");
  EXPECT_EQ(r.messages[2]["content"], json::parse(R"([{"type": "image"}])"));
}

TEST(ImageRequest, bad_chat_image_parts_name_their_field) {
  auto with_part = [](const std::string& part) {
    return param_of([&] { chat(json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "x"}, )" + part + "]}]")); });
  };
  EXPECT_EQ(with_part(R"({"type": "image_url", "image_url": {"url": ")" + data_url(kHello) + R"(", "detail": "ultra"}})"),
            "messages[0].content[1].image_url.detail");
  EXPECT_EQ(with_part(R"({"type": "image_url", "image_url": {}})"), "messages[0].content[1].image_url.url");
  EXPECT_EQ(with_part(R"({"type": "image_url", "image_url": {"url": 3}})"), "messages[0].content[1].image_url.url");
  EXPECT_EQ(with_part(R"({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}})"), "messages[0].content[1]");
  EXPECT_EQ(with_part(R"({"type": "image_url", "image_url": {"url": "data:image/png,raw"}})"), "messages[0].content[1]");
  EXPECT_EQ(with_part(R"({"type": "image_url", "image_url": {"url": "ftp://host/a.png"}})"), "messages[0].content[1]");
  EXPECT_EQ(param_of([&] {
              chat(json::parse(R"([{"role": "assistant", "content": [{"type": "image_url", "image_url": ")" + data_url(kHello) +
                               R"("}]}])"));
            }),
            "messages[0].content");
}

TEST(ImageRequest, messages_image_blocks_reach_the_chat_path) {
  const json body = json::parse(R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
      {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": ")" +
                                kHello + R"("}},
      {"type": "text", "text": "and"},
      {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]})");
  const OpenAiRequest r = parse_translated(translate_messages_request(body).chat);
  EXPECT_EQ(r.messages[0]["content"], json::parse(R"([{"type": "image"}, {"type": "text", "text": "and"}, {"type": "image"}])"));
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].bytes, "hello");
  EXPECT_EQ(r.images[1].url, "https://example.com/a.png");
  EXPECT_EQ(r.images[1].param, "messages[0].content[2]");
  const json bad = json::parse(R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
      {"type": "image", "source": {"type": "file", "file_id": "f"}}]}]})");
  EXPECT_EQ(param_of([&] { translate_messages_request(bad); }), "messages[0].content[0].source.type");
}

TEST(ImageRequest, responses_input_images_reach_the_chat_path) {
  ResponseStore store;
  const json body = json::parse(R"({"model": "m", "input": [{"role": "user", "content": [
      {"type": "input_text", "text": "what"},
      {"type": "input_image", "image_url": ")" +
                                data_url(kWorld) + R"(", "detail": "auto"}]}]})");
  const OpenAiRequest r = parse_translated(translate_responses_request(body, store).chat);
  EXPECT_EQ(r.messages.back()["content"], json::parse(R"([{"type": "text", "text": "what"}, {"type": "image"}])"));
  ASSERT_EQ(r.images.size(), 1u);
  EXPECT_EQ(r.images[0].bytes, "world");
}

TEST(ImageRequest, limits_and_url_policy_are_400s_naming_the_image) {
  std::vector<RequestImage> images = {image_from_url(data_url(kHello), "messages[0].content[0]"),
                                      image_from_url("https://example.com/a.png", "messages[0].content[1]")};
  ImageOptions options;
  image::ProcessorConfig config;
  // The URL policy comes before any image is decoded or fetched.
  try {
    prepare_request_images(images, options, config, nullptr);
    FAIL() << "took a remote URL without --allow-image-urls";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "messages[0].content[1]");
    EXPECT_NE(std::string(e.what()).find("--allow-image-urls"), std::string::npos);
  }
  images.pop_back();
  try {
    prepare_request_images(images, options, config, nullptr);
    FAIL() << "accepted bytes that are no image";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "messages[0].content[0]");
    EXPECT_NE(std::string(e.what()).find("PNG, JPEG, WebP or GIF"), std::string::npos);
  }
  options.max_images_per_request = 1;
  images.push_back(image_from_url(data_url(kWorld), "messages[0].content[2]"));
  try {
    prepare_request_images(images, options, config, nullptr);
    FAIL() << "accepted more images than --max-images-per-request";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "messages[0].content[2]");
    EXPECT_NE(std::string(e.what()).find("--max-images-per-request limit of 1"), std::string::npos);
  }
}

TEST(ImageRequest, each_placeholder_expands_to_its_image_token_count) {
  image::PreparedImage a, b;
  a.grid_thw = {1, 4, 6};  // 24 patches, merge 2: 6 tokens
  b.grid_thw = {1, 2, 2};  // 1 token
  const int32_t pad = 99;
  const std::vector<int32_t> ids = {1, 2, pad, 3, pad, 4};
  std::vector<int32_t> want = {1, 2};
  want.insert(want.end(), 6, pad);
  want.push_back(3);
  want.push_back(pad);
  want.push_back(4);
  EXPECT_EQ(expand_image_placeholders(ids, pad, {a, b}), want);
  EXPECT_EQ(param_of([&] { expand_image_placeholders(ids, pad, {a}); }), "messages");
  EXPECT_EQ(param_of([&] { expand_image_placeholders({1, pad}, pad, {a, b}); }), "messages");
}

}  // namespace
}  // namespace sanctum::server
