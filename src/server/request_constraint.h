#pragma once
// A request's OutputConstraint on the model that serves it: response_format / grammar / json_schema,
// or tool_choice "required" / a named function / strict tools, compiled against the model's
// vocabulary on the HTTP thread (so a schema we cannot enforce is a 400 before any inference, naming
// the field and the feature), cached per model; where a reasoning model starts it; and logit_bias
// checked against the vocabulary. Null when the request constrains nothing.
#include <memory>

#include "chat/prompt_builder.h"
#include "engine/output_constraint.h"
#include "server/app.h"
#include "server/openai_request.h"

namespace sanctum::server {

std::shared_ptr<const OutputConstraint> request_constraint(const ServedModel& m, const OpenAiRequest& r, const BuiltPrompt& prompt);

}  // namespace sanctum::server
