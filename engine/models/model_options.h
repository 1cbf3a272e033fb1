// ModelOptions, which encoder to make or load, lives in include/recycle/options.h.
#pragma once

#include "recycle/options.h"
