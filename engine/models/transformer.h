// The native text encoder: a small pre-norm transformer over byte tokens
// (engine/data/byte_tokenizer.h). Its blocks are its layers, named layer0 ... layer{N-1}; the
// token and position embeddings travel with layer0 and the final layer norm with the last
// layer, so recycling 25/50/75% of a 4-layer model freezes 1/2/3 layers. The classifier is
// mask-aware mean pooling then a linear layer ("fc"). No dropout: a layer is a pure function
// of its input in train and eval mode alike.
//
// Tensors between blocks (all on the model's device):
//   into layer0:   token ids, int64 [N, L], padded with kPadToken (0) after each text's tokens;
//                  1 <= L <= max_tokens, and every row has at least one token.
//   out of a layer ("packed text features"): float32 [N, L, d_model + 1]; channels
//                  0..d_model-1 are the hidden states (zero at padded positions), channel
//                  d_model is the mask (1 at a valid position, 0 at padding). A layer reads
//                  the mask from its input: attention ignores padded keys
//                  (key_padding_mask) and padding never changes a valid position's output.
// A text cache stores the hidden states of the valid positions and the length, never the
// padding (see text_record_layout in engine/precompute and docs/text.md); batches are packed again
// with pack_text_features when they are assembled.
//
// Options: d_model (64), layers (4), heads (4; must divide d_model), ff (256: the width of the
// feed-forward layer), max_tokens (128: texts keep their first max_tokens bytes; docs/text.md
// says why 128 and not more).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/models/encoder_registry.h"

namespace recycle {

// Its registry entry: name "transformer", input "text", options.
EncoderInfo transformer_info();
// Builds it for a resolved spec; throws std::invalid_argument when heads does not divide
// d_model.
BlockModel make_transformer(const EncoderSpec& spec, int64_t classes);

// max_tokens of a transformer spec (canonical or not).
int64_t transformer_max_tokens(const std::string& spec);

// Multi-head self-attention over x float32 [N, L, D] with a mask bool [N, L] (true at valid
// positions; padded positions are never attended to, as keys): the computation of
// nn::MultiheadAttention(D, heads) with key_padding_mask = !mask and no dropout, batch first:
//   [q k v] = x in_proj_weight^T + in_proj_bias   (in_proj_weight [3D, D], in_proj_bias [3D])
//   per head h: softmax(q_h k_h^T / sqrt(D / heads) + padding bias) v_h,  concatenated
//   out = concat out_weight^T + out_bias          (out_weight [D, D], out_bias [D])
// Returns [N, L, D]. Outputs at padded positions are computed too (the caller zeroes them).
torch::Tensor masked_self_attention(const torch::Tensor& x, const torch::Tensor& mask,
                                    const torch::Tensor& in_proj_weight,
                                    const torch::Tensor& in_proj_bias,
                                    const torch::Tensor& out_weight, const torch::Tensor& out_bias,
                                    int64_t heads);

// Packed text features from hidden states float32 [N, L, D] and a mask bool [N, L] (true at
// valid positions): [N, L, D + 1], hidden states zeroed at padding.
torch::Tensor pack_text_features(const torch::Tensor& hidden, const torch::Tensor& mask);
// The mask bool [N, L] of lengths int64 [N]: position j of row i is valid when j < lengths[i].
torch::Tensor mask_from_lengths(const torch::Tensor& lengths, int64_t max_length);

// Token ids int64 [N, L] on `device` for the texts, L the longest one's token count (at most
// max_tokens), padded with kPadToken. Throws std::invalid_argument for an empty text.
torch::Tensor token_batch(const std::vector<std::string>& texts, int64_t max_tokens,
                          const torch::Device& device);

}  // namespace recycle
