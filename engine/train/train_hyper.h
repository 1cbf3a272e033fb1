// TrainHyper, the hyper-parameters of a training run, lives in include/recycle/options.h.
#pragma once

#include "recycle/options.h"
