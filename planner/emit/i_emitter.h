// Plug-in point: a launch-config emitter (Megatron-LM + Slurm, DeepSpeed, torchtitan...). One
// file per emitter in emit/impl/, registered with DTPLAN_REGISTER under the --format name;
// `dtplan list emitters` prints them.
//
// Contract: emit() is pure: it returns the files (name, content, executable bit, what the user
// must still provide) and writes nothing; refusal() returns "" when the chosen framework version
// can run the plan and the model as described, else the reason with the framework code it comes
// from. Nothing the plan or model says is dropped: a field an emitter cannot express is a
// refusal. Every value placed in a shell script is quoted (shell_quote), so names and paths
// cannot break or inject into it. Each emitter states the framework versions it writes for
// (versions(), the first is the default, named in every file's header), and each registered
// emitter has a check against the real framework in tests/e2e/launch_frameworks.sh.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

struct EmitInput {
  const ModelSpec* model = nullptr;
  const Cluster* cluster = nullptr;
  const Workload* work = nullptr;
  const Plan* plan = nullptr;
  std::string job_name = "dtplan";
  std::vector<std::string> hosts;  // from --nodes-file; empty: node-0 ... node-(N-1)
  // Optional Slurm settings (#SBATCH --partition/--account/--time); empty = not written.
  std::string partition, account, time_limit;
  std::string version;  // --framework-version; "" = the emitter's default
  // Checkpoints (when the user turns them on): every `save_interval_steps` iterations, the
  // interval dtplan prices (launch: Young's optimum for the job's MTBF and this plan's
  // checkpoint, or --checkpoint-interval-s, in whole steps); `save_interval_why` says how it
  // was derived (a comment in the files); `async_save` asks for asynchronous saves.
  int64_t save_interval_steps = 1000;
  std::string save_interval_why;
  bool async_save = false;
};

// A framework release (or pinned commit) an emitter writes for.
struct FrameworkVersion {
  const char* name;         // what --framework-version takes
  const char* description;  // the release or commit, for file headers
};

// The optional #SBATCH lines for partition, account and time limit (values reduced to the
// characters Slurm accepts there).
std::string slurm_options(const EmitInput& in);

// "# SAVE_INTERVAL defaults to N iterations: <how N was derived>.\n" (Megatron, DeepSpeed).
std::string save_interval_comment(const EmitInput& in);

// Why launch files cannot start `c`'s GPUs as priced (a partly used last node: launchers start
// the same number of ranks on every node), or "".
std::string partial_node_refusal(const Cluster& c);

struct EmittedFile {
  std::string name;
  std::string content;
  bool executable = false;
  std::string needs;  // what the user must still provide for this file; "" = nothing
};

class IEmitter {
 public:
  virtual ~IEmitter() = default;
  virtual std::span<const FrameworkVersion> versions() const = 0;
  virtual std::string refusal(const EmitInput& in) const = 0;
  // Throws InputError when refusal() is not "".
  virtual std::vector<EmittedFile> emit(const EmitInput& in) const = 0;
};

// The version `in.version` names among `e`'s (its default when empty); throws InputError on
// --framework-version with the known ones.
const FrameworkVersion& chosen_version(const IEmitter& e, const EmitInput& in);

const IEmitter* find_emitter(const std::string& name);
std::vector<std::string> emitter_names();

// POSIX shell quoting: 'text' with embedded quotes as '\''.
std::string shell_quote(const std::string& s);

// An argument list (one element per argv entry), or why the framework cannot express it.
struct ArgList {
  std::vector<std::string> args;
  std::string refusal;  // "" = args are complete
  void add(const std::string& flag) { args.push_back(flag); }
  template <class T>
  void add(const std::string& flag, const T& value);
  void refuse(std::string why) {
    if (refusal.empty()) refusal = std::move(why);
  }
};

// The Megatron-LM argument list for the model and plan (CONVENTIONS.md §1), checked against
// megatron/training/arguments.py at NVIDIA/Megatron-LM@d98e8a6 (tests/data/framework_flags).
// The MoE token dispatcher is the plan's (Plan::moe_dispatcher).
ArgList megatron_model_args(const ModelSpec& m, const Workload& w, MoeDispatcher dispatcher);
ArgList megatron_parallel_args(const ModelSpec& m, const Workload& w, const Plan& p);

template <class T>
void ArgList::add(const std::string& flag, const T& value) {
  args.push_back(flag);
  args.push_back(fmt::format("{}", value));
}

// Text safe inside a shell comment (no line breaks or control characters).
std::string comment_safe(const std::string& s);
// A Slurm job name: letters, digits, '.', '_' and '-' only (#SBATCH lines are not shell).
std::string slurm_name(const std::string& s);

// "#!/bin/bash" lines declaring a bash array: NAME=( 'a' 'b' ... ).
std::string bash_array(const std::string& name, const std::vector<std::string>& items);

}  // namespace dtplan
