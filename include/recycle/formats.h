// The closed sets of what a cache stores, as its records and its manifest name them: the codec of
// float activations, the dtype of a record tensor, and RocksDB's compression of the records. The
// cache (cache/codec.h, cache/record.h, cache/store_rocksdb.h) implements them; the options
// (options.h) parse their names. No LibTorch here; value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recycle {

// How a record stores float activations: exact (fp32), halved (fp16, bf16: round to nearest
// even) or quartered (int8: per channel a scale and an offset and one byte per value). The
// values are the byte a record stores (cache/codec.h).
enum class Codec : uint8_t { kFp32 = 1, kFp16 = 2, kBf16 = 3, kInt8 = 4 };
// "fp32", "fp16", "bf16", "int8".
std::string codec_name(Codec codec);
std::vector<std::string> codec_names();

// The logical dtype of a record tensor; the values are the byte a record stores.
enum class Dtype : uint8_t { kFloat32 = 1, kInt64 = 2, kInt32 = 3, kUint8 = 4, kBool = 5 };
// "float32", "int64", "int32", "uint8", "bool".
std::string dtype_name(Dtype dtype);

// RocksDB's compression of the records a build writes (the index and manifest always use lz4).
enum class Compression { kNone, kLz4, kZstd };

}  // namespace recycle
