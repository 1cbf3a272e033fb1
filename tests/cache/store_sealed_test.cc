// The store's writes are out of reach of any code but the writers of cache/split_writer.h (and
// tests, through StoreTestAccess): ActivationStore::Batch's mutators, ActivationStore::write
// and write_unlogged, and a StagedWrite's batch are private. Checked at compile time with the
// detection idiom (access is checked during substitution, so a private member is as absent as
// a missing one), each beside a public member of the same shape that the same detector finds:
// a detector that found nothing would pass for the wrong reason.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cache/activation_store.h"
#include "cache/split_writer.h"
#include "recycle/key.h"

namespace {

using recycle::ActivationStore;
using recycle::Key;
using recycle::StagedWrite;

template <typename T, typename = void>
struct CanPutRecord : std::false_type {};
template <typename T>
struct CanPutRecord<T, std::void_t<decltype(std::declval<T&>().put_record(
                           std::declval<const Key&>(), std::string_view()))>> : std::true_type {};

template <typename T, typename = void>
struct CanDeleteRecord : std::false_type {};
template <typename T>
struct CanDeleteRecord<
    T, std::void_t<decltype(std::declval<T&>().delete_record(std::declval<const Key&>()))>>
    : std::true_type {};

template <typename T, typename = void>
struct CanPutBlob : std::false_type {};
template <typename T>
struct CanPutBlob<
    T, std::void_t<decltype(std::declval<T&>().put_blob(std::string(), std::string_view()))>>
    : std::true_type {};

template <typename T, typename = void>
struct CanPutManifest : std::false_type {};
template <typename T>
struct CanPutManifest<T, std::void_t<decltype(std::declval<T&>().put_manifest(
                             std::declval<const recycle::Manifest&>()))>> : std::true_type {};

template <typename S, typename = void>
struct CanWrite : std::false_type {};
template <typename S>
struct CanWrite<
    S, std::void_t<decltype(std::declval<S&>().write(std::declval<ActivationStore::Batch*>()))>>
    : std::true_type {};

template <typename S, typename = void>
struct CanWriteUnlogged : std::false_type {};
template <typename S>
struct CanWriteUnlogged<S, std::void_t<decltype(std::declval<S&>().write_unlogged(
                               std::declval<ActivationStore::Batch*>()))>> : std::true_type {};

template <typename W, typename = void>
struct HasBatch : std::false_type {};
template <typename W>
struct HasBatch<W, std::void_t<decltype(std::declval<W&>().batch_)>> : std::true_type {};
template <typename W, typename = void>
struct HasSplit : std::false_type {};
template <typename W>
struct HasSplit<W, std::void_t<decltype(std::declval<W&>().split)>> : std::true_type {};

// Public look-alikes: what the detectors must find.
struct OpenBatch {
  void put_record(const Key&, std::string_view) {}
  void delete_record(const Key&) {}
  void put_blob(const std::string&, std::string_view) {}
  void put_manifest(const recycle::Manifest&) {}
};
struct OpenStore {
  void write(ActivationStore::Batch*) {}
  void write_unlogged(ActivationStore::Batch*) {}
};
struct OpenStaged {
  std::unique_ptr<ActivationStore::Batch> batch_;
};

TEST(StoreSealed, TheDetectorsFindPublicMembers) {
  static_assert(CanPutRecord<OpenBatch>::value);
  static_assert(CanDeleteRecord<OpenBatch>::value);
  static_assert(CanPutBlob<OpenBatch>::value);
  static_assert(CanPutManifest<OpenBatch>::value);
  static_assert(CanWrite<OpenStore>::value);
  static_assert(CanWriteUnlogged<OpenStore>::value);
  static_assert(HasBatch<OpenStaged>::value);
  static_assert(HasSplit<StagedWrite>::value);      // a public field of the sealed type itself
  static_assert(CanPutRecord<StagedWrite>::value);  // the funnel's own, public
  SUCCEED();
}

TEST(StoreSealed, TheStoresWritesArePrivateToItsWriters) {
  static_assert(!CanPutRecord<ActivationStore::Batch>::value);
  static_assert(!CanDeleteRecord<ActivationStore::Batch>::value);
  static_assert(!CanPutBlob<ActivationStore::Batch>::value);
  static_assert(!CanPutManifest<ActivationStore::Batch>::value);
  static_assert(!CanWrite<ActivationStore>::value);
  static_assert(!CanWriteUnlogged<ActivationStore>::value);
  static_assert(!HasBatch<StagedWrite>::value);
  SUCCEED();
}

}  // namespace
