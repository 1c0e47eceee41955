#include "chat/chat_template.h"

#include <ctime>

#include "base/error.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/parser.h"

namespace sanctum {

const char* const kChatmlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

using jinja::Args;
using jinja::Interpreter;
using jinja::Value;
using ojson = nlohmann::ordered_json;

struct ChatTemplate::Impl {
  jinja::Body body;
};

namespace {

// transformers: drop keys whose value is None, then copy reasoning under both names templates read.
Value prepare_messages(const ojson& messages) {
  if (!messages.is_array()) fail(ErrorKind::invalid_input, "chat messages must be a JSON array");
  jinja::List out;
  for (const ojson& m : messages) {
    if (!m.is_object()) fail(ErrorKind::invalid_input, "each chat message must be a JSON object");
    Value msg = Value::make_dict();
    const ojson* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
      auto it = m.find(key);
      if (it != m.end() && !it->is_null()) {
        reasoning = &*it;
        break;
      }
    }
    if (reasoning) msg.dict->set("thinking", Value::from_json(*reasoning));
    for (const auto& [k, v] : m.items())
      if (!v.is_null()) msg.dict->set(k, Value::from_json(v));
    if (reasoning) msg.dict->set("reasoning_content", Value::from_json(*reasoning));
    out.push_back(std::move(msg));
  }
  return Value::make_list(std::move(out));
}

std::map<std::string, Value> make_globals() {
  std::map<std::string, Value> g;
  g["raise_exception"] = Value::function([](const Args& a, Interpreter&) -> Value {
    fail(ErrorKind::invalid_input, "chat template raised an exception: " + (a.positional.empty() ? std::string() : a.positional[0].str()));
  });
  g["strftime_now"] = Value::function([](const Args& a, Interpreter& in) {
    if (a.positional.empty()) in.error(0, "strftime_now needs a format");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), a.positional[0].str().c_str(), &tm);
    return Value::string(std::string(buf, n));
  });
  auto make_mapping = [](const Args& a, Interpreter& in, bool ns) {
    Value d = Value::make_dict();
    d.dict->is_namespace = ns;
    for (const Value& p : a.positional) {
      if (!p.is_dict()) in.error(0, "expected a mapping argument");
      for (const auto& [k, v] : p.dict->items) d.dict->set(k, v);
    }
    for (const auto& [k, v] : a.keyword) {
      if (ns && !k.empty() && k[0] == '_') in.error(0, "namespace attributes cannot start with '_'");
      d.dict->set(k, v);
    }
    return d;
  };
  g["namespace"] = Value::function([make_mapping](const Args& a, Interpreter& in) { return make_mapping(a, in, true); });
  g["dict"] = Value::function([make_mapping](const Args& a, Interpreter& in) { return make_mapping(a, in, false); });
  g["range"] = Value::function([](const Args& a, Interpreter& in) {
    int64_t start = 0, stop = 0, step = 1;
    auto num = [&](size_t k) {
      if (a.positional[k].kind != Value::Kind::integer) in.error(0, "range() arguments must be integers");
      return a.positional[k].i;
    };
    if (a.positional.size() == 1) stop = num(0);
    else if (a.positional.size() >= 2) start = num(0), stop = num(1);
    if (a.positional.size() >= 3) step = num(2);
    if (a.positional.empty() || step == 0) in.error(0, "range() needs 1-3 integer arguments and a non-zero step");
    jinja::List out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (out.size() >= 100000) in.error(0, "range() too large");
      out.push_back(Value::integer(k));
    }
    return Value::make_list(std::move(out));
  });
  return g;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source) : impl_(std::make_unique<Impl>()) {
  impl_->body = jinja::parse_template(source.empty() ? std::string_view(kChatmlTemplate) : source);
}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const ojson& messages, const ChatTemplateOptions& options) const {
  std::map<std::string, Value> g = make_globals();
  if (!options.bos_token.empty()) g["bos_token"] = Value::string(options.bos_token);
  if (!options.eos_token.empty()) g["eos_token"] = Value::string(options.eos_token);
  if (options.extra.is_object())
    for (const auto& [k, v] : options.extra.items()) g[k] = Value::from_json(v);
  g["messages"] = prepare_messages(messages);
  g["tools"] = options.tools.is_null() ? Value::none() : Value::from_json(options.tools);
  g["documents"] = options.documents.is_null() ? Value::none() : Value::from_json(options.documents);
  g["add_generation_prompt"] = Value::boolean(options.add_generation_prompt);
  Interpreter in(std::move(g));
  return in.render(impl_->body);
}

std::string render_chat_template(std::string_view template_source, const ojson& messages, const ChatTemplateOptions& options) {
  return ChatTemplate(template_source).render(messages, options);
}

std::string render_chat_template(std::string_view template_source, const nlohmann::json& messages, const ChatTemplateOptions& options) {
  return render_chat_template(template_source, ojson::parse(messages.dump()), options);
}

}  // namespace sanctum
