#pragma once
// The op set model code calls. Each op checks its arguments and dispatches on the device of its
// tensors; backends live in cpu/ (Highway) and ref/ (scalar truth for tests).
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gated_delta.h"
#include "ops/gating.h"
#include "ops/matmul.h"
#include "ops/moe.h"
#include "ops/normed_matmul.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "ops/rope_store.h"
#include "ops/softmax.h"
