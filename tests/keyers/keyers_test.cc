// Tests for keyers/: the 128-bit Key, the content hasher behind the xxh3 keyer (equal content
// gives an equal key whatever the strides; any other content another key), the text and id
// keyers, and the spec-string registry.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "keyers/id_keyer.h"
#include "keyers/text_keyer.h"
#include "keyers/xxh3_keyer.h"
#include "recycle/content_hasher.h"
#include "recycle/key.h"
#include "recycle/keyer.h"

namespace {

struct DtypeInfo {
  const char* name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {{"uint8", 1}, {"int16", 2}, {"float32", 4}, {"float64", 8}};

std::string random_bytes(std::mt19937* rng, size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(byte(*rng));
  return s;
}

int64_t random_int(std::mt19937* rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(*rng);
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A row-major view of `bytes` (which must outlive the view).
recycle::TensorView dense_view(const char* dtype, size_t element_size,
                               const std::vector<int64_t>& shape, const std::string& bytes) {
  recycle::TensorView t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = recycle::TensorView::contiguous_strides(shape);
  t.data = bytes.data();
  t.element_size = element_size;
  return t;
}

// The elements a view sees, in row-major order, read one index at a time.
std::string materialize(const recycle::TensorView& t) {
  std::string out;
  const int64_t n = t.numel();
  const size_t nd = t.shape.size();
  std::vector<int64_t> idx(nd, 0);
  const char* base = static_cast<const char*>(t.data);
  for (int64_t e = 0; e < n; ++e) {
    int64_t offset = 0;
    for (size_t d = 0; d < nd; ++d) offset += idx[d] * t.strides[d];
    out.append(base + offset * static_cast<int64_t>(t.element_size), t.element_size);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

recycle::Key tensor_key(const recycle::TensorView& t) {
  recycle::KeyInput in;
  in.tensor = &t;
  return recycle::Xxh3Keyer().key(in);
}

recycle::Key text_key(const recycle::Keyer& keyer, std::string_view text) {
  recycle::KeyInput in;
  in.text = text;
  in.has_text = true;
  return keyer.key(in);
}

recycle::Key id_key(std::string_view id) {
  recycle::KeyInput in;
  in.id = id;
  in.has_id = true;
  return recycle::IdKeyer().key(in);
}

std::string le64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

// The message of the std::invalid_argument `fn` throws, or "<no exception>".
template <typename Fn>
std::string invalid_argument_of(Fn fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no exception>";
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Key

TEST(Key, BytesAreBigEndianHiThenLo) {
  const recycle::Key k{0x0102030405060708ULL, 0x90A0B0C0D0E0F0FFULL};
  EXPECT_EQ(k.to_bytes(),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x90\xA0\xB0\xC0\xD0\xE0\xF0\xFF", 16));
  char raw[recycle::Key::kBytes];
  k.to_bytes(raw);
  EXPECT_EQ(std::string(raw, 16), k.to_bytes());
  EXPECT_EQ(k.to_hex(), "010203040506070890a0b0c0d0e0f0ff");
  EXPECT_EQ(recycle::Key{}.to_hex(), std::string(32, '0'));
  EXPECT_EQ((recycle::Key{~0ULL, ~0ULL}.to_hex()), std::string(32, 'f'));
}

TEST(Key, BytesRoundTrip) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint64_t> u64;
  for (int i = 0; i < 500; ++i) {
    const recycle::Key k{u64(rng), u64(rng)};
    const std::string bytes = k.to_bytes();
    ASSERT_EQ(bytes.size(), 16u);
    recycle::Key back;
    ASSERT_TRUE(recycle::Key::from_bytes(bytes, &back));
    EXPECT_EQ(back, k);
    EXPECT_EQ(back.hi, k.hi);
    EXPECT_EQ(back.lo, k.lo);
    // The hex form is the bytes, two digits each.
    const std::string hex = k.to_hex();
    ASSERT_EQ(hex.size(), 32u);
    for (size_t b = 0; b < 16; ++b) {
      EXPECT_EQ(std::stoul(hex.substr(2 * b, 2), nullptr, 16),
                static_cast<unsigned long>(static_cast<uint8_t>(bytes[b])));
    }
  }
}

TEST(Key, FromBytesRejectsWrongSizeAndLeavesOutputAlone) {
  const recycle::Key sentinel{42, 43};
  for (size_t n : {0, 1, 15, 17, 32}) {
    recycle::Key out = sentinel;
    EXPECT_FALSE(recycle::Key::from_bytes(std::string(n, '\x7f'), &out)) << n;
    EXPECT_EQ(out, sentinel) << n;
  }
}

TEST(Key, OrderIsHiThenLoAndMatchesByteOrder) {
  EXPECT_LT((recycle::Key{1, 0}), (recycle::Key{2, 0}));
  EXPECT_LT((recycle::Key{1, ~0ULL}), (recycle::Key{2, 0}));
  EXPECT_LT((recycle::Key{5, 1}), (recycle::Key{5, 2}));
  EXPECT_FALSE((recycle::Key{5, 2}) < (recycle::Key{5, 2}));
  EXPECT_FALSE((recycle::Key{6, 0}) < (recycle::Key{5, 9}));
  EXPECT_NE((recycle::Key{5, 2}), (recycle::Key{2, 5}));
  EXPECT_EQ((recycle::Key{5, 2}), (recycle::Key{5, 2}));

  // The 16-byte form sorts like the keys (RocksDB iterates records in this order).
  std::mt19937 rng(12);
  std::uniform_int_distribution<uint64_t> u64;
  std::vector<recycle::Key> keys;
  for (int i = 0; i < 300; ++i) {
    // Small values too, so many pairs share hi and order by lo.
    keys.push_back({i % 3 == 0 ? u64(rng) % 4 : u64(rng), u64(rng)});
  }
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    const recycle::Key& a = keys[i];
    const recycle::Key& b = keys[i + 1];
    EXPECT_EQ(a < b, a.to_bytes() < b.to_bytes());
    EXPECT_EQ(b < a, b.to_bytes() < a.to_bytes());
    EXPECT_EQ(a < b, a.to_hex() < b.to_hex());
  }
}

TEST(Key, HashableInUnorderedSet) {
  std::unordered_set<recycle::Key, recycle::KeyHash> set;
  for (uint64_t i = 0; i < 100; ++i) {
    set.insert({i, 7});
    set.insert({7, i});
  }
  EXPECT_EQ(set.size(), 199u);  // {7, 7} twice
  EXPECT_EQ(recycle::KeyHash()({3, 4}), recycle::KeyHash()({3, 4}));
  EXPECT_EQ(set.count({7, 99}), 1u);
  EXPECT_EQ(set.count({99, 99}), 0u);
}

TEST(Key, Hash128IsXxh3With128BitHalves) {
  for (uint64_t seed : {0ULL, 7ULL, 0x74657874ULL}) {
    for (const std::string& s : {std::string(), std::string("abc"), std::string(1000, 'x')}) {
      const XXH128_hash_t h = XXH3_128bits_withSeed(s.data(), s.size(), seed);
      const recycle::Key k = recycle::hash128(s, seed);
      EXPECT_EQ(k.hi, h.high64);
      EXPECT_EQ(k.lo, h.low64);
    }
  }
  EXPECT_NE(recycle::hash128("abc", 0), recycle::hash128("abc", 1));
}

// ---------------------------------------------------------------------------------------------
// Xxh3Keyer (and the ContentHasher behind it)

TEST(Xxh3Keyer, SpecAndDocumentedByteLayout) {
  EXPECT_EQ(recycle::Xxh3Keyer().spec(), "xxh3");
  // dtype (length-prefixed), rank, dims, byte count, then the bytes; all u64 little-endian.
  const std::string bytes = "abcdef";
  const recycle::TensorView t = dense_view("uint8", 1, {2, 3}, bytes);
  const std::string layout = le64(5) + "uint8" + le64(2) + le64(2) + le64(3) + le64(6) + bytes;
  EXPECT_EQ(tensor_key(t), recycle::hash128(layout, 0));

  // The same content through a transposed layout hashes to the same exact value.
  const std::string transposed = "adbecf";  // a 3x2 buffer whose transpose is "abcdef"
  recycle::TensorView v = dense_view("uint8", 1, {2, 3}, transposed);
  v.strides = {1, 2};
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(tensor_key(v), recycle::hash128(layout, 0));

  // The engine's fingerprint uses the same hasher: equal to a ContentHasher's digest.
  recycle::ContentHasher h;
  h.update_tensor(t);
  EXPECT_EQ(h.digest(), tensor_key(t));
  EXPECT_EQ(h.digest(), h.digest());  // digest() does not consume the state
}

TEST(Xxh3Keyer, HasherFieldsAreLengthPrefixed) {
  recycle::ContentHasher a, b, c;
  a.update_field("ab");
  a.update_field("c");
  b.update_field("a");
  b.update_field("bc");
  c.update_field("ab");
  c.update_field("c");
  EXPECT_NE(a.digest(), b.digest());
  EXPECT_EQ(a.digest(), c.digest());
  EXPECT_EQ(a.digest(), recycle::hash128(le64(2) + "ab" + le64(1) + "c", 0));

  recycle::ContentHasher s0(0), s1(1);
  s0.update_u64(5);
  s1.update_u64(5);
  EXPECT_NE(s0.digest(), s1.digest());
  EXPECT_EQ(s0.digest(), recycle::hash128(le64(5), 0));
}

TEST(Xxh3Keyer, ContiguousHelpers) {
  EXPECT_EQ(recycle::TensorView::contiguous_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(recycle::TensorView::contiguous_strides({5}), (std::vector<int64_t>{1}));
  EXPECT_EQ(recycle::TensorView::contiguous_strides({}), (std::vector<int64_t>{}));
  recycle::TensorView t;
  t.shape = {2, 1, 3};
  t.strides = {3, 99, 1};  // a size-1 dimension's stride does not matter
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 6);
  t.strides = {1, 3, 2};
  EXPECT_FALSE(t.is_contiguous());
  t.shape = {};
  t.strides = {};
  EXPECT_EQ(t.numel(), 1);
  EXPECT_TRUE(t.is_contiguous());
  t.shape = {4, 0};
  EXPECT_EQ(t.numel(), 0);
}

TEST(Xxh3Keyer, TransposedLayoutEqualsContiguousCopy) {
  std::mt19937 rng(1);
  for (int c = 0; c < 400; ++c) {
    const DtypeInfo dt = kDtypes[c % 4];
    const int64_t rows = random_int(&rng, 2, 9);
    const int64_t cols = random_int(&rng, 2, 9);
    // buffer holds a rows x cols matrix; the view is its cols x rows transpose.
    const std::string buffer = random_bytes(&rng, rows * cols * dt.size);
    recycle::TensorView view = dense_view(dt.name, dt.size, {cols, rows}, buffer);
    view.strides = {1, cols};
    ASSERT_FALSE(view.is_contiguous());
    std::string copy;
    for (int64_t j = 0; j < cols; ++j) {
      for (int64_t i = 0; i < rows; ++i) copy.append(buffer, (i * cols + j) * dt.size, dt.size);
    }
    const recycle::Key dense = tensor_key(dense_view(dt.name, dt.size, {cols, rows}, copy));
    EXPECT_EQ(tensor_key(view), dense) << "case " << c << " " << rows << "x" << cols;
    EXPECT_NE(dense, tensor_key(dense_view(dt.name, dt.size, {cols, rows}, buffer)))
        << "a transposed matrix is other content (case " << c << ")";
  }
}

TEST(Xxh3Keyer, PermutedLayoutsEqualContiguousCopy) {
  // Any permutation of a rank 2-4 tensor's dimensions, with some dimensions also reversed.
  std::mt19937 rng(2);
  for (int c = 0; c < 300; ++c) {
    const DtypeInfo dt = kDtypes[c % 4];
    const size_t rank = static_cast<size_t>(random_int(&rng, 2, 4));
    std::vector<int64_t> base(rank);
    for (auto& d : base) d = random_int(&rng, 1, 5);
    const std::vector<int64_t> base_strides = recycle::TensorView::contiguous_strides(base);
    const std::string buffer = random_bytes(&rng, product(base) * dt.size);
    std::vector<size_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    recycle::TensorView view = dense_view(dt.name, dt.size, {}, buffer);
    view.shape.resize(rank);
    view.strides.resize(rank);
    int64_t start = 0;
    for (size_t i = 0; i < rank; ++i) {
      view.shape[i] = base[perm[i]];
      view.strides[i] = base_strides[perm[i]];
      if (rng() % 3 == 0) {  // reverse this dimension: a negative stride from its last element
        start += (view.shape[i] - 1) * view.strides[i];
        view.strides[i] = -view.strides[i];
      }
    }
    view.data = buffer.data() + start * static_cast<int64_t>(dt.size);
    const std::string copy = materialize(view);
    ASSERT_EQ(copy.size(), buffer.size());
    EXPECT_EQ(tensor_key(view), tensor_key(dense_view(dt.name, dt.size, view.shape, copy)))
        << "case " << c;
  }
}

TEST(Xxh3Keyer, SliceWithWideRowStrideEqualsContiguousCopy) {
  std::mt19937 rng(3);
  for (int c = 0; c < 400; ++c) {
    const DtypeInfo dt = kDtypes[c % 4];
    const int64_t rows = random_int(&rng, 1, 8);
    const int64_t width = random_int(&rng, 1, 8);
    const int64_t row_stride = width + random_int(&rng, 1, 5);  // wider than the slice
    const int64_t col0 = random_int(&rng, 0, row_stride - width);
    const std::string buffer = random_bytes(&rng, rows * row_stride * dt.size);
    recycle::TensorView view = dense_view(dt.name, dt.size, {rows, width}, buffer);
    view.strides = {row_stride, 1};
    view.data = buffer.data() + col0 * dt.size;
    if (rows > 1) {
      ASSERT_FALSE(view.is_contiguous());
    }
    std::string copy;
    for (int64_t i = 0; i < rows; ++i) {
      copy.append(buffer, (i * row_stride + col0) * dt.size, width * dt.size);
    }
    EXPECT_EQ(tensor_key(view), tensor_key(dense_view(dt.name, dt.size, {rows, width}, copy)))
        << "case " << c;

    // A 3-d slice that also steps over every other column.
    const int64_t depth = random_int(&rng, 1, 3);
    const int64_t half = (row_stride + 1) / 2;
    const std::string big = random_bytes(&rng, depth * rows * row_stride * dt.size);
    recycle::TensorView stepped = dense_view(dt.name, dt.size, {depth, rows, half}, big);
    stepped.strides = {rows * row_stride, row_stride, 2};
    const std::string stepped_copy = materialize(stepped);
    EXPECT_EQ(tensor_key(stepped),
              tensor_key(dense_view(dt.name, dt.size, stepped.shape, stepped_copy)))
        << "case " << c;
  }
}

TEST(Xxh3Keyer, BroadcastEqualsMaterialisedCopy) {
  std::mt19937 rng(4);
  for (int c = 0; c < 300; ++c) {
    const DtypeInfo dt = kDtypes[c % 4];
    const int64_t rows = random_int(&rng, 2, 8);
    const int64_t cols = random_int(&rng, 1, 8);
    // One row repeated: stride 0 over the rows.
    const std::string row = random_bytes(&rng, cols * dt.size);
    recycle::TensorView view = dense_view(dt.name, dt.size, {rows, cols}, row);
    view.strides = {0, 1};
    ASSERT_FALSE(view.is_contiguous());
    std::string copy;
    for (int64_t i = 0; i < rows; ++i) copy += row;
    EXPECT_EQ(tensor_key(view), tensor_key(dense_view(dt.name, dt.size, {rows, cols}, copy)))
        << "case " << c;

    // One column repeated: stride 0 innermost.
    const std::string column = random_bytes(&rng, rows * dt.size);
    recycle::TensorView inner = dense_view(dt.name, dt.size, {rows, cols + 1}, column);
    inner.strides = {1, 0};
    std::string inner_copy;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j <= cols; ++j) inner_copy.append(column, i * dt.size, dt.size);
    }
    EXPECT_EQ(tensor_key(inner),
              tensor_key(dense_view(dt.name, dt.size, {rows, cols + 1}, inner_copy)))
        << "case " << c;

    // A single element broadcast to a whole 3-d tensor.
    const std::string one = random_bytes(&rng, dt.size);
    recycle::TensorView all = dense_view(dt.name, dt.size, {2, rows, cols}, one);
    all.strides = {0, 0, 0};
    std::string all_copy;
    for (int64_t i = 0; i < 2 * rows * cols; ++i) all_copy += one;
    EXPECT_EQ(tensor_key(all), tensor_key(dense_view(dt.name, dt.size, {2, rows, cols}, all_copy)))
        << "case " << c;
  }
}

TEST(Xxh3Keyer, FlippingAnyByteChangesTheKey) {
  std::mt19937 rng(5);
  for (int c = 0; c < 200; ++c) {
    const DtypeInfo dt = kDtypes[c % 4];
    const std::vector<int64_t> shape = {random_int(&rng, 1, 4), random_int(&rng, 1, 4)};
    std::string bytes = random_bytes(&rng, product(shape) * dt.size);
    const recycle::TensorView t = dense_view(dt.name, dt.size, shape, bytes);
    const recycle::Key original = tensor_key(t);
    // Seen through a transposed view the flips must show too.
    const std::string original_bytes = materialize(t);
    std::set<recycle::Key> keys = {original};
    for (size_t b = 0; b < bytes.size(); ++b) {
      const char mask = static_cast<char>(1u << (rng() % 8));
      bytes[b] ^= mask;
      const recycle::Key changed = tensor_key(t);
      EXPECT_NE(changed, original) << "case " << c << " byte " << b;
      keys.insert(changed);
      recycle::TensorView tr = t;
      tr.shape = {shape[1], shape[0]};
      tr.strides = {1, shape[1]};
      recycle::TensorView tr_before = tr;
      tr_before.data = original_bytes.data();
      EXPECT_NE(tensor_key(tr), tensor_key(tr_before)) << "case " << c << " byte " << b;
      bytes[b] ^= mask;
    }
    EXPECT_EQ(keys.size(), bytes.size() + 1) << "every flip gives its own key, case " << c;
    EXPECT_EQ(tensor_key(t), original) << "flipping back restores the key";
  }
}

TEST(Xxh3Keyer, ShapeIsPartOfTheKey) {
  const std::vector<std::vector<int64_t>> shapes = {{12},   {1, 12}, {12, 1}, {2, 6},
                                                    {6, 2}, {3, 4},  {4, 3},  {2, 2, 3}};
  std::mt19937 rng(6);
  for (int c = 0; c < 200; ++c) {
    const DtypeInfo dt = kDtypes[c % 4];
    const std::string bytes = random_bytes(&rng, 12 * dt.size);
    std::set<recycle::Key> keys;
    for (const auto& shape : shapes)
      keys.insert(tensor_key(dense_view(dt.name, dt.size, shape, bytes)));
    EXPECT_EQ(keys.size(), shapes.size()) << "case " << c;
  }
}

TEST(Xxh3Keyer, DtypeNameIsPartOfTheKey) {
  std::mt19937 rng(7);
  for (int c = 0; c < 200; ++c) {
    const std::string bytes = random_bytes(&rng, 16);
    std::set<recycle::Key> keys;
    keys.insert(tensor_key(dense_view("uint8", 1, {16}, bytes)));
    keys.insert(tensor_key(dense_view("int8", 1, {16}, bytes)));
    keys.insert(tensor_key(dense_view("bool", 1, {16}, bytes)));
    keys.insert(tensor_key(dense_view("float32", 4, {4}, bytes)));
    keys.insert(tensor_key(dense_view("int32", 4, {4}, bytes)));
    keys.insert(tensor_key(dense_view("uint32", 4, {4}, bytes)));
    keys.insert(tensor_key(dense_view("float16", 2, {8}, bytes)));
    keys.insert(tensor_key(dense_view("bfloat16", 2, {8}, bytes)));
    EXPECT_EQ(keys.size(), 8u) << "case " << c;
  }
}

TEST(Xxh3Keyer, EmptyAndZeroDimTensors) {
  // 0 elements: the data pointer is never read, and the shape and dtype still count.
  std::set<recycle::Key> keys;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{0}, {0, 3}, {3, 0}, {0, 0}, {2, 0, 4}}) {
    recycle::TensorView t = dense_view("float32", 4, shape, "");
    t.data = nullptr;
    keys.insert(tensor_key(t));
    recycle::TensorView odd = t;
    odd.strides.assign(shape.size(), 0);  // strides do not matter without elements
    EXPECT_EQ(tensor_key(odd), tensor_key(t));
  }
  recycle::TensorView empty_u8 = dense_view("uint8", 1, {0}, "");
  empty_u8.data = nullptr;
  keys.insert(tensor_key(empty_u8));
  EXPECT_EQ(keys.size(), 6u);
  const std::string layout = le64(5) + "uint8" + le64(1) + le64(0) + le64(0);
  EXPECT_EQ(tensor_key(empty_u8), recycle::hash128(layout, 0));

  // 0-d: one element, no dimensions.
  const std::string a = "\x2a", b = "\x2b";
  const recycle::Key scalar_a = tensor_key(dense_view("uint8", 1, {}, a));
  EXPECT_EQ(scalar_a, tensor_key(dense_view("uint8", 1, {}, std::string("\x2a"))));
  EXPECT_NE(scalar_a, tensor_key(dense_view("uint8", 1, {}, b)));
  EXPECT_NE(scalar_a, tensor_key(dense_view("uint8", 1, {1}, a)));
  EXPECT_NE(scalar_a, tensor_key(empty_u8));
  EXPECT_EQ(scalar_a, recycle::hash128(le64(5) + "uint8" + le64(0) + le64(1) + a, 0));
}

TEST(Xxh3Keyer, RejectsMissingTensorAndMismatchedStrides) {
  recycle::KeyInput in;
  in.text = "abc";
  in.has_text = true;
  in.id = "x";
  in.has_id = true;
  EXPECT_THROW(recycle::Xxh3Keyer().key(in), std::invalid_argument);
  const std::string bytes = "abcdef";
  recycle::TensorView t = dense_view("uint8", 1, {2, 3}, bytes);
  t.strides = {3};
  EXPECT_THROW(tensor_key(t), std::invalid_argument);
}

TEST(Xxh3Keyer, KeyIsSafeFromManyThreads) {
  std::mt19937 rng(8);
  std::vector<std::string> buffers;
  for (int i = 0; i < 64; ++i) buffers.push_back(random_bytes(&rng, 4 * 6 * 5));
  std::vector<recycle::Key> serial;
  auto view_of = [&](size_t i) {
    recycle::TensorView v = dense_view("float32", 4, {5, 6}, buffers[i]);
    v.strides = {1, 5};  // transposed, so the gather path runs
    return v;
  };
  for (size_t i = 0; i < buffers.size(); ++i) serial.push_back(tensor_key(view_of(i)));
  const recycle::Xxh3Keyer keyer;
  std::vector<std::vector<recycle::Key>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        got[t].clear();
        for (size_t i = 0; i < buffers.size(); ++i) {
          const recycle::TensorView v = view_of(i);
          recycle::KeyInput in;
          in.tensor = &v;
          got[t].push_back(keyer.key(in));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& keys : got) EXPECT_EQ(keys, serial);
}

// ---------------------------------------------------------------------------------------------
// TextKeyer

TEST(TextKeyer, ExactBytesByDefault) {
  const recycle::TextKeyer keyer;
  EXPECT_EQ(keyer.spec(), "text");
  EXPECT_EQ(text_key(keyer, "a b"), text_key(keyer, "a b"));
  EXPECT_NE(text_key(keyer, "a  b\t"), text_key(keyer, "a b"));
  EXPECT_NE(text_key(keyer, "Hello"), text_key(keyer, "hello"));
  EXPECT_NE(text_key(keyer, " a"), text_key(keyer, "a"));
  EXPECT_NE(text_key(keyer, ""), text_key(keyer, " "));
  EXPECT_EQ(keyer.normalized("  A\tB  "), "  A\tB  ");
  // Embedded NUL bytes count.
  EXPECT_NE(text_key(keyer, std::string("a\0b", 3)), text_key(keyer, std::string("a\0c", 3)));
  EXPECT_NE(text_key(keyer, std::string("a\0", 2)), text_key(keyer, "a"));
}

TEST(TextKeyer, NormalizeSpace) {
  const recycle::TextKeyer keyer({/*normalize_space=*/true, /*lower_case=*/false});
  EXPECT_EQ(keyer.spec(), "text:space");
  EXPECT_EQ(text_key(keyer, "a  b\t"), text_key(keyer, "a b"));
  EXPECT_EQ(text_key(keyer, " \n a\r\n\f\vb  c "), text_key(keyer, "a b c"));
  EXPECT_NE(text_key(keyer, "ab"), text_key(keyer, "a b"));
  EXPECT_NE(text_key(keyer, "A b"), text_key(keyer, "a b"));
  EXPECT_EQ(keyer.normalized("  a \t\n b  "), "a b");
  EXPECT_EQ(keyer.normalized("x"), "x");
  EXPECT_EQ(keyer.normalized(" \t\n"), "");
  EXPECT_EQ(keyer.normalized("Tab\tSep"), "Tab Sep");
  EXPECT_EQ(text_key(keyer, "   "), text_key(keyer, ""));
}

TEST(TextKeyer, LowerCase) {
  const recycle::TextKeyer keyer({/*normalize_space=*/false, /*lower_case=*/true});
  EXPECT_EQ(keyer.spec(), "text:lower");
  EXPECT_EQ(text_key(keyer, "Hello WORLD"), text_key(keyer, "hello world"));
  EXPECT_NE(text_key(keyer, "a  b\t"), text_key(keyer, "a b"));
  EXPECT_EQ(keyer.normalized("AbC-XyZ 09@[`{"), "abc-xyz 09@[`{");
  // Non-ASCII bytes are kept as they are ("É" is C3 89 in UTF-8).
  EXPECT_EQ(keyer.normalized("\xC3\x89T\xC3\xA9"), "\xC3\x89t\xC3\xA9");
  EXPECT_NE(text_key(keyer, "\xC3\x89"), text_key(keyer, "\xC3\xA9"));
}

TEST(TextKeyer, SpaceAndLower) {
  const recycle::TextKeyer keyer({/*normalize_space=*/true, /*lower_case=*/true});
  EXPECT_EQ(keyer.spec(), "text:space,lower");
  EXPECT_EQ(text_key(keyer, " The  Cat\t"), text_key(keyer, "the cat"));
  EXPECT_EQ(keyer.normalized(" The  Cat\t"), "the cat");
  EXPECT_NE(text_key(keyer, "the cat"), text_key(keyer, "the dog"));
  // The key hashes exactly the normalized text; a plain text keyer of it agrees.
  EXPECT_EQ(text_key(keyer, " The  Cat\t"), text_key(recycle::TextKeyer(), "the cat"));
}

TEST(TextKeyer, ManyRandomStringsGiveDistinctKeys) {
  std::mt19937 rng(9);
  const recycle::TextKeyer keyer;
  std::set<std::string> texts;
  std::set<recycle::Key> keys;
  for (int i = 0; i < 500; ++i) {
    const std::string s = random_bytes(&rng, static_cast<size_t>(random_int(&rng, 0, 12)));
    if (texts.insert(s).second) keys.insert(text_key(keyer, s));
  }
  EXPECT_EQ(keys.size(), texts.size());
}

TEST(TextKeyer, NeedsText) {
  recycle::KeyInput in;
  in.id = "abc";
  in.has_id = true;
  const std::string bytes = "abc";
  const recycle::TensorView t = dense_view("uint8", 1, {3}, bytes);
  in.tensor = &t;
  in.text = "abc";  // present but not flagged
  EXPECT_THROW(recycle::TextKeyer().key(in), std::invalid_argument);
  in.has_text = true;
  EXPECT_EQ(recycle::TextKeyer().key(in), text_key(recycle::TextKeyer(), "abc"));
}

// ---------------------------------------------------------------------------------------------
// IdKeyer

TEST(IdKeyer, KeysFollowTheId) {
  EXPECT_EQ(recycle::IdKeyer().spec(), "id");
  EXPECT_EQ(id_key("sample-1"), id_key("sample-1"));
  EXPECT_NE(id_key("sample-1"), id_key("sample-2"));
  EXPECT_NE(id_key(""), id_key(" "));

  // The id alone decides: other content in the input is ignored.
  recycle::KeyInput in;
  in.id = "sample-1";
  in.has_id = true;
  in.text = "whatever";
  in.has_text = true;
  EXPECT_EQ(recycle::IdKeyer().key(in), id_key("sample-1"));
}

TEST(IdKeyer, TextAndIdKeysDifferForTheSameString) {
  const recycle::TextKeyer text;
  for (const std::string s : {"", "a", "sample-1", "the quick brown fox"}) {
    const recycle::Key t = text_key(text, s);
    const recycle::Key i = id_key(s);
    EXPECT_NE(t, i) << s;
    EXPECT_NE(t, recycle::hash128(s)) << s;
    EXPECT_NE(i, recycle::hash128(s)) << s;
    // Nor as a uint8 tensor of the same bytes.
    const recycle::TensorView v = dense_view("uint8", 1, {static_cast<int64_t>(s.size())}, s);
    EXPECT_NE(tensor_key(v), t) << s;
    EXPECT_NE(tensor_key(v), i) << s;
  }
}

TEST(IdKeyer, NeedsId) {
  recycle::KeyInput in;
  in.text = "abc";
  in.has_text = true;
  in.id = "abc";  // present but not flagged
  EXPECT_THROW(recycle::IdKeyer().key(in), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// KeyerRegistry

TEST(KeyerRegistry, KeyerNames) {
  EXPECT_EQ(recycle::keyer_names(), (std::vector<std::string>{"id", "text", "xxh3"}));
}

TEST(KeyerRegistry, EverySpecRoundTrips) {
  const std::vector<std::pair<std::string, std::string>> specs = {
      {"xxh3", "xxh3"},
      {"id", "id"},
      {"text", "text"},
      {"text:space", "text:space"},
      {"text:lower", "text:lower"},
      {"text:space,lower", "text:space,lower"},
      {"text:lower,space", "text:space,lower"},
  };
  for (const auto& [spec, canonical] : specs) {
    const std::unique_ptr<recycle::Keyer> keyer = recycle::make_keyer(spec);
    ASSERT_NE(keyer, nullptr) << spec;
    EXPECT_EQ(keyer->spec(), canonical) << spec;
    EXPECT_EQ(recycle::make_keyer(canonical)->spec(), canonical) << spec;
  }
  // Every registered name builds a keyer whose spec round-trips.
  for (const std::string& name : recycle::keyer_names()) {
    EXPECT_EQ(recycle::make_keyer(name)->spec(), name);
  }
}

TEST(KeyerRegistry, BuiltKeyersBehaveLikeTheirClasses) {
  const std::string bytes = "abcdef";
  const recycle::TensorView t = dense_view("uint8", 1, {2, 3}, bytes);
  recycle::KeyInput in;
  in.tensor = &t;
  in.text = " Mixed  Case ";
  in.has_text = true;
  in.id = "id-7";
  in.has_id = true;
  EXPECT_EQ(recycle::make_keyer("xxh3")->key(in), recycle::Xxh3Keyer().key(in));
  EXPECT_EQ(recycle::make_keyer("id")->key(in), recycle::IdKeyer().key(in));
  EXPECT_EQ(recycle::make_keyer("text")->key(in), recycle::TextKeyer().key(in));
  EXPECT_EQ(recycle::make_keyer("text:space")->key(in), recycle::TextKeyer({true, false}).key(in));
  EXPECT_EQ(recycle::make_keyer("text:lower")->key(in), recycle::TextKeyer({false, true}).key(in));
  EXPECT_EQ(recycle::make_keyer("text:lower,space")->key(in),
            recycle::TextKeyer({true, true}).key(in));
  EXPECT_EQ(recycle::make_keyer("text:lower,space")->key(in),
            text_key(recycle::TextKeyer(), "mixed case"));
  // The four text variants really differ on this input.
  std::set<recycle::Key> keys;
  for (const char* spec : {"text", "text:space", "text:lower", "text:space,lower"}) {
    keys.insert(recycle::make_keyer(spec)->key(in));
  }
  EXPECT_EQ(keys.size(), 4u);
}

TEST(KeyerRegistry, UnknownNamesThrowNamingTheKnownKeyers) {
  for (const std::string spec : {"", "xxh4", "md5", "XXH3", "Text", "text2", ":space", "ids"}) {
    const std::string msg = invalid_argument_of([&] { recycle::make_keyer(spec); });
    EXPECT_TRUE(contains(msg, "'" + spec + "'")) << spec;
    EXPECT_TRUE(contains(msg, "xxh3")) << spec;
    EXPECT_TRUE(contains(msg, "text")) << spec;
    EXPECT_TRUE(contains(msg, "id")) << spec;
    EXPECT_TRUE(contains(msg, "known: id, text, xxh3")) << spec;
  }
}

TEST(KeyerRegistry, UnknownOptionsThrow) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"text:upper", "upper"},
      {"text:space,upper", "upper"},
      {"text:Space", "Space"},
      {"text:,space", "''"},
      {"xxh3:fast", "fast"},
      {"id:x", "x"},
      {"text:space:lower", "space:lower"},
  };
  for (const auto& [spec, bad] : cases) {
    const std::string msg = invalid_argument_of([&] { recycle::make_keyer(spec); });
    EXPECT_NE(msg, "<no exception>") << spec;
    EXPECT_TRUE(contains(msg, bad)) << spec;
  }
}

TEST(KeyerRegistry, KeyerAskedForInputItLacksThrows) {
  const std::string bytes = "abc";
  const recycle::TensorView t = dense_view("uint8", 1, {3}, bytes);
  recycle::KeyInput tensor_only;
  tensor_only.tensor = &t;
  recycle::KeyInput text_only;
  text_only.text = "abc";
  text_only.has_text = true;
  recycle::KeyInput id_only;
  id_only.id = "abc";
  id_only.has_id = true;

  EXPECT_NO_THROW(recycle::make_keyer("xxh3")->key(tensor_only));
  EXPECT_THROW(recycle::make_keyer("xxh3")->key(text_only), std::invalid_argument);
  EXPECT_THROW(recycle::make_keyer("xxh3")->key(id_only), std::invalid_argument);
  EXPECT_NO_THROW(recycle::make_keyer("text:space,lower")->key(text_only));
  EXPECT_THROW(recycle::make_keyer("text")->key(tensor_only), std::invalid_argument);
  EXPECT_THROW(recycle::make_keyer("text:space,lower")->key(id_only), std::invalid_argument);
  EXPECT_NO_THROW(recycle::make_keyer("id")->key(id_only));
  EXPECT_THROW(recycle::make_keyer("id")->key(tensor_only), std::invalid_argument);
  EXPECT_THROW(recycle::make_keyer("id")->key(text_only), std::invalid_argument);
  const std::string msg = invalid_argument_of([&] { recycle::make_keyer("xxh3")->key(text_only); });
  EXPECT_TRUE(contains(msg, "xxh3"));
}

TEST(KeyerRegistry, BadOptionsNameTheSpecAndTheKnownKeyers) {
  for (const std::string spec : {"text:upper", "xxh3:fast", "id:x"}) {
    const std::string msg = invalid_argument_of([&] { recycle::make_keyer(spec); });
    EXPECT_TRUE(contains(msg, "'" + spec + "'")) << msg;
    EXPECT_TRUE(contains(msg, "known: id, text, xxh3")) << msg;
  }
}

// Keyers registered from outside the library are made by spec like the built-in ones.
TEST(KeyerRegistry, RegistersAKeyerFromOutside) {
  recycle::register_keyer("test-constant", [](const std::string& options) {
    if (!options.empty()) throw std::invalid_argument("takes no options");
    struct Constant final : recycle::Keyer {
      std::string spec() const override { return "test-constant"; }
      recycle::Key key(const recycle::KeyInput&) const override { return {1, 2}; }
    };
    return std::unique_ptr<recycle::Keyer>(new Constant());
  });
  const auto names = recycle::keyer_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "test-constant"), names.end());
  EXPECT_EQ(recycle::make_keyer("test-constant")->spec(), "test-constant");
  EXPECT_THROW(recycle::make_keyer("test-constant:x"), std::invalid_argument);
  EXPECT_THROW(recycle::register_keyer("test-constant", [](const std::string&) { return nullptr; }),
               std::invalid_argument);
  EXPECT_THROW(recycle::register_keyer("xxh3", [](const std::string&) { return nullptr; }),
               std::invalid_argument);
  EXPECT_THROW(recycle::register_keyer("a:b", [](const std::string&) { return nullptr; }),
               std::invalid_argument);
}
