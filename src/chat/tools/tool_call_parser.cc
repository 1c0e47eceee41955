#include "chat/tools/tool_call_parser.h"

#include <algorithm>

#include "chat/tools/hermes_parser.h"
#include "chat/tools/json_scan.h"
#include "chat/tools/mistral_parser.h"
#include "chat/tools/qwen_xml_parser.h"
#include "tokenizer/tokenizer.h"

namespace sanctum {

std::optional<ToolParserKind> tool_parser_from_name(std::string_view name) {
  if (name == "none") return ToolParserKind::none;
  if (name == "qwen_xml") return ToolParserKind::qwen_xml;
  if (name == "hermes") return ToolParserKind::hermes;
  if (name == "mistral") return ToolParserKind::mistral;
  return std::nullopt;
}

const char* tool_parser_name(ToolParserKind kind) {
  switch (kind) {
    case ToolParserKind::qwen_xml: return "qwen_xml";
    case ToolParserKind::hermes: return "hermes";
    case ToolParserKind::mistral: return "mistral";
    case ToolParserKind::none: break;
  }
  return "none";
}

ToolParserKind detect_tool_parser(std::string_view chat_template, const Tokenizer& tokenizer) {
  if (chat_template.find("<function=") != std::string_view::npos) return ToolParserKind::qwen_xml;
  if (chat_template.find("<tool_call>") != std::string_view::npos) return ToolParserKind::hermes;
  if (tokenizer.token_to_id("[TOOL_CALLS]") >= 0) return ToolParserKind::mistral;
  return ToolParserKind::none;
}

std::string ToolCallIds::next() {
  static constexpr std::string_view kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<size_t> pick(0, kAlnum.size() - 1);
  std::string id = mistral_ ? "" : "call_";
  for (int k = 0; k < (mistral_ ? 9 : 24); ++k) id += kAlnum[pick(rng_)];
  return id;
}

size_t partial_tag_tail(std::string_view s, std::string_view tag) {
  for (size_t len = std::min(s.size(), tag.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

std::vector<ToolCallEvent> ToolCallParser::push(std::string_view text) {
  held_.append(text);
  consume(false);
  return std::move(out_);
}

std::vector<ToolCallEvent> ToolCallParser::finish() {
  consume(true);
  if (!held_.empty()) content(held_);
  held_.clear();
  return std::move(out_);
}

void ToolCallParser::content(std::string_view text) {
  if (text.empty()) return;
  after_call_ = false;
  if (!out_.empty() && out_.back().kind == ToolCallEvent::Kind::content) {
    out_.back().text.append(text);
    return;
  }
  ToolCallEvent e;
  e.text = std::string(text);
  out_.push_back(std::move(e));
}

void ToolCallParser::begin_call(std::string name) {
  ToolCallEvent e;
  e.kind = ToolCallEvent::Kind::call_begin;
  e.index = calls_++;
  e.id = ids_.next();
  e.name = std::move(name);
  out_.push_back(std::move(e));
}

void ToolCallParser::arguments(std::string_view fragment) {
  ToolCallEvent e;
  e.kind = ToolCallEvent::Kind::arguments;
  e.index = calls_ - 1;
  e.text = std::string(fragment);
  out_.push_back(std::move(e));
}

void ToolCallParser::end_call() {
  ToolCallEvent e;
  e.kind = ToolCallEvent::Kind::call_end;
  e.index = calls_ - 1;
  out_.push_back(std::move(e));
  after_call_ = true;
}

bool ToolCallParser::take_text_until(std::string_view tag, bool at_end) {
  const size_t pos = held_.find(tag);
  if (pos != std::string::npos) {
    const std::string_view before(held_.data(), pos);
    if (!after_call_ || !trim_json_space(before).empty()) content(before);
    held_.erase(0, pos + tag.size());
    return true;
  }
  const size_t keep = at_end ? 0 : partial_tag_tail(held_, tag);
  const std::string_view ready(held_.data(), held_.size() - keep);
  if (after_call_ && trim_json_space(ready).empty()) {
    if (at_end) held_.clear();  // whitespace after the last call
    return false;               // else it may only separate two calls: hold it
  }
  content(ready);
  held_.erase(0, ready.size());
  return false;
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolParserKind kind, const nlohmann::ordered_json& tools, uint64_t seed) {
  ToolCallIds ids(kind, seed);
  switch (kind) {
    case ToolParserKind::qwen_xml: return std::make_unique<QwenXmlParser>(std::move(ids), tools);
    case ToolParserKind::hermes: return std::make_unique<HermesParser>(std::move(ids));
    case ToolParserKind::mistral: return std::make_unique<MistralParser>(std::move(ids));
    case ToolParserKind::none: break;
  }
  return nullptr;
}

}  // namespace sanctum
