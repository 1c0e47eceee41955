// GET / POST /admin/adapters (serve --admin): the per-request adapters of a model, listed, loaded,
// unloaded and replaced while the server runs.
#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "server/app.h"
#include "server/auth.h"
#include "server/openai_request.h"

namespace sanctum::server {

using nlohmann::json;

namespace {

ApiError unauthorized(const std::string& message) { return ApiError(401, "authentication_error", message, "", "unauthorized"); }

json adapter_list(const ServedModel& m) {
  json list = json::array();
  if (!m.loras) return list;
  for (const auto& [name, entry] : m.loras->list()) {
    int64_t rank = 0;
    for (const auto& [module, target] : entry.lora->by_module) rank = std::max(rank, target->rank);
    list.push_back(
        {{"name", name}, {"id", m.id + ":" + name}, {"path", entry.path}, {"rank", rank}, {"modules", entry.lora->by_module.size()}});
  }
  return list;
}

std::string string_field(const RequestJson& body, const char* key) {
  if (!body.contains(key)) return {};
  if (!body[key].is_string()) throw bad_request(std::string("'") + key + "' must be a string", key);
  return body[key].get<std::string>();
}

}  // namespace

// The admin endpoints take an mTLS client whose CN --admin-identity lists, or the --auth-token-file
// token itself (the loopback bypass does not reach them).
void App::require_admin(const Exchange& ex) const {
  const HttpRequest& req = ex.request();
  const ClientParts who = split_client(req.client);
  if (req.tls && !who.identity.empty() &&
      std::find(options_.admin_identities.begin(), options_.admin_identities.end(), who.identity) != options_.admin_identities.end())
    return;
  if (options_.admin_token) {
    const auto token = bearer_token(req.authorization);
    const std::string_view presented = token ? *token : std::string_view(req.x_api_key);
    if (!presented.empty() && options_.admin_token->token_matches(presented)) return;
  }
  throw unauthorized(
      "the admin endpoints need the --auth-token-file token (Authorization: Bearer) or an mTLS client named by --admin-identity");
}

void App::admin_adapters(Exchange& ex, bool post) {
  require_admin(ex);
  if (!post) {
    json models = json::object();
    for (const auto& m : models_) models[m->id] = adapter_list(*m);
    ex.respond_json(200, {{"models", models}});
    return;
  }
  const RequestJson body = parse_body(ex.request().body);
  const std::string action = string_field(body, "action"), name = string_field(body, "name"), path = string_field(body, "path");
  const std::string model = string_field(body, "model");
  if (action != "load" && action != "unload" && action != "replace")
    throw bad_request("'action' must be \"load\", \"unload\" or \"replace\", got \"" + action + "\"", "action");
  if (name.empty()) throw bad_request("'name' is required: the adapter's name, which requests use as MODEL:NAME", "name");
  if (action != "unload" && path.empty()) throw bad_request("'path' is required for \"" + action + "\": the adapter's directory", "path");
  ServedModel& m = resolve_model(model);
  if (!m.loras) throw bad_request("model '" + m.id + "' serves no per-request adapters", "model");
  if (action != "load" && !m.loras->find(name))
    throw not_found("adapter '" + name + "' is not loaded on model '" + m.id + "'", "adapter_not_found");
  try {
    if (action == "load") m.loras->load(name, path);
    else if (action == "unload") m.loras->unload(name);
    else m.loras->replace(name, path);
  } catch (const Error& e) {
    log::warn("adapter refused", {{"model", m.id}, {"action", action}, {"adapter", name}, {"path", path}, {"error", e.what()}});
    throw bad_request(std::string("adapter '") + name + "' not " +
                          (action == "load"     ? "loaded"
                           : action == "unload" ? "unloaded"
                                                : "replaced") +
                          ": " + e.what() + " (the adapters loaded before keep serving)",
                      action == "unload" ? "name" : "path", "invalid_adapter");
  }
  set_lora_gauge(m);
  log::info("adapters changed", {{"model", m.id}, {"action", action}, {"adapter", name}, {"path", path}});
  ex.respond_json(200, {{"action", action}, {"name", name}, {"id", m.id + ":" + name}, {"adapters", adapter_list(m)}});
}

}  // namespace sanctum::server
