// Tests for cache/record_layout.h: checking a layout, checking parsed records against it
// (variable dimensions take any size), and the strings messages use.
#include "cache/record_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/record.h"
#include "tests/test_util.h"

namespace {

using recycle::Codec;
using recycle::Dtype;
using recycle::RecordLayout;
using recycle::RecordTensor;

// hidden states float fp16 [?, 4], the token count int64 [1], a padding mask bool [?].
RecordLayout text_layout() {
  return {{"hidden", Dtype::kFloat32, {-1, 4}, recycle::Codec::kFp16},
          {"lengths", Dtype::kInt64, {1}},
          {"mask", Dtype::kBool, {-1}}};
}

// A parsed text record of `seq` tokens; `storage` keeps its bytes alive.
std::vector<RecordTensor> text_record(int64_t seq, std::string* storage) {
  const std::vector<float> hidden(static_cast<size_t>(seq) * 4, 0.5f);
  const int64_t length[] = {seq};
  std::unique_ptr<bool[]> mask(new bool[static_cast<size_t>(seq)]);
  std::fill(mask.get(), mask.get() + seq, true);
  const bool* mask_data = mask.get();
  *storage =
      recycle::encode_record({recycle::TypedArrayRef::floats(hidden.data(), {seq, 4}, Codec::kFp16),
                              recycle::TypedArrayRef::exact(length, {1}),
                              recycle::TypedArrayRef::exact(mask_data, {seq})});
  std::vector<RecordTensor> tensors;
  EXPECT_OK(recycle::parse_record(*storage, &tensors));
  return tensors;
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

}  // namespace

TEST(RecordLayout, StringsShowVariableDimensions) {
  EXPECT_EQ(recycle::shape_string({64, 7, 7}), "64x7x7");
  EXPECT_EQ(recycle::shape_string({-1, 768}), "?x768");
  EXPECT_EQ(recycle::shape_string({}), "()");
  EXPECT_EQ(recycle::layout_string(text_layout()),
            "hidden float32 ?x4 fp16 + lengths int64 1 raw + mask bool ? raw");
  EXPECT_EQ(recycle::layout_string({}), "no tensors");
}

TEST(RecordLayout, FromShapesIsTheOldSingleFloatTensor) {
  const RecordLayout l = recycle::layout_from_shapes({{64, 7, 7}}, recycle::Codec::kFp16);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0], (recycle::TensorLayout{
                      "activation", Dtype::kFloat32, {64, 7, 7}, recycle::Codec::kFp16}));
  const RecordLayout two = recycle::layout_from_shapes({{3}, {1}}, recycle::Codec::kBf16);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].name, "tensor1");
  EXPECT_EQ(recycle::layout_shapes(two), (std::vector<std::vector<int64_t>>{{3}, {1}}));
  EXPECT_TRUE(recycle::layout_from_shapes({}, recycle::Codec::kFp16).empty());
}

TEST(RecordLayout, CheckLayoutNamesWhatIsWrong) {
  EXPECT_OK(recycle::check_layout(text_layout()));
  EXPECT_OK(recycle::check_layout({}));
  struct Case {
    void (*change)(RecordLayout*);
    const char* says;
  };
  const Case cases[] = {
      {[](RecordLayout* l) { (*l)[1].name = ""; }, "no name"},
      {[](RecordLayout* l) { (*l)[2].name = "hidden"; }, "name repeated"},
      {[](RecordLayout* l) { (*l)[0].shape = std::vector<int64_t>(9, 1); }, "rank over 8"},
      {[](RecordLayout* l) {
         (*l)[0].shape = {0, 4};
       },
       "dimension 0"},
      {[](RecordLayout* l) {
         (*l)[0].shape = {-2, 4};
       },
       "dimension -2"},
      {[](RecordLayout* l) { (*l)[0].shape = {int64_t{1} << 31}; }, "dimension 2147483648"},
  };
  for (const Case& c : cases) {
    RecordLayout l = text_layout();
    c.change(&l);
    const recycle::Status st = recycle::check_layout(l);
    EXPECT_TRUE(st.is_invalid_argument()) << c.says << ": " << st.to_string();
    EXPECT_TRUE(contains(st.message(), c.says)) << st.message();
  }
  EXPECT_FALSE(
      recycle::check_layout(recycle::layout_from_shapes(std::vector<std::vector<int64_t>>(256, {1}),
                                                        recycle::Codec::kFp32))
          .ok());
}

TEST(RecordLayout, VariableDimensionsTakeAnySize) {
  for (int64_t seq : {1, 3, 17}) {
    std::string bytes;
    const std::vector<RecordTensor> tensors = text_record(seq, &bytes);
    SCOPED_TRACE(seq);
    EXPECT_OK(recycle::check_record_layout(tensors, text_layout()));
  }
}

TEST(RecordLayout, RecordsThatDoNotFitAreCorruption) {
  std::string bytes;
  const std::vector<RecordTensor> good = text_record(5, &bytes);
  ASSERT_OK(recycle::check_record_layout(good, text_layout()));
  struct Case {
    void (*change)(RecordLayout*);
    const char* says;
  };
  const Case cases[] = {
      {[](RecordLayout* l) { l->pop_back(); }, "record holds 3 tensors, the layout has 2"},
      {[](RecordLayout* l) { (*l)[1].dtype = Dtype::kInt32; },
       "record tensor 1 (lengths) is int64, the layout says int32"},
      {[](RecordLayout* l) {
         (*l)[0].shape = {-1, 8};
       },
       "record tensor 0 (hidden) has shape 5x4, the layout says ?x8"},
      {[](RecordLayout* l) {
         (*l)[0].shape = {5, 4, -1};
       },
       "has shape 5x4, the layout says 5x4x?"},
      {[](RecordLayout* l) { (*l)[2].shape = {4}; }, "record tensor 2 (mask) has shape 5"},
      {[](RecordLayout* l) { (*l)[0].codec = recycle::Codec::kBf16; },
       "record tensor 0 (hidden) is stored as fp16, the layout says bf16"},
  };
  for (const Case& c : cases) {
    RecordLayout l = text_layout();
    c.change(&l);
    const recycle::Status st = recycle::check_record_layout(good, l);
    EXPECT_TRUE(st.is_corruption()) << c.says << ": " << st.to_string();
    EXPECT_TRUE(contains(st.message(), c.says)) << st.message();
  }
  // A fixed dimension must match exactly.
  RecordLayout fixed = text_layout();
  fixed[0].shape = {5, 4};
  EXPECT_OK(recycle::check_record_layout(good, fixed));
  fixed[0].shape = {6, 4};
  EXPECT_TRUE(recycle::check_record_layout(good, fixed).is_corruption());
}
