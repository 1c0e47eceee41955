#pragma once
// Chat templates: render a checkpoint's Jinja chat template the way transformers' apply_chat_template
// does (same whitespace rules, same message preprocessing, same tojson), byte for byte.
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sanctum {

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;  // null: no tools (the template sees None)
  nlohmann::ordered_json documents;
  // Extra template variables: enable_thinking, date_string, reasoning_effort, custom tokens, ...
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  std::string bos_token, eos_token;  // empty: left undefined
};

// The template transformers used when a checkpoint had none (ChatML).
extern const char* const kChatmlTemplate;

namespace jinja {
struct Stmt;
}

class ChatTemplate {
 public:
  // Parses once; throws Error(invalid_input) "chat template: line N: ..." on syntax errors and unknown
  // filters or tests. An empty source selects the ChatML fallback.
  explicit ChatTemplate(std::string_view source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // messages: JSON array of message objects. Throws Error on runtime errors (raise_exception included).
  std::string render(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string render_chat_template(std::string_view template_source, const nlohmann::ordered_json& messages,
                                 const ChatTemplateOptions& options);
// Convenience for callers holding nlohmann::json (key order is that object's order).
std::string render_chat_template(std::string_view template_source, const nlohmann::json& messages, const ChatTemplateOptions& options);

}  // namespace sanctum
