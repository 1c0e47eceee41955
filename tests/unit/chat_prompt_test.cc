// PromptBuilder: chat messages -> the ids a model is fed, shared by `sanctum serve` and
// `sanctum generate --chat`; and the server's request path through it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "chat/prompt_builder.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/request_prompt.h"
#include "tokenizer/tokenizer.h"

namespace sanctum {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTokenizers = SANCTUM_TEST_DATA_DIR "/tokenizers/";
const std::string kTemplates = SANCTUM_TEST_DATA_DIR "/chat_templates/";

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::load(kTokenizers + "qwen3");
  return t;
}

const Tokenizer& gemma3() {
  static const Tokenizer t = Tokenizer::load(kTokenizers + "gemma3");
  return t;
}

// A checkpoint's tokenizer with its chat template replaced (chat_template.jinja wins over the config's).
class TokenizerWithTemplate {
 public:
  TokenizerWithTemplate(const std::string& tokenizer, const std::string& template_source) {
    std::string tmpl = (fs::temp_directory_path() / "sanctum-prompt-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    for (const auto& entry : fs::directory_iterator(kTokenizers + tokenizer)) fs::copy_file(entry.path(), dir_ / entry.path().filename());
    std::ofstream(dir_ / "chat_template.jinja") << template_source;
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(dir_.string()));
  }
  ~TokenizerWithTemplate() { fs::remove_all(dir_); }
  const Tokenizer& get() const { return *tokenizer_; }

 private:
  fs::path dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

json one_user_message(std::string_view text) { return json::array({{{"role", "user"}, {"content", std::string(text)}}}); }

bool ends_with(const std::string& s, const std::string& tail) { return s.size() >= tail.size() && s.ends_with(tail); }

// The server's path: a request body through parse_chat_request and request_prompt.
BuiltPrompt server_chat(const PromptBuilder& builder, const json& body) {
  return server::request_prompt(builder, server::parse_chat_request(body), static_cast<int64_t>(builder.tokenizer().vocab_size()));
}

TEST(PromptBuilder, renders_the_checkpoint_template_with_the_generation_prompt) {
  const PromptBuilder b(qwen3());
  const std::string text = b.render(json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"U"}])"), json::object());
  EXPECT_EQ(text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(PromptBuilder, special_token_text_from_the_template_becomes_special_ids_and_no_second_bos_is_added) {
  const PromptBuilder b(gemma3());
  const BuiltPrompt p = b.chat(one_user_message("hi"), json::object());
  const int32_t bos = gemma3().bos_id();
  ASSERT_GE(bos, 0);
  ASSERT_FALSE(p.ids.empty());
  EXPECT_EQ(p.ids.front(), bos);
  EXPECT_EQ(std::count(p.ids.begin(), p.ids.end(), bos), 1);
  const int32_t turn = gemma3().token_to_id("<start_of_turn>");
  ASSERT_GE(turn, 0);
  EXPECT_EQ(std::count(p.ids.begin(), p.ids.end(), turn), 2);  // the user's turn and the model's
}

TEST(PromptBuilder, text_prompt_adds_bos_and_parses_special_tokens) {
  const std::vector<int32_t> ids = text_prompt(gemma3(), "<start_of_turn>hi");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], gemma3().bos_id());
  EXPECT_EQ(ids[1], gemma3().token_to_id("<start_of_turn>"));
}

TEST(PromptBuilder, template_kwargs_reach_the_template) {
  const PromptBuilder b(qwen3());
  const std::string off = b.render(one_user_message("hi"), json{{"enable_thinking", false}});
  EXPECT_TRUE(ends_with(off, "<|im_start|>assistant\n<think>\n\n</think>\n\n")) << off;
  EXPECT_FALSE(b.chat(one_user_message("hi"), json{{"enable_thinking", false}}).start_in_reasoning);
}

TEST(PromptBuilder, thinking_models_are_recognised) {
  EXPECT_TRUE(PromptBuilder(qwen3()).thinking());
  EXPECT_FALSE(PromptBuilder(gemma3()).thinking());
}

TEST(PromptBuilder, prompt_that_opens_a_think_block_starts_the_output_in_reasoning) {
  const TokenizerWithTemplate qwq("qwen3", read_file(kTemplates + "Qwen-QwQ-32B.jinja"));
  const PromptBuilder b(qwq.get());
  ASSERT_TRUE(b.thinking());
  const BuiltPrompt on = b.chat(one_user_message("hi"), json{{"enable_thinking", true}});
  EXPECT_TRUE(on.start_in_reasoning);
  EXPECT_TRUE(ends_with(b.render(one_user_message("hi"), json{{"enable_thinking", true}}), "<think>\n"));
  EXPECT_FALSE(b.chat(one_user_message("hi"), json::object()).start_in_reasoning);  // this template closes it
}

TEST(PromptBuilder, think_tag_without_a_close_token_in_the_vocabulary_is_not_reasoning) {
  const TokenizerWithTemplate t("gemma3", "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n");
  const PromptBuilder b(t.get());
  EXPECT_FALSE(b.thinking());
  EXPECT_FALSE(b.chat(one_user_message("hi"), json::object()).start_in_reasoning);
}

TEST(PromptBuilder, checkpoint_without_a_template_gets_chatml) {
  const TokenizerWithTemplate t("qwen3", "");
  EXPECT_EQ(PromptBuilder(t.get()).render(one_user_message("U"), json::object()), "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(PromptBuilder, message_keys_render_in_the_order_the_server_parses_them) {
  const TokenizerWithTemplate t("qwen3", "{% for m in messages %}{{ m | tojson }}{% endfor %}");
  const PromptBuilder b(t.get());
  EXPECT_EQ(b.render(user_turn("hi"), json::object()), R"({"content": "hi", "role": "user"})");
}

// `sanctum generate --chat TEXT` builds PromptBuilder::chat(user_turn(TEXT), {}); the server builds
// from the parsed request. One user message must give the same ids both ways, whatever the template.
TEST(PromptBuilder, server_request_and_cli_chat_give_the_same_prompt) {
  const TokenizerWithTemplate qwq("qwen3", read_file(kTemplates + "Qwen-QwQ-32B.jinja"));
  const TokenizerWithTemplate dump("qwen3", "{% for m in messages %}{{ m | tojson }}{% endfor %}<think>\n");
  const PromptBuilder qwen3_builder(qwen3()), gemma3_builder(gemma3()), qwq_builder(qwq.get()), dump_builder(dump.get());
  for (const PromptBuilder* b : {&qwen3_builder, &gemma3_builder, &qwq_builder, &dump_builder}) {
    for (const char* text : {"hi", "two\nlines with <|im_end|> inside", "\xC3\xBC\xE2\x9C\x93 unicode", "  padded  "}) {
      const BuiltPrompt cli = b->chat(user_turn(text), json::object());
      const BuiltPrompt plain = server_chat(*b, json{{"messages", one_user_message(text)}});
      const BuiltPrompt parts =
          server_chat(*b, json{{"messages",
                                json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", text}}})}}})}});
      EXPECT_EQ(plain.ids, cli.ids) << text;
      EXPECT_EQ(parts.ids, cli.ids) << text;
      EXPECT_EQ(plain.start_in_reasoning, cli.start_in_reasoning) << text;
    }
  }
  EXPECT_TRUE(PromptBuilder(dump.get()).chat(user_turn("x"), json::object()).start_in_reasoning);
}

TEST(PromptBuilder, server_completion_prompt_and_cli_prompt_give_the_same_ids) {
  const PromptBuilder b(gemma3());
  const std::string text = "Once upon <start_of_turn>a time";
  const BuiltPrompt server = server::request_prompt(b, server::parse_completion_request(json{{"prompt", text}}), 300000);
  EXPECT_EQ(server.ids, text_prompt(gemma3(), text));
  EXPECT_FALSE(server.start_in_reasoning);
}

server::ApiError request_error(const PromptBuilder& b, const server::OpenAiRequest& r, int64_t vocab) {
  try {
    server::request_prompt(b, r, vocab);
  } catch (const server::ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "request_prompt accepted the request";
  return server::bad_request("none");
}

TEST(PromptBuilder, server_turns_template_errors_and_foreign_ids_into_400s) {
  const TokenizerWithTemplate t("qwen3", "{{ raise_exception('system messages only') }}");
  const PromptBuilder refusing(t.get());
  const server::ApiError refused = request_error(refusing, server::parse_chat_request(json{{"messages", one_user_message("hi")}}), 1000000);
  EXPECT_EQ(refused.status(), 400);
  EXPECT_EQ(refused.param(), "messages");
  EXPECT_NE(std::string(refused.what()).find("system messages only"), std::string::npos) << refused.what();

  const PromptBuilder b(qwen3());
  const server::ApiError outside = request_error(b, server::parse_completion_request(json{{"prompt", json::array({1, 5000})}}), 5000);
  EXPECT_EQ(outside.status(), 400);
  EXPECT_EQ(outside.param(), "prompt");
  EXPECT_NE(std::string(outside.what()).find("token id 5000 is outside the vocabulary [0, 5000)"), std::string::npos) << outside.what();
}

}  // namespace
}  // namespace sanctum
