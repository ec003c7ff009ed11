// The flags of `dtplan search`, shared with `dtplan report` (same model, cluster, workload and
// pins), turned into a search setup once; and the search's JSON (the contract `launch --from`
// and `report --from` read).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/options.h"
#include "planner/search.h"

namespace dtplan::cli {

struct SearchFlags {
  SpecOptions spec;
  std::string tp, pp, cp, ep, etp, vpp, mbs, zero, recompute, schedule, sp = "auto";
  std::string objective = "step_time", framework = "megatron", precision = "bf16";
  std::string fp8_recipe;        // "" = delayed
  int fp8_amax_history_len = 0;  // 0 = 1
  // Global batch pins, as given: "1536", "512,1024,2048" or "512-2048" (sequences or tokens).
  std::string gbs, gbs_tokens;
  int64_t seq = 2048;
  int top = 10, threads = 0;
  double margin = 0.10;
  bool cross_node_tp = false;
  bool no_prune = false;
  // Time to train: tokens (0 = not given); the deadline in days to invert (0 = none) and the
  // largest GPU count it may answer (0: the cluster YAML's size, or 1,048,576).
  // Rankings: the best plan per distinct layout first (text and report by default; JSON only
  // with --distinct), or the plain ranking (--no-distinct).
  bool distinct = false, no_distinct = false;
  double train_tokens = 0;
  double deadline_days = 0;
  double budget_gpu_hours = 0;  // the fastest plan within this many GPU-hours (0 = none)
  int max_gpus = 0;
};

void add_search_flags(CLI::App& cmd, SearchFlags& f);

// True when no model, cluster or GPU flag was given (the built-in example applies).
bool no_spec_given(const CLI::App& cmd);
// GPT-3 175B on 32 DGX A100 80GB nodes, batch 1536 x 2048 tokens.
void apply_builtin_example(SearchFlags& f);

struct SearchSetup {
  ModelSpec model;
  Cluster cluster;
  Workload workload;
  SearchSpace space;
  SearchOptions options;
  FailureOptions failure;  // checkpoints and restarts of the ranked plans' outputs
  // Whose stack runs the plans (error bands' regime): the rule set's name, or a framework
  // profile's stack (megatron, deepspeed, torchtitan, other).
  std::string framework_stack = "megatron";
};

// Loads and checks everything; bad values are InputErrors naming the flag.
SearchSetup make_search_setup(const SearchFlags& f);

// Whether the ranking shows distinct layouts first: by default (text, JSON and reports alike, so
// that `launch --from FILE --rank N` runs the plan the text showed as N), not with
// --no-distinct. When it does, the search keeps more plans (8x --top) for
// distinct_layouts_first to choose from.
bool distinct_ranking(const SearchFlags& f);
void widen_for_distinct(SearchSetup& s, const SearchFlags& f);

// The `dtplan search --json` document, including the flags it ran with ("flags"), so that the
// search can be run again from it (report --from).
// "8", "2,4,8" or "4-16": every integer of the values and ranges (at most max_width + 1 per
// range), or InputError naming `flag`.
std::vector<int> parse_int_set(const std::string& text, const std::string& flag);
std::vector<int> parse_int_set(const std::string& text, const std::string& flag, int max_width,
                               bool positive);

nlohmann::json search_to_json(const SearchFlags& f, const SearchSetup& s, const SearchResult& r,
                              const char* evaluator, int refined_with_des);

// The framework warnings a plan the search found earns, as `estimate` gives them for the same
// plan (planner/frameworks.h): none for a framework profile whose stack is its own.
std::vector<FrameworkWarning> search_framework_warnings(const SearchSetup& s, const Plan& p);

// The flags a saved `dtplan search --json` file ran with; InputError naming --from otherwise.
SearchFlags search_flags_from_json(const std::string& path);
// A model or cluster as a search file records it: a file given by path is recorded by its
// absolute path (the file can then be read from any directory), a zoo name as it is.
std::string recorded_spec(const std::string& given);
// The model or cluster a search file records, read back: as recorded when it names a file or
// a zoo entry; an older file's relative path that does not exist from here is tried beside the
// search file.
std::string recorded_spec_from(const std::string& recorded, const std::string& search_file);
// Refuses (InputError naming `path` and the JSON pointer) a floating-point number beyond the int
// range anywhere in `v`, except under the keys in `large` (token counts, hours): nlohmann converts
// a floating value to an integer field with a plain cast, undefined out of range (found by
// fuzz_search_json and fuzz_recorded, issue #21). Saved searches hold integers in these parts.
void check_json_integers(const nlohmann::json& v, const std::string& path,
                         const std::vector<std::string>& large = {}, const std::string& at = "");

}  // namespace dtplan::cli
