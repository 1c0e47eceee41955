// sanctum tokenize: UTF-8 text on stdin -> token ids. With --jsonl each input line is a JSON string and
// each output line the JSON array of its ids (a bad line gives {"error": ...} and a non-zero exit).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "base/mapped_file.h"
#include "chat/chat_template.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/jsonl.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: sanctum tokenize --tokenizer DIR [--jsonl] [--no-add-special] [--no-parse-special]\n"
               "  stdin: UTF-8 text (or, with --jsonl, one JSON string per line)\n"
               "  --no-add-special    do not add BOS/EOS from the post-processor\n"
               "  --no-parse-special  special-token strings in the text stay text\n"
               "  --bench N           encode stdin N times in-process; print bytes, tokens, best seconds\n"
               "  --chat [--template FILE]  each --jsonl line is {\"messages\": [...], \"tools\": ..., \n"
               "      \"add_generation_prompt\": bool, other template variables}; prints {\"text\", \"ids\"}\n"
               "      rendered with the chat template (FILE, else the tokenizer's, else ChatML)\n"
               "  --chat --openai  each line is {\"request\": an OpenAI chat request body, \"bos_token\", \"eos_token\"}:\n"
               "      the prompt the server renders for it (validation, tools, call arguments as objects)\n");
}

// --chat --jsonl: render each request with the chat template, then tokenize without adding specials.
int run_chat(const sanctum::cli::Args& args) {
  std::unique_ptr<sanctum::Tokenizer> tok;
  if (auto dir = args.get("tokenizer")) tok = std::make_unique<sanctum::Tokenizer>(sanctum::Tokenizer::load(*dir));
  std::string source;
  if (auto file = args.get("template")) source = sanctum::read_file(*file);
  else if (tok) source = tok->chat_template();
  const sanctum::ChatTemplate tmpl(source);
  if (args.has("openai")) {
    return sanctum::cli::for_each_jsonl_line([&](const nlohmann::ordered_json& line) {
      sanctum::check(line.is_object() && line.contains("request"), sanctum::ErrorKind::invalid_input,
                     "each --openai line must be an object with \"request\"");
      sanctum::server::OpenAiRequest r;
      try {
        r = sanctum::server::parse_chat_request(line["request"]);
      } catch (const sanctum::server::ApiError& e) {
        sanctum::fail(sanctum::ErrorKind::invalid_input, std::string("400 (") + e.param() + "): " + e.what());
      }
      sanctum::ChatTemplateOptions options;  // as the server's PromptBuilder sets them
      options.add_generation_prompt = true;
      options.tools = r.tools.offered();
      for (auto it = r.chat_template_kwargs.begin(); it != r.chat_template_kwargs.end(); ++it) options.extra[it.key()] = it.value();
      if (tok) options.bos_token = tok->bos_token(), options.eos_token = tok->eos_token();
      if (line.contains("bos_token")) options.bos_token = line["bos_token"].get<std::string>();
      if (line.contains("eos_token")) options.eos_token = line["eos_token"].get<std::string>();
      nlohmann::ordered_json result;
      result["text"] = tmpl.render(r.messages, options);
      return result;
    });
  }
  return sanctum::cli::for_each_jsonl_line([&](const nlohmann::ordered_json& req) {
    sanctum::check(req.is_object() && req.contains("messages"), sanctum::ErrorKind::invalid_input,
                   "each --chat line must be an object with \"messages\"");
    sanctum::ChatTemplateOptions options;
    options.add_generation_prompt = req.value("add_generation_prompt", false);
    if (tok) options.bos_token = tok->bos_token(), options.eos_token = tok->eos_token();
    for (const auto& [key, value] : req.items()) {
      if (key == "messages" || key == "add_generation_prompt") continue;
      if (key == "tools") options.tools = value;
      else if (key == "documents") options.documents = value;
      else if (key == "bos_token" && value.is_string()) options.bos_token = value.get<std::string>();
      else if (key == "eos_token" && value.is_string()) options.eos_token = value.get<std::string>();
      else options.extra[key] = value;
    }
    nlohmann::ordered_json result;
    const std::string text = tmpl.render(req["messages"], options);
    result["text"] = text;
    if (tok) result["ids"] = tok->encode(text, false, true);
    return result;
  });
}

int run_tokenize(int argc, char** argv) {
  sanctum::cli::Args args(argc, argv, {"tokenizer", "template", "bench"},
                          {"jsonl", "no-add-special", "no-parse-special", "chat", "openai", "help"});
  if (args.has("help")) {
    usage();
    return 0;
  }
  if (args.has("chat")) return run_chat(args);
  const auto dir = args.get("tokenizer");
  sanctum::check(dir.has_value(), sanctum::ErrorKind::invalid_argument, "--tokenizer DIR is required");
  const sanctum::Tokenizer tok = sanctum::Tokenizer::load(*dir);
  const bool add_special = !args.has("no-add-special"), parse_special = !args.has("no-parse-special");
  if (!args.has("jsonl")) {
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const long long repeats = args.get_int("bench", 0);
    if (repeats > 0) {  // time encode in-process (best of N), report JSON on stdout
      double best = 1e30;
      size_t n_tokens = 0;
      for (long long r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        n_tokens = tok.encode(text, add_special, parse_special).size();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f}\n", text.size(), n_tokens, best);
      return 0;
    }
    const auto ids = tok.encode(text, add_special, parse_special);
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(ids[i]);
    }
    std::printf("%s\n", out.c_str());
    return 0;
  }
  return sanctum::cli::for_each_jsonl_line([&](const nlohmann::ordered_json& input) -> nlohmann::ordered_json {
    sanctum::check(input.is_string(), sanctum::ErrorKind::invalid_input, "each --jsonl line must be a JSON string");
    return tok.encode(input.get<std::string>(), add_special, parse_special);
  });
}

sanctum::cli::SubcommandRegistration reg("tokenize", "text on stdin -> token ids", run_tokenize);

}  // namespace
