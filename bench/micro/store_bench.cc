// Micro benchmarks of ActivationStore (RocksDB) with the records a 50% split of the width-16
// ResNet-18 produces: one fp16 32x14x14 activation each (12,544 payload bytes, 12.5 KB with
// header and checksum). Every store lives in a mkdtemp directory removed at the end.
//   store/put_batch       a staged write of 256 records by a SplitWriter of no split
//                         (cache/split_writer.h: unlogged, the manifest's counts sealed in, the
//                         free-space check), as a build writes, into a store that grows as the
//                         benchmark runs
//   store/multi_get       128 random keys out of 20,000 stored, warm (every key read once
//                         before timing), store opened read-only as recycle-train does
//   store/multi_get+decode  the same plus parse_record and decode_tensor into a float batch,
//                         i.e. what a training batch from the cache costs
//   store/get_record      one random key per call, for comparison
// Bytes/s count encoded record bytes; items/s count records. Real time (RocksDB works in
// background threads too).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench/micro/bench_util.h"
#include "cache/activation_store.h"
#include "cache/codec.h"
#include "cache/record.h"
#include "cache/split_writer.h"
#include "recycle/key.h"
#include "recycle/status.h"

namespace {

using recycle::ActivationStore;
using recycle::Key;
using recycle::Status;

constexpr int kPutBatch = 256;
constexpr int kStored = 20000;
constexpr int kMultiGet = 128;
constexpr int64_t kNumel = 32 * 14 * 14;

void check(const Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

Key key_of(uint64_t i) { return {0x5EC0DE0000000000ULL ^ (i * 0x9E3779B97F4A7C15ULL), i}; }

// kPoolSize distinct encoded fp16 32x14x14 records of ReLU'd normal values; record i of a
// store is pool[i % kPoolSize] (distinct keys, so RocksDB stores each one).
constexpr int kPoolSize = 256;
const std::vector<std::string>& record_pool() {
  static const std::vector<std::string> pool = [] {
    std::vector<std::string> out;
    for (int i = 0; i < kPoolSize; ++i) {
      const auto values = recycle::bench::random_activations(kNumel, 1000 + i);
      out.push_back(recycle::encode_record(recycle::Codec::kFp16,
                                           {{values.data(), {32, 14, 14}}}));
    }
    return out;
  }();
  return pool;
}

std::unique_ptr<ActivationStore> open_store(const std::string& dir, bool read_only) {
  recycle::StoreOptions options;  // defaults: 64 MiB block cache, lz4
  options.read_only = read_only;
  std::unique_ptr<ActivationStore> store;
  check(ActivationStore::open(dir, options, &store), "open store");
  return store;
}

void BM_PutBatch(benchmark::State& state) {
  const auto& pool = record_pool();
  recycle::bench::TempDir dir;
  auto store = open_store(dir.str(), false);
  recycle::Manifest manifest;
  recycle::SplitWriter writer(store.get(), &manifest, "");
  uint64_t next = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    recycle::StagedWrite w = writer.stage();
    for (int i = 0; i < kPutBatch; ++i, ++next) w.put_record(key_of(next), pool[next % kPoolSize]);
    bytes += static_cast<int64_t>(w.record_bytes());
    writer.seal(&w);
    try {
      writer.write(&w);
    } catch (const std::exception& e) {
      recycle::bench::fail(state, e.what());
      break;
    }
  }
  state.SetBytesProcessed(bytes);
  state.SetItemsProcessed(state.iterations() * kPutBatch);
  store.reset();  // close before the directory goes
}
BENCHMARK(BM_PutBatch)->Name("store/put_batch/256x12.5KB")
    ->UseRealTime()->MinTime(0.5);

// 20,000 records written once (batches of 256, flushed), reopened read-only and read once in
// full so the timed reads are warm. Built on first use, removed at exit.
struct StoredCache {
  recycle::bench::TempDir dir;  // declared first: destroyed after the store closes
  std::vector<Key> keys;
  std::unique_ptr<ActivationStore> store;

  StoredCache() {
    const auto& pool = record_pool();
    {
      auto store_writer = open_store(dir.str(), false);
      recycle::Manifest manifest;
      recycle::SplitWriter writer(store_writer.get(), &manifest, "");
      for (int start = 0; start < kStored; start += kPutBatch) {
        recycle::StagedWrite w = writer.stage();
        for (int i = start; i < start + kPutBatch && i < kStored; ++i) {
          keys.push_back(key_of(static_cast<uint64_t>(i)));
          w.put_record(keys.back(), pool[static_cast<size_t>(i) % kPoolSize]);
        }
        writer.seal(&w);
        writer.write(&w);
      }
      writer.finish();  // flushes
    }
    store = open_store(dir.str(), true);
    std::vector<Status> statuses;
    for (size_t start = 0; start < keys.size(); start += kMultiGet) {
      std::vector<Key> some(keys.begin() + static_cast<std::ptrdiff_t>(start),
                            keys.begin() + static_cast<std::ptrdiff_t>(
                                               std::min(keys.size(), start + kMultiGet)));
      store->multi_get(some, [](size_t, std::string_view) {}, &statuses);
      for (const Status& st : statuses) check(st, "warm-up multi_get");
    }
  }
  static StoredCache& get() {
    static StoredCache cache;
    return cache;
  }
};

// Fills `out` with kMultiGet keys drawn uniformly (with replacement) from `all`.
void pick_keys(const std::vector<Key>& all, std::mt19937_64* rng, std::vector<Key>* out) {
  std::uniform_int_distribution<size_t> pick(0, all.size() - 1);
  out->resize(kMultiGet);
  for (auto& k : *out) k = all[pick(*rng)];
}

// False (and the benchmark marked failed) unless every key was found.
bool all_ok(benchmark::State& state, const std::vector<Status>& statuses) {
  for (const Status& st : statuses) {
    if (!st.ok()) {
      recycle::bench::fail(state, "multi_get: " + st.to_string());
      return false;
    }
  }
  return true;
}

void BM_MultiGet(benchmark::State& state) {
  StoredCache& cache = StoredCache::get();
  std::mt19937_64 rng(7);
  std::vector<Key> keys;
  std::vector<Status> statuses;
  int64_t bytes = 0;
  for (auto _ : state) {
    pick_keys(cache.keys, &rng, &keys);
    cache.store->multi_get(
        keys, [&](size_t, std::string_view v) { bytes += static_cast<int64_t>(v.size()); },
        &statuses);
    if (!all_ok(state, statuses)) break;
  }
  state.SetBytesProcessed(bytes);
  state.SetItemsProcessed(state.iterations() * kMultiGet);
}
BENCHMARK(BM_MultiGet)->Name("store/multi_get/128of20000")
    ->UseRealTime()->MinTime(0.5);

void BM_MultiGetDecode(benchmark::State& state) {
  StoredCache& cache = StoredCache::get();
  std::mt19937_64 rng(7);
  std::vector<Key> keys;
  std::vector<Status> statuses;
  std::vector<recycle::RecordTensor> parts;
  std::vector<float> batch(static_cast<size_t>(kMultiGet * kNumel));
  int64_t bytes = 0;
  bool bad = false;
  for (auto _ : state) {
    pick_keys(cache.keys, &rng, &keys);
    cache.store->multi_get(
        keys,
        [&](size_t i, std::string_view v) {
          bytes += static_cast<int64_t>(v.size());
          if (!recycle::parse_record(v, &parts).ok() || parts.size() != 1) {
            bad = true;
            return;
          }
          recycle::decode_tensor(parts[0], batch.data() + static_cast<int64_t>(i) * kNumel);
        },
        &statuses);
    if (!all_ok(state, statuses)) break;
  }
  benchmark::DoNotOptimize(batch.data());
  if (bad) recycle::bench::fail(state, "a record failed to parse");
  state.SetBytesProcessed(bytes);
  state.SetItemsProcessed(state.iterations() * kMultiGet);
}
BENCHMARK(BM_MultiGetDecode)->Name("store/multi_get+decode/128of20000")
    ->UseRealTime()->MinTime(0.5);

void BM_GetRecord(benchmark::State& state) {
  StoredCache& cache = StoredCache::get();
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> pick(0, cache.keys.size() - 1);
  std::string value;
  int64_t bytes = 0;
  for (auto _ : state) {
    const Status st = cache.store->get_record(cache.keys[pick(rng)], &value);
    if (!st.ok()) {
      recycle::bench::fail(state, st.to_string());
      break;
    }
    bytes += static_cast<int64_t>(value.size());
  }
  state.SetBytesProcessed(bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GetRecord)->Name("store/get_record/1of20000")
    ->UseRealTime()->MinTime(0.5);

}  // namespace
