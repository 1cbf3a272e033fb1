// ResNet-18, the native image encoder: 8 residual blocks named layer1.0 ... layer4.1. The stem
// (3x3 conv, batch norm, ReLU; no max pool, for 28x28 inputs) travels with layer1.0, so
// 25/50/75% recycling ends at a stage boundary (2/4/6 blocks). Stage widths are width, 2x, 4x,
// 8x; stages 2-4 halve the resolution. The classifier is global average pooling then a linear
// layer ("fc"). Options: width (16), in_channels (1; recycle-build sets it from the data).
#pragma once

#include <cstdint>

#include "engine/models/encoder_registry.h"

namespace recycle {

// Its registry entry: name, input kind, options.
EncoderInfo resnet18_info();
// Builds it for a resolved spec (see resolve_encoder_spec).
BlockModel make_resnet18(const EncoderSpec& spec, int64_t classes);

}  // namespace recycle
