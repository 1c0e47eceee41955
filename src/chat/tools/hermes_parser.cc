#include "chat/tools/hermes_parser.h"

#include "chat/tools/json_scan.h"

namespace sanctum {
namespace {
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
}  // namespace

std::optional<std::pair<std::string, std::string>> read_json_call(const nlohmann::ordered_json& call) {
  if (!call.is_object()) return std::nullopt;
  auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  auto args = call.find("arguments");
  if (args == call.end()) args = call.find("parameters");  // some fine-tunes write this key
  if (args == call.end() || args->is_null()) return std::make_pair(name->get<std::string>(), std::string("{}"));
  if (args->is_object()) return std::make_pair(name->get<std::string>(), dump_json(*args));
  if (args->is_string()) {
    nlohmann::ordered_json inner = parse_json_lenient(args->get<std::string>());
    if (!inner.is_discarded() && inner.is_object()) return std::make_pair(name->get<std::string>(), dump_json(inner));
  }
  return std::nullopt;
}

void HermesParser::consume(bool at_end) {
  for (;;) {
    if (!in_call_) {
      if (!take_text_until(kOpen, at_end)) return;
      in_call_ = true;
      continue;
    }
    const size_t close = held_.find(kClose);
    if (close == std::string::npos && !at_end) return;
    const std::string body = close == std::string::npos ? held_ : held_.substr(0, close);
    const std::string raw = std::string(kOpen) + body + (close == std::string::npos ? "" : std::string(kClose));
    held_.erase(0, close == std::string::npos ? held_.size() : close + kClose.size());
    in_call_ = false;
    if (auto call = read_json_call(parse_json_lenient(body))) {
      begin_call(call->first);
      arguments(call->second);
      end_call();
    } else {
      content(raw);
    }
  }
}

}  // namespace sanctum
