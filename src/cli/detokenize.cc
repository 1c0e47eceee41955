// sanctum detokenize: token ids on stdin (comma or space separated) -> text. With --jsonl each input line
// is a JSON array of ids and each output line the JSON string; --stream decodes one id at a time and,
// with --jsonl, prints the JSON array of the emitted pieces.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/jsonl.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string cur;
  auto take = [&] {
    if (cur.empty()) return;
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(cur, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    sanctum::check(used == cur.size() && v >= INT32_MIN && v <= INT32_MAX, sanctum::ErrorKind::invalid_input,
                   "not a token id: '" + cur + "'");
    ids.push_back(static_cast<int32_t>(v));
    cur.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') take();
    else cur += c;
  }
  take();
  return ids;
}

int run_detokenize(int argc, char** argv) {
  sanctum::cli::Args args(argc, argv, {"tokenizer"}, {"jsonl", "skip-special", "stream", "help"});
  if (args.has("help")) {
    std::fprintf(stderr, "usage: sanctum detokenize --tokenizer DIR [--jsonl] [--skip-special] [--stream]\n");
    return 0;
  }
  const auto dir = args.get("tokenizer");
  sanctum::check(dir.has_value(), sanctum::ErrorKind::invalid_argument, "--tokenizer DIR is required");
  const sanctum::Tokenizer tok = sanctum::Tokenizer::load(*dir);
  const bool skip = args.has("skip-special"), stream = args.has("stream");
  auto stream_pieces = [&](const std::vector<int32_t>& ids) {
    sanctum::StreamingDecoder dec(tok, skip);
    std::vector<std::string> pieces;
    for (int32_t id : ids) pieces.push_back(dec.push(id));
    pieces.push_back(dec.flush());
    return pieces;
  };
  if (!args.has("jsonl")) {
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const auto ids = parse_ids(text);
    std::string out;
    if (stream) {
      for (const auto& p : stream_pieces(ids)) out += p;
    } else {
      out = tok.decode(ids, skip);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  }
  return sanctum::cli::for_each_jsonl_line([&](const nlohmann::ordered_json& input) -> nlohmann::ordered_json {
    sanctum::check(input.is_array(), sanctum::ErrorKind::invalid_input, "each --jsonl line must be a JSON array of ids");
    const auto ids = input.get<std::vector<int32_t>>();
    if (stream) return stream_pieces(ids);
    return tok.decode(ids, skip);
  });
}

sanctum::cli::SubcommandRegistration reg("detokenize", "token ids on stdin -> text", run_detokenize);

}  // namespace
