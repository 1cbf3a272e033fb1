// Micro benchmarks of the codecs (fp32 / fp16 / bf16 / int8) and the record format.
// Sizes: 6272 floats (one 32x14x14 activation, the 50% split of the width-16 ResNet-18) and
// 1 Mi floats. Bytes/s count the float side (4 bytes per value) for encode and decode alike;
// items/s are values (codec benchmarks) or records (record benchmarks).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/micro/bench_util.h"
#include "cache/codec.h"
#include "cache/record.h"

namespace {

using recycle::Codec;

constexpr int64_t kActivation = 32 * 14 * 14;  // 6272
constexpr int64_t kMi = 1 << 20;
const std::vector<int64_t> kActivationShape = {32, 14, 14};

const Codec kCodecs[] = {Codec::kFp32, Codec::kFp16, Codec::kBf16, Codec::kInt8};
// Channels of the arrays (int8 keeps a scale and an offset per channel; the others ignore
// them): 32, as in a 32x14x14 activation.
constexpr size_t kChannels = 32;

void BM_EncodeValues(benchmark::State& state, Codec codec) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto in = recycle::bench::random_activations(n);
  std::vector<char> out(recycle::codec_payload_bytes(codec, n, kChannels));
  for (auto _ : state) {
    recycle::encode_values(codec, in.data(), n, kChannels, out.data());
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(out.data());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(float)));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

void BM_DecodeValues(benchmark::State& state, Codec codec) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto values = recycle::bench::random_activations(n);
  std::vector<char> encoded(recycle::codec_payload_bytes(codec, n, kChannels));
  recycle::encode_values(codec, values.data(), n, kChannels, encoded.data());
  std::vector<float> out(n);
  for (auto _ : state) {
    recycle::decode_values(codec, encoded.data(), n, kChannels, out.data());
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(out.data());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(float)));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

// encode_record of one 32x14x14 activation (encode + header + XXH3-64 checksum + string).
void BM_EncodeRecord(benchmark::State& state, Codec codec) {
  const auto values = recycle::bench::random_activations(kActivation);
  const std::vector<recycle::FloatArrayRef> tensors = {{values.data(), kActivationShape}};
  for (auto _ : state) {
    std::string record = recycle::encode_record(codec, tensors);
    benchmark::DoNotOptimize(record.data());
  }
  state.SetBytesProcessed(state.iterations() * kActivation * static_cast<int64_t>(sizeof(float)));
  state.SetItemsProcessed(state.iterations());
}

// parse_record (magic, sizes, checksum) then decode_tensor of one 32x14x14 record: what a
// training batch does per sample after MultiGet.
void BM_ParseDecodeRecord(benchmark::State& state, Codec codec) {
  const auto values = recycle::bench::random_activations(kActivation);
  const std::string record = recycle::encode_record(codec, {{values.data(), kActivationShape}});
  std::vector<recycle::RecordTensor> parts;
  std::vector<float> out(kActivation);
  for (auto _ : state) {
    const recycle::Status st = recycle::parse_record(record, &parts);
    if (!st.ok() || parts.size() != 1) {
      recycle::bench::fail(state, "parse_record: " + st.to_string());
      break;
    }
    recycle::decode_tensor(parts[0], out.data());
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(out.data());
  state.SetBytesProcessed(state.iterations() * kActivation * static_cast<int64_t>(sizeof(float)));
  state.SetItemsProcessed(state.iterations());
  state.counters["record_bytes"] = static_cast<double>(record.size());
}

// Registers every benchmark under a readable name such as "codec/encode/fp16/6272".
int register_codec_benchmarks() {
  for (Codec c : kCodecs) {
    const std::string name = recycle::codec_name(c);
    benchmark::RegisterBenchmark(("codec/encode/" + name).c_str(), BM_EncodeValues, c)
        ->Arg(kActivation)->Arg(kMi)->MinTime(0.1);
    benchmark::RegisterBenchmark(("codec/decode/" + name).c_str(), BM_DecodeValues, c)
        ->Arg(kActivation)->Arg(kMi)->MinTime(0.1);
  }
  for (Codec c : kCodecs) {
    const std::string name = recycle::codec_name(c);
    benchmark::RegisterBenchmark(("record/encode/" + name + "/32x14x14").c_str(),
                                 BM_EncodeRecord, c)->MinTime(0.1);
    benchmark::RegisterBenchmark(("record/parse+decode/" + name + "/32x14x14").c_str(),
                                 BM_ParseDecodeRecord, c)->MinTime(0.1);
  }
  return 0;
}
[[maybe_unused]] const int kRegistered = register_codec_benchmarks();

}  // namespace
