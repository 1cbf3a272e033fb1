// TorchScript models: `--model torchscript:FILE` loads a scripted nn.Sequential (torch.jit.save)
// and sees it as a block model (block_model.h). See docs/torchscript.md.
//
// Blocks and classifier, from the Sequential's named children in order:
// - The classifier is the last child that has parameters, with any parameterless children
//   after it.
// - Before it, every child with parameters starts a block; a child without parameters (ReLU,
//   pooling, flatten) joins the block before it (a leading one joins the first block).
// - The stem: when some child has children of its own (a stage such as torchvision's layer1),
//   the blocks before the first such child join it. torchvision's ResNet-18 (conv1, bn1, relu,
//   maxpool, layer1..layer4, avgpool, flatten, fc) has 4 blocks: layer1 (with the stem),
//   layer2, layer3, layer4 (with avgpool and flatten); the classifier is fc.
// A block is named after its child with parameters that started it (the stage, for the stem).
//
// The file's module is used as it is: its parameters and buffers are the very tensors the
// block model registers (names as in the file, e.g. "layer1.0.conv1.weight"), so training the
// blocks trains the scripted modules, and train()/eval() reach them. When the task has as many
// classes as the classifier has outputs, the file's classifier is kept (Classifier::is_own());
// otherwise a new one is made: flatten then a linear layer whose input size is found by running
// one batch (zeros of the spec's input shape) through the blocks. Loading checks, on a
// pseudo-random probe batch in eval mode, that the module's forward equals its children run in
// order, and refuses a file where it does not.
//
// Spec options (set from the data by recycle-build and recycle-train): in_channels, in_height,
// in_width, the shape of one input sample. The spec also holds the file's absolute path and
// XXH3-128 (encoder_registry.h). Loading needs LibTorch's TorchScript runtime; this header does
// not include it.
#pragma once

#include <cstdint>

#include "engine/models/encoder_registry.h"

namespace recycle {

class BlockStack;  // engine/models/block_model.h

// Its registry entry: name "torchscript", image input, the input-shape options, takes a file.
EncoderInfo torchscript_info();
// Loads it for a resolved spec (see resolve_encoder_spec). Throws std::invalid_argument for a
// file that is not a scripted module, has no child with parameters, no block before its
// classifier, or whose forward is not its children in order.
BlockModel make_torchscript(const EncoderSpec& spec, int64_t classes);

// A head from a TorchScript file (recycle-train --script-head): a module of any kind (scripted
// or traced) from a batch of cached activations [N, ...] to logits [N, classes], trained as it
// is: its parameters and buffers are the head's, under their names in the file. A BlockStack
// of one block, "script"; its forward_all passes a record's several tensors (a batch of each,
// in the record layout's order) as the module's forward arguments. *digest: the XXH3-128 of
// the file's bytes (what the ranks of a job compare). Throws std::invalid_argument for a file that
// is missing, not a regular file, not a TorchScript module or without parameters.
BlockStack load_script_head(const std::string& file, std::string* digest);

// Writes the TorchScript module behind a head that load_script_head made, with its parameters
// as they are now, to `path` atomically (torch.jit.load reads it). Throws std::runtime_error
// "cannot write PATH: why", std::logic_error for a head that load_script_head did not make.
void save_script_head(BlockStack& head, const std::string& path);

}  // namespace recycle
