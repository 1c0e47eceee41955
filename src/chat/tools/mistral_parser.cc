#include "chat/tools/mistral_parser.h"

#include <algorithm>

#include "chat/tools/hermes_parser.h"
#include "chat/tools/json_scan.h"

namespace sanctum {
namespace {
constexpr std::string_view kMarker = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";
constexpr size_t kMaxNameBytes = 256;

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name)
    if (is_json_space(c) || c == '[' || c == ']' || c == '{' || c == '"') return false;
  return true;
}
}  // namespace

void MistralParser::consume(bool at_end) {
  while (step(at_end)) {
  }
}

void MistralParser::give_up(std::string_view rest) {
  content(raw_);
  content(rest);
  raw_.clear();
  state_ = State::text;
}

bool MistralParser::step(bool at_end) {
  switch (state_) {
    case State::text:
      if (!take_text_until(kMarker, at_end)) return false;
      raw_ = std::string(kMarker);
      state_ = State::after_marker;
      return true;

    case State::after_marker: {
      const size_t k = held_.find_first_not_of(" \t\r\n");
      if (k == std::string::npos) {
        if (at_end) {
          give_up(held_);
          held_.clear();
        }
        return false;
      }
      raw_ += held_.substr(0, k);
      held_.erase(0, k);
      state_ = held_[0] == '[' && !held_.starts_with(kArgs) ? State::array : State::name;
      return true;
    }

    case State::name: {
      const size_t args = held_.find(kArgs);
      const size_t id = held_.find(kCallId);
      const size_t end = std::min(args, id);
      if (end == std::string::npos) {
        const std::string_view so_far = std::string_view(held_).substr(0, held_.find('['));
        if (!at_end && held_.size() <= kMaxNameBytes + kCallId.size() && (so_far.empty() || valid_name(so_far))) return false;
        give_up("");
        return true;
      }
      const std::string name = held_.substr(0, end);
      if (!valid_name(name)) {
        give_up("");
        return true;
      }
      if (end == id) {
        // The model's own id is dropped: the server gives every call an id of the template's form.
        const size_t after_id = held_.find(kArgs, id);
        if (after_id == std::string::npos) {
          if (!at_end && held_.size() <= 2 * kMaxNameBytes) return false;
          give_up("");
          return true;
        }
        raw_ += held_.substr(0, after_id + kArgs.size());
        held_.erase(0, after_id + kArgs.size());
      } else {
        raw_ += held_.substr(0, end + kArgs.size());
        held_.erase(0, end + kArgs.size());
      }
      name_ = name;
      state_ = State::arguments;
      return true;
    }

    case State::arguments:
    case State::array: {
      const JsonScan scan = scan_json_container(held_);
      if (scan.state == JsonScan::State::incomplete && !at_end) return false;
      if (scan.state != JsonScan::State::complete) {
        give_up("");
        return true;
      }
      const std::string text = held_.substr(0, scan.end);
      const nlohmann::ordered_json value = parse_json_lenient(text);
      std::vector<std::pair<std::string, std::string>> calls;
      if (state_ == State::arguments && value.is_object()) {
        calls.emplace_back(name_, dump_json(value));
      } else if (state_ == State::array && value.is_array() && !value.empty()) {
        for (const auto& c : value) {
          auto call = read_json_call(c);
          if (!call) break;
          calls.push_back(std::move(*call));
        }
        if (calls.size() != value.size()) calls.clear();
      }
      if (calls.empty()) {
        give_up("");
        return true;
      }
      held_.erase(0, scan.end);
      for (auto& [name, args] : calls) {
        begin_call(std::move(name));
        arguments(args);
        end_call();
      }
      raw_.clear();
      state_ = State::after_call;
      return true;
    }

    case State::after_call: {
      const size_t k = held_.find_first_not_of(" \t\r\n");
      if (k == std::string::npos) {
        if (at_end) held_.clear();
        return false;
      }
      const std::string_view rest = std::string_view(held_).substr(k);
      if (rest.starts_with(kMarker)) {
        held_.erase(0, k + kMarker.size());
        raw_ = std::string(kMarker);
        state_ = State::after_marker;
        return true;
      }
      if (!at_end && kMarker.starts_with(rest)) return false;
      state_ = State::text;
      return true;
    }
  }
  return false;
}

}  // namespace sanctum
