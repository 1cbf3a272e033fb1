// The training job behind recycle-train: TrainOptions (include/recycle/options.h), TrainReport and
// run_train (include/recycle/train.h). No LibTorch here.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/distributed/dist_options.h"
#include "engine/models/model_options.h"
#include "engine/train/freeze_schedule.h"
#include "engine/train/memory_budget.h"
#include "engine/train/train_hyper.h"
#include "recycle/options.h"
#include "recycle/train.h"
