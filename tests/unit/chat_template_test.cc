// Chat templates: ChatML fallback, Qwen3 thinking switch, Jinja semantics, errors with line numbers.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "base/mapped_file.h"
#include "chat/chat_template.h"

namespace {

using ojson = nlohmann::ordered_json;
const std::string kTemplates = SANCTUM_TEST_DATA_DIR "/chat_templates/";

std::string render(const std::string& source, const ojson& messages = ojson::array(), sanctum::ChatTemplateOptions o = {}) {
  return sanctum::render_chat_template(source, messages, o);
}

std::string error_of(const std::string& source) {
  try {
    render(source, ojson::parse(R"([{"role": "user", "content": "hi"}])"));
  } catch (const sanctum::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplate, empty_template_falls_back_to_chatml) {
  const ojson messages = ojson::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])");
  EXPECT_EQ(render("", messages), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, qwen3_generation_prompt_without_thinking) {
  const std::string source = sanctum::read_file(kTemplates + "Qwen-Qwen3-0.6B.jinja");
  sanctum::ChatTemplateOptions o;
  o.extra["enable_thinking"] = false;
  const std::string out = render(source, ojson::parse(R"([{"role": "user", "content": "hi"}])"), o);
  const std::string tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  ASSERT_GE(out.size(), tail.size());
  EXPECT_EQ(out.substr(out.size() - tail.size()), tail);
}

TEST(ChatTemplate, jinja_semantics) {
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "13");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for x in 'abc' %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"), "3");
  EXPECT_EQ(render("{% set y = 1 %}{% for x in [5] %}{% set y = 2 %}{% endfor %}{{ y }}"), "1");  // loops scope sets
  EXPECT_EQ(render("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"), "[1B][23]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1.5, none, true, 'x\"']}|tojson }}"), "{\"b\": 1, \"a\": [1.5, null, true, \"x\\\"\"]}");
  EXPECT_EQ(render("{{ {'a': 'é'} }}|{{ [1, 'x'] }}|{{ none }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 1 / 4 }}"),
            "{'a': 'é'}|[1, 'x']|None|3|2|0.25");
  EXPECT_EQ(render("{{ '  a b  '.strip().split(' ') }}|{{ 'héllo'[1:3] }}|{{ 'a,b'.split(',')[-1] }}"), "['a', 'b']|él|b");
  EXPECT_EQ(render("{%- if true -%}\n  x  \n{%- endif -%}"), "x");
  EXPECT_EQ(render("a\n  {% if true %}\nb\n  {% endif %}\nc\n"), "a\nb\nc");  // trim_blocks + lstrip_blocks
  EXPECT_EQ(render("{{ x is defined }}{{ x|default('d') }}{{ [3, 1, 2]|sort|join(',') }}"), "Falsed1,2,3");
  // escape as markupsafe does it, never twice; safe passes text through.
  EXPECT_EQ(render(R"({{ "<a href='x'>&\"" | e }}|{{ '<b>' | safe }}|{{ '<i>' | escape | e }})"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&#34;|<b>|&lt;i&gt;");
}

TEST(ChatTemplateErrors, syntax_errors_name_the_line) {
  EXPECT_NE(error_of("line one\n{% if x %}\nunclosed").find("line "), std::string::npos);
  EXPECT_NE(error_of("a\nb\n{{ x + }}").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("{% for %}").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("ok\n{% endfor %}").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("line 1"), std::string::npos);
}

TEST(ChatTemplateErrors, unknown_filter_names_filter_and_line) {
  const std::string e = error_of("\n\n{{ messages | frobnicate }}");
  EXPECT_NE(e.find("frobnicate"), std::string::npos);
  EXPECT_NE(e.find("line 3"), std::string::npos);
  // Inside an if block the error comes only when it runs (as Jinja does).
  EXPECT_EQ(error_of("{% if false %}{{ x | frobnicate }}{% endif %}"), "");
  EXPECT_NE(error_of("{% if true %}\n{{ x | frobnicate }}{% endif %}").find("line 2"), std::string::npos);
}

TEST(ChatTemplateErrors, raise_exception_carries_the_message) {
  EXPECT_NE(error_of("{{ raise_exception('roles must alternate') }}").find("roles must alternate"), std::string::npos);
}

TEST(ChatTemplateErrors, runaway_templates_are_bounded) {
  EXPECT_NE(error_of("{{ 'x' * 1000000000 }}"), "");
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "");
  EXPECT_NE(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), "");
}

}  // namespace
