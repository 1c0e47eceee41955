#pragma once
// Where each target of an adapter lands in a checkpoint. An adapter names modules the way its
// trainer saw the model (mlx-lm: the mlx module path; PEFT: the transformers path), and checkpoints
// of one architecture come in flavours whose prefixes differ (mlx-community's
// `language_model.model.layers.N.` against Hugging Face's `model.language_model.layers.N.`), so the
// match is on the part from `layers.N.` on (or the last name outside the layers: lm_head), against
// the linears the checkpoint holds.
#include <map>
#include <string>
#include <vector>

#include "weights/adapters/lora_adapter.h"

namespace sanctum {

// checkpoint module prefix ("model.layers.0.self_attn.q_proj") -> the adapter target folded into it.
using AdapterPlacement = std::map<std::string, const LoraTarget*>;

// Places every target of `adapter` onto the modules among `checkpoint_names` (tensor names of the
// checkpoint in `checkpoint_dir`). Throws sanctum::Error naming the adapter file and tensor for a
// target with no module in the checkpoint (with a layer beyond the model's said so), one that matches
// several, or one its own config excludes (num_layers, keys, target_modules, layers_to_transform).
AdapterPlacement place_adapter(const LoraAdapter& adapter, const std::vector<std::string>& checkpoint_names,
                               const std::string& checkpoint_dir);

}  // namespace sanctum
