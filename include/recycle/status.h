// Status: the result of an operation at the storage boundary. A miss (NotFound) is distinct
// from an I/O error and from corruption, so callers can tell "not cached yet" from "broken".
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "recycle/errors.h"

namespace recycle {

class Status {
 public:
  enum class Code { kOk, kNotFound, kCorruption, kIOError, kInvalidArgument, kMismatch };

  Status() = default;  // OK
  static Status not_found(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status io_error(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status invalid_argument(std::string msg) {
    return Status(Code::kInvalidArgument, std::move(msg));
  }
  // The cache exists but was made for another model, split point, keyer or codec.
  static Status mismatch(std::string msg) { return Status(Code::kMismatch, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  bool is_not_found() const { return code_ == Code::kNotFound; }
  bool is_corruption() const { return code_ == Code::kCorruption; }
  bool is_io_error() const { return code_ == Code::kIOError; }
  bool is_invalid_argument() const { return code_ == Code::kInvalidArgument; }
  bool is_mismatch() const { return code_ == Code::kMismatch; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // For callers that report errors by exception (engine/): unless OK, throws with
  // to_string(), keeping the kind: std::invalid_argument for an invalid argument (the tools
  // exit 2, as for a bad flag), CorruptRecordError (a std::runtime_error) for corruption,
  // std::runtime_error for everything else (exit 1).
  void throw_if_error() const {
    if (ok()) return;
    if (is_invalid_argument()) throw std::invalid_argument(to_string());
    if (is_corruption()) throw CorruptRecordError(to_string());
    throw std::runtime_error(to_string());
  }

  std::string to_string() const {
    switch (code_) {
      case Code::kOk: return "OK";
      case Code::kNotFound: return "not found: " + message_;
      case Code::kCorruption: return "corruption: " + message_;
      case Code::kIOError: return "I/O error: " + message_;
      case Code::kInvalidArgument: return "invalid argument: " + message_;
      case Code::kMismatch: return "mismatch: " + message_;
    }
    return message_;
  }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace recycle
