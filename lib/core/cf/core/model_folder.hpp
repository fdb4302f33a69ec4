#pragma once
// The files a tool reads from a model folder (a Hugging Face checkpoint: docs/hf.md), in one
// place, so that the output checks (cf/core/app.hpp) protect exactly what the loader reads: an
// output written over a shard the index names under any file name ("weights.bin"), or a new
// model.safetensors.index.json / tokenizer.json put into a folder that had none (which changes
// what the folder loads as), destroys the model as surely as overwriting its weights (issue 29).
#include <string>
#include <vector>

namespace cf {

/// Whether `name` (a file name, no folder) is one a model or tokenizer folder is read by:
/// config.json, generation_config.json, tokenizer.json, tokenizer_config.json,
/// special_tokens_map.json, encoder.json, vocab.bpe, vocab.json, merges.txt, *.safetensors,
/// *.safetensors.index.json.
bool is_model_folder_file(const std::string& name);

/// Every path inside folder `dir` that a loader reads or probes for: the existing files of
/// is_model_folder_file, the names a loader looks for even when absent (config.json,
/// model.safetensors, model.safetensors.index.json, tokenizer.json: writing one of them changes
/// what the folder loads as), and every shard the index's weight_map names, whatever its file
/// name. An unreadable or malformed index contributes its own name only (the loader reports it).
/// Empty when `dir` is not a folder.
std::vector<std::string> model_folder_inputs(const std::string& dir);

/// Throws cf::InvalidArgument when `path` names a file inside a Hugging Face folder that a model
/// option should name as the folder itself (a *.safetensors file, model.safetensors.index.json or
/// config.json beside a config.json): "--checkpoint 'DIR/model.safetensors' is a file of the
/// Hugging Face folder 'DIR': give the folder, --checkpoint 'DIR'". `option` names the option.
void refuse_model_folder_member(const std::string& path, const std::string& option = "--checkpoint");

}  // namespace cf
