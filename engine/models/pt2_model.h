// Models from torch.export: `--model pt2:FILE` loads an AOTInductor package (a .pt2 file from
// recycle.export, or torch._inductor.aoti_compile_and_package) and sees it as a block model of
// one block, "package": the whole package is the frozen prefix (--recycle 1), and the head a new
// classifier (flatten, then a linear layer whose input size is found by running one probe batch
// through the package). See docs/pytorch2.md.
//
// The package is compiled code: it runs as it is (inference only, on the device it was compiled
// for), and loading it runs it, so the tools load only a package the user names (as
// torchscript:FILE). Its identity: the weights' XXH3-128 that recycle.export writes into the
// package's metadata ("recycle.weights"), so that a re-export of the same weights is the same
// cache; for a package without it, the XXH3-128 of the file's bytes. The spec holds it
// ("pt2:/abs/prefix.pt2,xxh3=HEX,in_channels=3,in_height=64,in_width=64"), and the block
// registers it as its one buffer, so the prefix's fingerprint covers it.
//
// A text prefix (recycle.export of recycle.hf.split's prefix: metadata "recycle.input" =
// "tokens") takes token ids and their attention mask, each int64 [N, L], and returns the hidden
// states [N, L, H] (and the mask). Its block takes the two as one int64 [N, 2, L] (npy token ids,
// token_id_batch) and gives the packed text features [N, L, H + 1] of engine/models/transformer.h
// (the mask as the last channel); its classifier pools over the mask (Pooling::kMaskedMean).
//
// Reading packages needs LibTorch >= 2.6 (torch::inductor::AOTIModelPackageLoader); under an
// older LibTorch (Debian's 1.13) every function here refuses a package in one line that says
// which build reads it. This header does not include LibTorch.
#pragma once

#include <cstdint>
#include <string>

#include "engine/models/encoder_registry.h"

namespace recycle {

class BlockStack;  // engine/models/block_model.h

// True when this build reads AOTInductor packages (LibTorch >= 2.6).
bool pt2_supported();

// Its registry entry: name "pt2", image input, the input-shape options, takes a file.
EncoderInfo pt2_info();

// The package's identity (see above) from its path and bytes: the metadata's "recycle.weights"
// when it is 32 hex digits, else the XXH3-128 of `bytes`. Throws std::invalid_argument for a file
// that is not an AOTInductor package, or under a build that cannot read one.
std::string pt2_digest(const std::string& path, const std::string& bytes);

// Throws std::invalid_argument in one line when the package `file` and the data do not fit: a
// text prefix (it takes token ids) without token ids (`token_ids` false), or token ids for a
// package that takes images. Under a build that cannot read packages, the one line make_pt2
// gives.
void check_pt2_input(const std::string& file, bool token_ids);

// Loads the package for a resolved spec (one block, "package"; a new classifier of `classes`
// outputs). Throws std::invalid_argument for a file that is not a package, that does not run on a
// probe batch of the spec's input shape, or whose output is not finite.
BlockModel make_pt2(const EncoderSpec& spec, int64_t classes);

// A compiled head (recycle-predict --head FILE.pt2): a BlockStack of one block, "package", whose
// forward runs the package on a batch of cached activations. *metadata_head: the package's
// "recycle.head" metadata (the identity JSON recycle.export(..., cache=DIR) writes; "" when it
// has none). Throws std::invalid_argument as make_pt2 does (naming the flag `flag`).
BlockStack load_pt2_head(const std::string& file, const std::string& flag,
                         std::string* metadata_head);

// True when `path` names a file whose name ends in ".pt2".
bool is_pt2_path(const std::string& path);

}  // namespace recycle
