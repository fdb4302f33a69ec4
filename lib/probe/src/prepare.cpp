#include "cf/probe/prepare.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/list.hpp"
#include "cf/core/validators.hpp"
#include "cf/data/corpus.hpp"
#include "cf/data/task_file.hpp"
#include "cf/data/tokenizer.hpp"
#include "cf/probe/boundary_copy.hpp"
#include "cf/probe/passkey.hpp"
#include "cf/probe/ranking.hpp"

namespace cf::probe {

using output::fmt;
using output::fmt_int;

namespace {
std::string filler_text(const TaskOptions& o) {
  require(!o.corpus.empty(), "--task ", o.task,
          " needs --corpus brown|kjv|FILE for its filler text (random filler is boundary-copy's, without --corpus)");
  std::string text = data::load_corpus(o.corpus);
  if (o.max_chars > 0 && static_cast<long long>(text.size()) > o.max_chars) {
    std::size_t cut = static_cast<std::size_t>(o.max_chars);
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text.resize(cut);
  }
  return text;
}
}  // namespace

std::vector<int> parse_int_list(const std::string& s, const std::string& what) {
  if (s == "all") return {};
  std::vector<int> out;
  for (const auto& x : split_list(s, what)) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoi(x, &used));
      require(used == x.size(), "");
    } catch (const std::exception&) {
      throw InvalidArgument(str(what, ": '", x, "' is not an integer (list: '", s, "')"));
    }
  }
  require(!out.empty(), what, ": empty list");
  return out;
}

std::vector<double> parse_real_list(const std::string& s, const std::string& what) {
  std::vector<double> out;
  for (const auto& x : split_list(s, what)) {
    try {
      std::size_t used = 0;
      out.push_back(std::stod(x, &used));
      require(used == x.size() && std::isfinite(out.back()), "");
    } catch (const std::exception&) {
      throw InvalidArgument(str(what, ": '", x, "' is not a finite number (list: '", s, "')"));
    }
  }
  require(!out.empty(), what, ": empty list");
  return out;
}

void add_task_options(CLI::App& app, TaskOptions& o) {
  app.add_option("--task", o.task,
                 "Write a task file instead of a corpus split: boundary-copy | passkey | ranking (docs/probe.md)")
      ->check(CLI::IsMember({"boundary-copy", "passkey", "ranking"}));
  app.add_option("--K", o.K, "boundary-copy: alphabet size K (>= 2)")->capture_default_str();
  app.add_option("--distance", o.distance, "boundary-copy: copy distance d (token p+1 = token p-d)")
      ->capture_default_str();
  app.add_option("--b", o.b,
                 "boundary-copy, ranking: block size b (phase r = p mod b) [default: 4 for boundary-copy, 32 for "
                 "ranking]")
      ->check(app::integer(1, std::numeric_limits<int>::max()));
  app.add_option("--w", o.w, "ranking: bridge width w (h = w/2) of the bridge-window family [default: 32]")
      ->check(app::integer(1, std::numeric_limits<int>::max()));
  app.add_option("--seq-len", o.seq_len, "boundary-copy: model sequence length (rows hold seq_len + 1 tokens)")
      ->capture_default_str();
  app.add_option("--phases", o.phases, "boundary-copy: scored phases, 'all' or a list such as '0,1'")
      ->capture_default_str();
  app.add_option("--readout-rate", o.readout_rate, "boundary-copy: probability that an eligible position is a readout")
      ->check(app::finite(0, 1))
      ->capture_default_str();
  app.add_option(
         "--alphabet-start", o.alphabet_start,
         "boundary-copy: first token id of the K-token alphabet (-1: 0 with random filler, 'A' = 65 with a corpus)")
      ->capture_default_str();
  app.add_option("--rows-train", o.rows_train, "task rows in the training split (every task)")->capture_default_str();
  app.add_option("--rows-val", o.rows_val,
                 "validation items (the probe's): boundary-copy rows, ranking items per family; passkey: see --reps")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "task seed (the files are a function of the options and the seed)")
      ->check(app::unsigned_integer())
      ->capture_default_str();
  app.add_option("--lengths", o.lengths, "passkey: context lengths in tokens (comma list)")->capture_default_str();
  app.add_option("--depths", o.depths, "passkey: needle depth fractions in [0, 1] (comma list)")->capture_default_str();
  app.add_option("--reps", o.reps, "passkey: validation items per (length, depth) cell (training rows: --rows-train)")
      ->capture_default_str();
  app.add_option("--families", o.families, "ranking: item families (comma list)")->capture_default_str();
  app.add_option("--context", o.context, "ranking: context length in tokens of needle / boundary items")
      ->capture_default_str();
}

output::Report prepare_task(const TaskOptions& o) {
  require(!o.out.empty(), "--out is required");
  require(o.rows_train >= 1 && o.rows_train <= 10000000, "--rows-train must be in [1, 1e7] (got ", o.rows_train, ")");
  require(o.rows_val >= 1 && o.rows_val <= 10000000, "--rows-val must be in [1, 1e7] (got ", o.rows_val, ")");
  data::TaskData d;
  output::Report r;
  // numbers and text in separate tables: a CSV column holds one or the other (docs/conventions.md)
  output::Table t, st;
  t.header = {"quantity", "value"};
  st.title = "settings";
  st.name = "settings";
  st.header = {"setting", "text"};
  if (o.task == "boundary-copy") {
    BoundaryCopySpec s;
    s.K = o.K;
    s.d = o.distance;
    s.b = o.b > 0 ? o.b : 4;
    s.seq_len = o.seq_len;
    s.phases = parse_int_list(o.phases, "--phases");
    s.readout_rate = o.readout_rate;
    s.seed = o.seed;
    require(o.K >= 2, "--K must be >= 2 (got ", o.K, "): a 1-way copy has nothing to guess");
    require(o.K <= 65536, "--K must be <= 65536 (got ", o.K, ")");
    std::string filler_name = "random";
    if (!o.corpus.empty()) {
      const auto tok = data::Tokenizer::create(o.tokenizer, o.gpt2_dir);
      s.filler = tok.encode(filler_text(o));
      s.vocab_size = tok.vocab_size();
      d.tokenizer = tok.name();
      filler_name = o.corpus;
    } else {
      d.tokenizer = "synthetic";
    }
    require(o.alphabet_start >= -1, "--alphabet-start must be >= 0, or -1 for the default (got ", o.alphabet_start,
            ")");
    // 64-bit sums: --alphabet-start near INT_MAX must not wrap into a negative vocabulary
    const std::int64_t start = o.alphabet_start >= 0 ? o.alphabet_start : (o.corpus.empty() ? 0 : 65);
    const std::int64_t end = start + o.K;
    if (o.corpus.empty()) {
      require(end <= 65536, "--alphabet-start ", start, " + K ", o.K, " = ", end,
              " exceeds 65536, the largest vocabulary of a task file (16-bit token ids)");
      s.vocab_size = static_cast<int>(end);
    }
    require(end <= s.vocab_size, "--alphabet-start ", start, " + K ", o.K, " = ", end, " exceeds the vocabulary ",
            s.vocab_size);
    for (int k = 0; k < o.K; ++k) s.alphabet.push_back(static_cast<data::Token>(start + k));
    validate(s);
    d.vocab_size = s.vocab_size;
    d.source = filler_name;
    d.row_len = s.seq_len + 1;
    d.task = describe(s, filler_name);
    d.train = generate_boundary_copy(s, o.rows_train, 0);
    d.val = generate_boundary_copy(s, o.rows_val, 1000000000ull);
    std::int64_t nr = 0;
    for (auto m : d.val.mask) nr += m;
    t.add_row({"K (alphabet size)", fmt_int(s.K)});
    t.add_row({"d (copy distance)", fmt_int(s.d)});
    t.add_row({"b (block size)", fmt_int(s.b)});
    t.add_row({"validation readouts", fmt_int(nr)});
  } else if (o.task == "passkey") {
    const PasskeySpec s = passkey_spec(o);
    const auto tok = data::Tokenizer::create(o.tokenizer, o.gpt2_dir);
    const std::vector<data::Token> filler = tok.encode(filler_text(o));
    d = generate_passkey(s, tok, filler);
    st.add_row({"lengths", d.task.at("lengths").dump()});  // "[48,64]": a list, never a bare number
    st.add_row({"depths", d.task.at("depths").dump()});
  } else if (o.task == "ranking") {
    const RankingSpec s = ranking_spec(o);
    const auto tok = data::Tokenizer::create(o.tokenizer, o.gpt2_dir);
    const std::vector<data::Token> filler = tok.encode(filler_text(o));
    d = generate_ranking(s, tok, filler);
    st.add_row({"families", d.task.at("families").dump()});
  } else {
    throw InvalidArgument(str("--task: unknown task '", o.task, "' (known: boundary-copy, passkey, ranking)"));
  }
  data::write_task_files(o.out, d);
  t.title = "prepare-data --task " + o.task + " -> " + o.out + ".{train,val}.bin, .{train,val}.mask.bin, .meta.json";
  t.add_row({"row length (tokens)", fmt_int(d.row_len)});
  t.add_row({"rows train", fmt_int(static_cast<long long>(d.rows(d.train)))});
  t.add_row({"rows val", fmt_int(static_cast<long long>(d.rows(d.val)))});
  t.add_row({"vocab_size", fmt_int(d.vocab_size)});
  st.add_row({"tokenizer", d.tokenizer});
  t.name = "task";
  r.tables.push_back(t);
  r.tables.push_back(st);
  r.body = {{"task", d.task},
            {"row_len", d.row_len},
            {"rows_train", d.rows(d.train)},
            {"rows_val", d.rows(d.val)},
            {"vocab_size", d.vocab_size},
            {"tokenizer", d.tokenizer},
            {"source", d.source},
            {"files",
             {o.out + ".train.bin", o.out + ".val.bin", o.out + ".train.mask.bin", o.out + ".val.mask.bin",
              o.out + ".meta.json"}}};
  r.notes.push_back("Train on it with: train --data " + o.out + " (aligned rows, loss on masked targets only)");
  return r;
}

}  // namespace cf::probe
