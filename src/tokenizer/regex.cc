#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "base/error.h"

namespace sanctum {
namespace {

// One JIT stack per thread, large enough for long runs (a 100 kB "word").
pcre2_match_context* thread_match_context() {
  struct Holder {
    pcre2_jit_stack* stack = nullptr;
    pcre2_match_context* context = nullptr;
    Holder() {
      stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
      context = pcre2_match_context_create(nullptr);
      if (stack && context) pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~Holder() {
      if (context) pcre2_match_context_free(context);
      if (stack) pcre2_jit_stack_free(stack);
    }
  };
  thread_local Holder holder;
  return holder.context;
}

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(ErrorKind::invalid_input, "tokenizer regex does not compile at offset " + std::to_string(offset) + ": " +
                                       reinterpret_cast<const char*>(message) + " (pattern: " + pattern + ")");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> guard(md, pcre2_match_data_free);
  pcre2_match_context* context = thread_match_context();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  uint32_t options = PCRE2_NO_UTF_CHECK;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), start, options, md, context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail(ErrorKind::invalid_input, std::string("tokenizer regex failed: ") + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (e == b) {
      // Empty match: step one code point forward (no piece is produced for it).
      if (b >= text.size()) break;
      size_t next = b + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      start = next;
      continue;
    }
    out.emplace_back(b, e);
    start = e;
  }
}

std::string Regex::escape(std::string_view literal) {
  std::string out = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal.compare(i, 2, "\\E") == 0) {
      out += "\\E\\\\E\\Q";
      ++i;
    } else {
      out += literal[i];
    }
  }
  out += "\\E";
  return out;
}

}  // namespace sanctum
