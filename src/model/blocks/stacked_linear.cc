#include "model/blocks/stacked_linear.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops/matmul.h"

namespace sanctum {

Weight stack_linears(Checkpoint& ckpt, std::initializer_list<Weight*> parts, const std::string& name) {
  std::vector<const Weight*> list(parts.begin(), parts.end());
  const char* env = std::getenv("SANCTUM_STACK_WEIGHTS");
  if (list.empty() || list[0]->data.device() != Device::cuda || (env && std::strcmp(env, "0") == 0) || !ops::can_stack_rows(list))
    return Weight{};
  Weight stacked = ops::stack_rows(list, name);
  for (Weight* w : parts) {
    for (const char* suffix : {".weight", ".scales", ".biases"}) ckpt.release_upload(w->name + suffix);
    *w = Weight{};
  }
  return stacked;
}

}  // namespace sanctum
