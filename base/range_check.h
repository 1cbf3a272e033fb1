// check_range: the one bounds check of a numeric option, for every validate() of the option
// structs (include/recycle/*.h; all defined in engine/options/): "--epochs must be in
// 1..100000, not 0", with the bounds named beside each struct (kMaxEpochs, ...). The command line
// declares no bounds of its own: the library's check is the only one, so a program and the
// tools refuse the same values with the same words.
#pragma once

#include <cstdint>
#include <sstream>

#include "recycle/errors.h"

namespace recycle {

// Throws InvalidArgument (a std::invalid_argument) unless least <= value <= most (a NaN fails).
template <typename T>
void check_range(const char* option, T value, T least, T most) {
  if (value >= least && value <= most) return;
  std::ostringstream line;
  line << option << " must be in " << least << ".." << most << ", not " << value;
  throw InvalidArgument(line.str());
}

// The same for a positive quantity with an upper bound: "--lr must be above 0 and at most 10,
// not 0" (a NaN or an infinity fails).
inline void check_positive_up_to(const char* option, double value, double most) {
  if (value > 0 && value <= most) return;
  std::ostringstream line;
  line << option << " must be above 0 and at most " << most << ", not " << value;
  throw InvalidArgument(line.str());
}

// The same for a bound on one side only, where no largest value makes sense: "--limit must be
// at least 0, not -1" (a NaN fails).
template <typename T>
void check_at_least(const char* option, T value, T least) {
  if (value >= least) return;
  std::ostringstream line;
  line << option << " must be at least " << least << ", not " << value;
  throw InvalidArgument(line.str());
}

}  // namespace recycle
