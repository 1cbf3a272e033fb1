// The exceptions the library throws for a user to catch by kind. Every message is one line.
//   InvalidArgument     bad options or input (the tools exit 2); a std::invalid_argument
//   StaleCacheError     a cache whose identity (model, weights, split point, keyer, codec, ...)
//                       differs from what the run asked for; a std::runtime_error
//   CorruptRecordError  a stored record that does not decode; a std::runtime_error
// Code that catches std::invalid_argument or std::runtime_error catches these too.
#pragma once

#include <stdexcept>
#include <string>

namespace recycle {

class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class StaleCacheError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CorruptRecordError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace recycle
