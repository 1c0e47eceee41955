#include "grammar/json_builder.h"

#include <algorithm>
#include <set>

#include "grammar/codepoints.h"
#include "grammar/json_regex.h"

namespace sanctum::grammar {

namespace {

constexpr int kMaxSchemaDepth = 64;

// Keywords that only describe: ignored.
const std::set<std::string> kAnnotations = {"title",           "description",      "default",       "examples",
                                            "example",         "$schema",          "$id",           "id",
                                            "$comment",        "deprecated",       "readOnly",      "writeOnly",
                                            "$defs",           "definitions",      "$anchor",       "$vocabulary",
                                            "contentEncoding", "contentMediaType", "discriminator", "xml",
                                            "externalDocs"};

// Validation keywords this compiler cannot enforce: a schema using them is refused, never loosened.
const std::set<std::string> kUnsupported = {"not",
                                            "if",
                                            "then",
                                            "else",
                                            "dependentRequired",
                                            "dependentSchemas",
                                            "dependencies",
                                            "patternProperties",
                                            "propertyNames",
                                            "unevaluatedProperties",
                                            "unevaluatedItems",
                                            "contains",
                                            "minContains",
                                            "maxContains",
                                            "multipleOf",
                                            "$dynamicRef",
                                            "$recursiveRef",
                                            "contentSchema",
                                            "additionalItems"};

std::string json_type_of(const SchemaJson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())) ? "integer" : "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool type_allows(const std::set<std::string>& types, const std::string& t) {
  return types.count(t) || (t == "integer" && types.count("number"));
}

}  // namespace

std::optional<std::set<std::string>> schema_types(const SchemaJson& schema) {
  if (!schema.is_object()) return std::nullopt;
  std::set<std::string> out;
  if (schema.contains("const")) return std::set<std::string>{json_type_of(schema["const"])};
  if (schema.contains("enum") && schema["enum"].is_array()) {
    for (const auto& v : schema["enum"]) out.insert(json_type_of(v));
    return out;
  }
  if (!schema.contains("type")) return std::nullopt;
  const auto& t = schema["type"];
  if (t.is_string()) out.insert(t.get<std::string>());
  if (t.is_array())
    for (const auto& x : t)
      if (x.is_string()) out.insert(x.get<std::string>());
  if (schema.value("nullable", false)) out.insert("null");
  return out;
}

JsonBuilder::JsonBuilder(Grammar& g, const SchemaJson& document, const JsonGrammarOptions& options)
    : g_(g), document_(document), options_(options) {
  ByteSet blank;
  blank.add(' '), blank.add('\t'), blank.add('\n');
  if (options_.max_whitespace < 0 || options_.max_whitespace > 64)
    throw GrammarError("whitespace", "json grammar: max_whitespace must be within 0..64");
  ws_ = options_.max_whitespace == 0 ? Grammar::ref(g_.add_rule("ws", {{}}))
                                     : Grammar::ref(make_repeat(g_, g_.bytes(blank), 0, options_.max_whitespace, "ws"));
}

void JsonBuilder::unsupported(const std::string& feature, const std::string& path, const std::string& detail) const {
  throw GrammarError(feature, "json schema: " + detail + " at " + path +
                                  " is not supported by constrained decoding; remove it or describe the value "
                                  "without it");
}

void JsonBuilder::check_keywords(const SchemaJson& schema, const std::string& path) const {
  for (const auto& [key, v] : schema.items()) {
    if (!kUnsupported.count(key)) continue;
    // Forms that constrain nothing are harmless.
    if ((key == "unevaluatedProperties" || key == "unevaluatedItems" || key == "additionalItems") && v == false) continue;
    if (key == "multipleOf" && v.is_number() && v.get<double>() == 1.0) continue;
    unsupported(key, path, "keyword '" + key + "'");
  }
  if (schema.value("uniqueItems", false) &&
      !(schema.contains("maxItems") && schema["maxItems"].is_number() && schema["maxItems"].get<double>() <= 1))
    unsupported("uniqueItems", path, "keyword 'uniqueItems'");
}

Item JsonBuilder::literal(const std::string& text, const std::string& name) {
  Sequence s;
  g_.append_literal(s, text);
  if (s.empty()) return Grammar::ref(g_.add_rule(name, {{}}));
  return as_item(g_, s, name);
}

const SchemaJson& JsonBuilder::resolve(const std::string& pointer, const std::string& path) const {
  if (pointer == "#") return document_;
  if (!pointer.starts_with("#/")) unsupported("$ref", path, "$ref '" + pointer + "' (only references into this document)");
  try {
    return document_.at(SchemaJson::json_pointer(pointer.substr(1)));
  } catch (const SchemaJson::exception&) {
    throw GrammarError("$ref", "json schema: $ref '" + pointer + "' at " + path + " points nowhere; fix the reference");
  }
}

Item JsonBuilder::ref(const std::string& pointer, const std::string& path, int depth) {
  auto it = refs_.find(pointer);
  if (it != refs_.end()) return Grammar::ref(it->second);
  const SchemaJson& target = resolve(pointer, path);
  const uint32_t rule = g_.declare("ref" + std::to_string(refs_.size()));
  refs_[pointer] = rule;
  const Item body = value(target, pointer, depth + 1);
  g_.define(rule, {{body}});
  return Grammar::ref(rule);
}

SchemaJson JsonBuilder::merge(const SchemaJson& base, const SchemaJson& extra, const std::string& path) const {
  if (!base.is_object() || !extra.is_object()) unsupported("allOf", path, "combining a boolean schema");
  SchemaJson out = base;
  for (const auto& [key, v] : extra.items()) {
    if (!out.contains(key) || kAnnotations.count(key)) {
      out[key] = v;
    } else if (key == "required" && v.is_array() && out[key].is_array()) {
      for (const auto& r : v)
        if (std::find(out[key].begin(), out[key].end(), r) == out[key].end()) out[key].push_back(r);
    } else if (key == "properties" && v.is_object() && out[key].is_object()) {
      for (const auto& [name, sub] : v.items())
        out[key][name] = out[key].contains(name) && out[key][name] != sub ? SchemaJson{{"allOf", {out[key][name], sub}}} : sub;
    } else if (out[key] != v) {
      unsupported("allOf", path, "combining two different '" + key + "' constraints");
    }
  }
  return out;
}

Item JsonBuilder::one_of(const SchemaJson& schema, const SchemaJson& siblings, const std::string& key, const std::string& path, int depth) {
  const auto& branches = schema[key];
  if (!branches.is_array() || branches.empty())
    throw GrammarError(key, "json schema: " + key + " at " + path + " must be a non-empty array");
  if (branches.size() > 1024) unsupported(key, path, key + " with more than 1024 branches");
  std::vector<SchemaJson> merged;
  for (const auto& b : branches) {
    SchemaJson branch = b;
    if (branch.is_object() && branch.contains("$ref") && branch.size() == 1) branch = resolve(branch["$ref"], path);
    merged.push_back(siblings.empty() ? branch : merge(siblings, branch, path));
  }
  if (key == "oneOf") {
    // Exclusivity is enforced only by construction: every pair of branches must produce disjoint types.
    for (size_t i = 0; i < merged.size(); ++i)
      for (size_t j = i + 1; j < merged.size(); ++j) {
        auto a = schema_types(merged[i]), b = schema_types(merged[j]);
        bool overlap = !a || !b;
        if (!overlap)
          for (const auto& t : *a)
            if (type_allows(*b, t) || (t == "number" && b->count("integer"))) overlap = true;
        if (overlap && a && b && a->size() == 1 && b->size() == 1 && merged[i].contains("enum") == false && merged[i].contains("const") &&
            merged[j].contains("const") && merged[i]["const"] != merged[j]["const"])
          overlap = false;
        if (overlap)
          unsupported("oneOf", path,
                      "oneOf whose branches " + std::to_string(i) + " and " + std::to_string(j) + " can match the same value");
      }
  }
  std::vector<Sequence> alts;
  for (size_t i = 0; i < merged.size(); ++i) alts.push_back({value(merged[i], path + "/" + key + "/" + std::to_string(i), depth + 1)});
  return Grammar::ref(g_.add_rule("anyof", alts));
}

Item JsonBuilder::enum_item(const SchemaJson& values, const SchemaJson& schema, const std::string& path) {
  auto types = schema_types(SchemaJson{{"type", schema.value("type", SchemaJson())}});
  std::vector<Sequence> alts;
  for (const auto& v : values) {
    if (schema.contains("type") && types && !type_allows(*types, json_type_of(v))) continue;
    Sequence s;
    g_.append_literal(s, escape_only(v.dump(), options_.escaped_only));
    alts.push_back(s);
  }
  if (alts.empty()) throw GrammarError("enum", "json schema: enum at " + path + " has no value of the declared type; fix the enum");
  return Grammar::ref(g_.add_rule("enum", alts));
}

Item JsonBuilder::value(const SchemaJson& schema, const std::string& path, int depth) {
  if (depth > kMaxSchemaDepth)
    throw GrammarError("nesting", "json schema: nesting deeper than " + std::to_string(kMaxSchemaDepth) + " at " + path +
                                      " (or a $ref cycle that never reaches a value); flatten the schema");
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return any_value();
    unsupported("false", path, "the schema 'false' (no value is valid)");
  }
  if (!schema.is_object()) throw GrammarError("schema", "json schema: the schema at " + path + " is not an object or boolean");
  check_keywords(schema, path);
  if (schema.contains("$ref")) {
    if (!schema["$ref"].is_string()) throw GrammarError("$ref", "json schema: $ref at " + path + " is not a string");
    SchemaJson siblings = schema;
    siblings.erase("$ref");
    for (const auto& k : kAnnotations) siblings.erase(k);
    if (siblings.empty()) return ref(schema["$ref"], path, depth);
    return value(merge(resolve(schema["$ref"], path), siblings, path), path, depth + 1);
  }
  if (schema.contains("allOf")) {
    SchemaJson merged = schema;
    merged.erase("allOf");
    for (const auto& part : schema["allOf"]) {
      SchemaJson p = part;
      if (p.is_object() && p.contains("$ref")) {
        SchemaJson rest = p;
        rest.erase("$ref");
        p = merge(resolve(p["$ref"], path), rest, path);
      }
      merged = merge(merged, p, path);
    }
    return value(merged, path + "/allOf", depth + 1);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    SchemaJson siblings = schema;
    siblings.erase(key);
    for (const auto& k : kAnnotations) siblings.erase(k);
    if (siblings.contains("anyOf") || siblings.contains("oneOf")) unsupported(key, path, "anyOf and oneOf together");
    return one_of(schema, siblings, key, path, depth);
  }
  if (schema.contains("const")) return enum_item(SchemaJson::array({schema["const"]}), schema, path);
  if (schema.contains("enum")) {
    if (!schema["enum"].is_array()) throw GrammarError("enum", "json schema: enum at " + path + " is not an array");
    return enum_item(schema["enum"], schema, path);
  }
  std::vector<std::string> types;
  if (schema.contains("type")) {
    const auto& t = schema["type"];
    if (t.is_string()) types.push_back(t);
    else if (t.is_array())
      for (const auto& x : t) types.push_back(x.get<std::string>());
    else throw GrammarError("type", "json schema: type at " + path + " is not a string or array");
  } else if (schema.contains("properties") || schema.contains("required") || schema.contains("additionalProperties")) {
    types.push_back("object");
  } else if (schema.contains("items") || schema.contains("prefixItems") || schema.contains("minItems") || schema.contains("maxItems")) {
    types.push_back("array");
  } else if (schema.contains("pattern") || schema.contains("format") || schema.contains("minLength") || schema.contains("maxLength")) {
    types.push_back("string");
  } else if (schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") ||
             schema.contains("exclusiveMaximum")) {
    types.push_back("number");
  } else {
    return any_value();
  }
  if (schema.value("nullable", false)) types.push_back("null");
  std::vector<Sequence> alts;
  for (const auto& t : types) alts.push_back({typed(t, schema, path, depth)});
  if (alts.size() == 1) return alts[0][0];
  return Grammar::ref(g_.add_rule("types", alts));
}

Item JsonBuilder::typed(const std::string& type, const SchemaJson& schema, const std::string& path, int depth) {
  if (type == "object") return object(schema, path, depth);
  if (type == "array") return array(schema, path, depth);
  if (type == "string") return string(schema, path);
  if (type == "integer") return number(schema, true, path);
  if (type == "number") return number(schema, false, path);
  if (type == "boolean") return Grammar::ref(g_.add_rule("boolean", {{literal("true", "true")}, {literal("false", "false")}}));
  if (type == "null") return literal("null", "null");
  throw GrammarError("type", "json schema: unknown type '" + type + "' at " + path);
}

}  // namespace sanctum::grammar
