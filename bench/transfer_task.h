// The transfer task's command-line pieces (the data of pretraining and of fine-tuning, the
// optimiser of the text task) and the pretrained encoder every benchmark starts from.
// No LibTorch: the work is done by recycle-train, run as a child process. Not thread safe.
#pragma once

#include <string>
#include <vector>

#include "bench/common_options.h"

namespace recycle::bench {

// recycle-train's flags for the data (and, for text, the model) the encoder is pretrained on.
std::vector<std::string> pretrain_data(const CommonOptions& o);
// The fine-tuning task's data flags; the caller adds --split where it needs one.
std::vector<std::string> finetune_data(const CommonOptions& o);
// "classes 0-4" or the 2002 mails: what pretraining learns, for the notes.
std::string pretrain_task(const CommonOptions& o);
// The optimiser: recycle-train's defaults (SGD, lr 0.05) for the image task. The transformer
// stays near chance with SGD at that rate, so the text task uses AdamW: lr 0.001 (batch 128)
// to pretrain, lr 0.003 for every fine-tuning row alike (docs/text-task.md).
std::vector<std::string> optimizer_flags(const CommonOptions& o, bool pretraining);

// With --task text: the error when o->text_dir lacks pretrain/ and finetune/ TSV files ("" when
// they are there, and then o->text_dir is made absolute, as the children run elsewhere).
std::string find_text_data(CommonOptions* o);

// When o->weights is empty: sets it to work_dir()/encoder.pt and, unless that file exists
// already, pretrains it there (recycle-train --recycle 0 --save-model) and returns its test
// accuracy on the pretraining task. Returns 0 when nothing was trained. Throws
// std::runtime_error with one line when the child fails.
double ensure_encoder(CommonOptions* o);

}  // namespace recycle::bench
