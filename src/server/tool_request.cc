#include "server/tool_request.h"

#include <string>

#include "chat/tools/json_scan.h"
#include "server/api_error.h"

namespace sanctum::server {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxTools = 512;
constexpr size_t kMaxNameBytes = 256;

// Names reach the prompt inside tags (<function=NAME>, [TOOL_CALLS]NAME[ARGS]): no whitespace or brackets.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  return name.find_first_of(" \t\r\n<>[]{}\"") == std::string::npos;
}

// Built by appending: gcc 12 misreports `"[" + std::to_string(i)` under -Wrestrict.
std::string at(size_t i) {
  std::string s(1, '[');
  s += std::to_string(i);
  s += ']';
  return s;
}

json validate_tool(const json& tool, size_t i) {
  const std::string where = "tools" + at(i);
  if (!tool.is_object()) throw bad_request("each tool must be an object", where);
  if (!tool.contains("type") || tool["type"] != "function")
    throw bad_request("only tools of type 'function' are supported", where + ".type");
  if (!tool.contains("function") || !tool["function"].is_object())
    throw bad_request("a function tool needs a 'function' object", where + ".function");
  const json& f = tool["function"];
  if (!f.contains("name") || !f["name"].is_string() || !valid_function_name(f["name"].get<std::string>()))
    throw bad_request("a function needs a 'name' of 1-256 characters without spaces, quotes or brackets", where + ".function.name");
  if (f.contains("description") && !f["description"].is_null() && !f["description"].is_string())
    throw bad_request("'description' must be a string", where + ".function.description");
  if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object())
    throw bad_request("'parameters' must be a JSON Schema object", where + ".function.parameters");
  if (f.contains("strict") && !f["strict"].is_null() && !f["strict"].is_boolean())
    throw bad_request("'strict' must be a boolean", where + ".function.strict");
  return tool;
}

ToolChoice parse_choice(const json& body, const json& tools, std::string& named) {
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return ToolChoice::automatic;
  const json& c = body["tool_choice"];
  ToolChoice choice;
  if (c == "auto") choice = ToolChoice::automatic;
  else if (c == "none") choice = ToolChoice::none;
  else if (c == "required") choice = ToolChoice::required;
  else if (c.is_object() && c.contains("type") && c["type"] == "function" && c.contains("function") && c["function"].is_object() &&
           c["function"].contains("name") && c["function"]["name"].is_string())
    choice = ToolChoice::named;
  else
    throw bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                      "tool_choice");
  if ((choice == ToolChoice::required || choice == ToolChoice::named) && tools.is_null())
    throw bad_request("'tool_choice' " + std::string(choice == ToolChoice::required ? "\"required\"" : "naming a function") +
                          " needs 'tools'",
                      "tool_choice");
  if (choice == ToolChoice::named) {
    const std::string name = c["function"]["name"].get<std::string>();
    bool found = false;
    for (const json& t : tools) found = found || t["function"]["name"] == name;
    if (!found) throw bad_request("'tool_choice' names '" + name + "', which is not in 'tools'", "tool_choice.function.name");
    named = name;
  }
  return choice;
}

}  // namespace

const json& ToolRequest::offered() const {
  static const json kNone;
  return choice == ToolChoice::none ? kNone : tools;
}

ToolRequest parse_tool_request(const json& body) {
  ToolRequest r;
  if (body.contains("tools") && !body["tools"].is_null()) {
    const json& tools = body["tools"];
    if (!tools.is_array()) throw bad_request("'tools' must be an array", "tools");
    if (tools.size() > kMaxTools) throw bad_request("'tools' may hold at most " + std::to_string(kMaxTools) + " tools", "tools");
    // An empty list offers nothing, as if it was left out.
    if (!tools.empty()) {
      r.tools = json::array();
      for (size_t i = 0; i < tools.size(); ++i) {
        r.tools.push_back(validate_tool(tools[i], i));
        const json& f = tools[i]["function"];
        r.strict = r.strict || (f.contains("strict") && f["strict"] == true);
      }
    }
  }
  r.choice = parse_choice(body, r.tools, r.named);
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) throw bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    r.parallel = body["parallel_tool_calls"].get<bool>();
  }
  return r;
}

json normalize_tool_calls(const json& tool_calls, size_t i) {
  const std::string where = "messages" + at(i) + ".tool_calls";
  if (!tool_calls.is_array()) throw bad_request("'tool_calls' must be an array", where);
  json out = json::array();
  for (size_t k = 0; k < tool_calls.size(); ++k) {
    const std::string call_at = where + at(k);
    const json& call = tool_calls[k];
    if (!call.is_object()) throw bad_request("each tool call must be an object", call_at);
    if (!call.contains("id") || !call["id"].is_string()) throw bad_request("a tool call needs a string 'id'", call_at + ".id");
    if (call.contains("type") && !call["type"].is_null() && call["type"] != "function")
      throw bad_request("only tool calls of type 'function' are supported", call_at + ".type");
    if (!call.contains("function") || !call["function"].is_object())
      throw bad_request("a tool call needs a 'function' object", call_at + ".function");
    const json& f = call["function"];
    if (!f.contains("name") || !f["name"].is_string())
      throw bad_request("a tool call needs a string function 'name'", call_at + ".function.name");
    json copy = call;
    json args = f.contains("arguments") ? f["arguments"] : json();
    if (args.is_null() || (args.is_string() && trim_json_space(args.get<std::string>()).empty())) {
      args = json::object();
    } else if (args.is_string()) {
      args = parse_json_lenient(args.get<std::string>());
      if (args.is_discarded() || !args.is_object())
        throw bad_request("'arguments' must be a JSON object encoded as a string", call_at + ".function.arguments");
    } else if (!args.is_object()) {
      throw bad_request("'arguments' must be a JSON object encoded as a string", call_at + ".function.arguments");
    }
    copy["function"]["arguments"] = std::move(args);
    out.push_back(std::move(copy));
  }
  return out;
}

void check_tool_result(const json& message, size_t i) {
  if (!message.contains("tool_call_id") || !message["tool_call_id"].is_string())
    throw bad_request("a tool message needs the string 'tool_call_id' of the call it answers", "messages" + at(i) + ".tool_call_id");
}

}  // namespace sanctum::server
