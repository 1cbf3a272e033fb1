// Keys of a batch of input tensors, one per row, as a program's build (CacheWriter,
// include/recycle/writer.h) stores them and KeyedReader (include/recycle/reader.h) looks them
// up: each row a TensorView of its dtype's name, shape and bytes, with its position as its id.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "recycle/key.h"
#include "recycle/keyer.h"

namespace at {
class Tensor;
}  // namespace at

namespace recycle {

// Row i of `inputs` (contiguous, on the CPU, the batch as dimension 0) keyed by `keyer`, its id
// first_id + i, into (*keys)[i]. Throws InvalidArgument for a dtype that cannot be keyed (not a
// real, integer or bool one); what the keyer throws for an input it cannot key.
void key_rows(const Keyer& keyer, const at::Tensor& inputs, int64_t first_id,
              std::vector<Key>* keys);

// Texts keyed by `keyer` (a text keyer, or "id": first_id + i), into (*keys)[i]. Throws
// InvalidArgument, naming the keyer, for one that keys no text.
void key_texts(const Keyer& keyer, const std::vector<std::string>& texts, int64_t first_id,
               std::vector<Key>* keys);

// Samples of named tensors (any shapes, on any device) keyed, with "xxh3", by the XXH3-128 of
// every tensor's name, dtype, shape and bytes in name order (equal content, equal key; any
// change of a name, dtype, shape or byte, another key), or by position with "id". Throws
// InvalidArgument for another keyer or a tensor that cannot be keyed.
void key_named(const Keyer& keyer, const std::vector<std::map<std::string, at::Tensor>>& samples,
               int64_t first_id, std::vector<Key>* keys);

}  // namespace recycle
