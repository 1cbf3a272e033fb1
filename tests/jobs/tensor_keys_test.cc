// Keys of a program's samples (engine/jobs/tensor_keys.h): named tensors and texts. Properties:
// equal content gives equal keys; a change of a name, a dtype, a shape or a byte gives another.
#include "engine/jobs/tensor_keys.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "recycle/errors.h"
#include "recycle/keyer.h"

namespace {

using Named = std::map<std::string, at::Tensor>;

recycle::Key key_of(const Named& sample, const std::string& spec = "xxh3", int64_t id = 0) {
  std::vector<recycle::Key> keys;
  recycle::key_named(*recycle::make_keyer(spec), {sample}, id, &keys);
  return keys.at(0);
}

TEST(TensorKeys, NamedTensorsKeyByNameDtypeShapeAndBytes) {
  const Named one = {{"input_ids", torch::tensor({101, 7, 8, 102})},
                     {"attention_mask", torch::ones({4}, torch::kInt64)}};
  // Equal content, another tensor object or device layout: the same key.
  Named copy;
  for (const auto& [name, t] : one) copy[name] = t.clone();
  EXPECT_EQ(key_of(one), key_of(copy));
  const Named strided = {
      {"input_ids", torch::tensor({101, 0, 7, 0, 8, 0, 102, 0}).slice(0, 0, 8, 2)},
      {"attention_mask", torch::ones({4}, torch::kInt64)}};
  EXPECT_EQ(key_of(one), key_of(strided));
  // Any change gives another key: a byte, a shape, a dtype, a name, a tensor more.
  std::vector<Named> others;
  Named byte = copy;
  byte["input_ids"] = torch::tensor({101, 7, 9, 102});
  others.push_back(byte);
  Named shape = copy;
  shape["input_ids"] = torch::tensor({101, 7, 8, 102}).reshape({2, 2});
  others.push_back(shape);
  Named dtype = copy;
  dtype["input_ids"] = torch::tensor({101, 7, 8, 102}, torch::kInt32);
  others.push_back(dtype);
  Named name = {{"ids", one.at("input_ids")}, {"attention_mask", one.at("attention_mask")}};
  others.push_back(name);
  Named more = copy;
  more["token_type_ids"] = torch::zeros({4}, torch::kInt64);
  others.push_back(more);
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_NE(key_of(others[i]), key_of(one)) << i;
    for (size_t j = 0; j < i; ++j) EXPECT_NE(key_of(others[i]), key_of(others[j])) << i << j;
  }
  // By position with "id": the content does not matter.
  EXPECT_EQ(key_of(one, "id", 3), key_of(byte, "id", 3));
  EXPECT_NE(key_of(one, "id", 3), key_of(one, "id", 4));
}

TEST(TensorKeys, TextsKeyByTheirCharactersUnderTheKeyersSpec) {
  std::vector<recycle::Key> keys;
  recycle::key_texts(*recycle::make_keyer("text"), {"a mail", "a mail", "a  Mail"}, 0, &keys);
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_NE(keys[0], keys[2]);
  recycle::key_texts(*recycle::make_keyer("text:space,lower"), {"a mail", "a  Mail"}, 0, &keys);
  EXPECT_EQ(keys[0], keys[1]);  // the spec's normalisation
}

TEST(TensorKeys, AKeyerThatCannotKeyTheInputIsNamed) {
  std::vector<recycle::Key> keys;
  try {
    recycle::key_texts(*recycle::make_keyer("xxh3"), {"a mail"}, 0, &keys);
    FAIL() << "keyed a text with xxh3";
  } catch (const recycle::InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "keyer 'xxh3' does not key texts: use keyer=\"text\" (or \"id\")");
  }
  try {
    key_of({{"x", torch::ones({2})}}, "text");
    FAIL() << "keyed named tensors with text";
  } catch (const recycle::InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "keyer 'text' does not key named tensors: use keyer=\"tensor\" (xxh3) or \"id\"");
  }
}

}  // namespace
