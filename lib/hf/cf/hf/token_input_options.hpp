#pragma once
// The command-line side of a tool's token input (capture, influence, jacobian): one place that
// declares --text, --data, --tokens (and --capture where the tool reads a capture), --split and
// --gpt2-dir, so the three tools name, describe and check them alike; cf/hf/token_input.hpp
// reads what they hold.
#include <CLI/CLI.hpp>
#include <string>

#include "cf/core/validators.hpp"
#include "cf/hf/token_input.hpp"

namespace cf::hf {

/// Declares the option group "input" (--text, --data, --tokens, and --capture FILE when `capture`
/// is not null, described by `capture_help`; exactly one of them is required), then --split and
/// --gpt2-dir. `in` and `capture` must outlive the parse.
inline void add_token_input_options(CLI::App& app, TokenInput& in, std::string* capture = nullptr,
                                    const std::string& capture_help = {}) {
  auto* group = app.add_option_group("input", "token input (exactly one)");
  group->add_option("--text", in.text,
                    "Text file (or brown|kjv), tokenised with the checkpoint's vocabulary (bytes, GPT-2 BPE, or a "
                    "Hugging Face directory's tokenizer.json)");
  group->add_option("--data", in.data, "Prefix of prepare-data token files (vocab_size must match the checkpoint)");
  group->add_option("--tokens", in.tokens, "Pre-tokenised ids: whitespace-separated integers, or a .npy of int32/int64")
      ->check(CLI::ExistingFile);
  if (capture) group->add_option("--capture", *capture, capture_help);
  group->require_option(1);
  app.add_option("--split", in.split, "Split of --data to read")
      ->check(CLI::IsMember({"val", "train"}))
      ->capture_default_str();
  app.add_option("--gpt2-dir", in.gpt2_dir, "Folder with encoder.json and vocab.bpe for GPT-2 checkpoints");
}

/// After parsing: --split only with --data, --gpt2-dir only with --text (cf::InvalidArgument
/// naming the option otherwise: an option that would be ignored is refused, docs/conventions.md).
inline void check_token_input_options(const CLI::App& app, const TokenInput& in) {
  app::refuse_unless(app, "--split", !in.data.empty(), "--data PREFIX");
  app::refuse_unless(app, "--gpt2-dir", !in.text.empty(), "--text FILE");
}

}  // namespace cf::hf
