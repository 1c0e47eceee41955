// sanctum tokenize: UTF-8 text on stdin -> token ids. With --jsonl each input line is a JSON string and
// each output line the JSON array of its ids (a bad line gives {"error": ...} and a non-zero exit).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "cli/args.h"
#include "cli/command.h"
#include "tokenizer/tokenizer.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: sanctum tokenize --tokenizer DIR [--jsonl] [--no-add-special] [--no-parse-special]\n"
               "  stdin: UTF-8 text (or, with --jsonl, one JSON string per line)\n"
               "  --no-add-special    do not add BOS/EOS from the post-processor\n"
               "  --no-parse-special  special-token strings in the text stay text\n");
}

int run_tokenize(int argc, char** argv) {
  sanctum::cli::Args args(argc, argv, {"tokenizer"}, {"jsonl", "no-add-special", "no-parse-special", "help"});
  if (args.has("help")) {
    usage();
    return 0;
  }
  const auto dir = args.get("tokenizer");
  sanctum::check(dir.has_value(), sanctum::ErrorKind::invalid_argument, "--tokenizer DIR is required");
  const sanctum::Tokenizer tok = sanctum::Tokenizer::load(*dir);
  const bool add_special = !args.has("no-add-special"), parse_special = !args.has("no-parse-special");
  if (!args.has("jsonl")) {
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const auto ids = tok.encode(text, add_special, parse_special);
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(ids[i]);
    }
    std::printf("%s\n", out.c_str());
    return 0;
  }
  int status = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::json result;
    try {
      const nlohmann::json input = nlohmann::json::parse(line);
      sanctum::check(input.is_string(), sanctum::ErrorKind::invalid_input, "each --jsonl line must be a JSON string");
      result = tok.encode(input.get<std::string>(), add_special, parse_special);
    } catch (const nlohmann::json::exception& e) {
      result = {{"error", std::string("malformed JSON line: ") + e.what()}};
      status = 1;
    } catch (const sanctum::Error& e) {
      result = {{"error", e.what()}};
      status = 1;
    }
    const std::string s = result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
  }
  return status;
}

sanctum::cli::SubcommandRegistration reg("tokenize", "text on stdin -> token ids", run_tokenize);

}  // namespace
