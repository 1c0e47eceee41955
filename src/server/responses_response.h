#pragma once
// OpenAI Responses API output: the response object and the streamed events the openai SDK reads,
// each with its sequence_number: response.created and response.in_progress; per output item
// response.output_item.added, its content part (response.content_part.added / .done around the
// text deltas and their .done), or for a call response.function_call_arguments.delta / .done, then
// response.output_item.done; last response.completed, or response.incomplete when max_output_tokens
// cut the answer. Items come in the order the model wrote them: reasoning, message, function_call.
// A whole (non-streamed) response is built by the same machine, its events dropped.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/text_sink.h"

namespace sanctum::server {

struct ResponseHead {
  std::string id;  // resp_...
  int64_t created_at = 0;
  std::string model;
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();  // request fields the object repeats
  bool store = true;
  double temperature = 1.0, top_p = 1.0;  // as sampled
};

class ResponseOutput {
 public:
  using json = nlohmann::ordered_json;
  explicit ResponseOutput(ResponseHead head, int input_tokens) : head_(std::move(head)), input_tokens_(input_tokens) {}

  std::vector<json> start();  // response.created, response.in_progress
  // The delta's item events; on the choice's last delta the items close and the response ends.
  std::vector<json> delta(const ChoiceDelta& d);
  std::vector<json> fail(const std::string& message);  // response.failed

  bool finished() const { return !final_.is_null(); }
  const json& response() const { return final_; }  // the finished object
  // The answer as a chat assistant turn (content, reasoning_content, tool_calls), for the conversation store.
  json assistant_message() const;

 private:
  enum class Item { none, reasoning, message, call };
  json object(const char* status) const;
  json event(const char* type, json fields);
  void open(Item kind, json item, std::vector<json>& out);
  void append(const std::string& text, std::vector<json>& out);
  void close(const char* status, std::vector<json>& out);

  ResponseHead head_;
  int input_tokens_ = 0;
  int output_tokens_ = 0;
  int sequence_ = 0;
  json items_ = json::array();
  Item open_ = Item::none;
  int tool_call_ = -1;  // the chat path's index of the call the open function_call item holds
  json final_;
};

}  // namespace sanctum::server
