// Plug-in point: a launch-config emitter (Megatron-LM + Slurm, DeepSpeed, torchtitan...). One
// file per emitter in emit/impl/, registered with DTPLAN_REGISTER under the --format name;
// `dtplan list emitters` prints them.
//
// Contract: emit() is pure: it returns the files (name, content, executable bit) and writes
// nothing; refusal() returns nullptr when the framework can express the plan, else the reason.
// Every value placed in a shell script is quoted (shell_quote), so names and paths cannot break
// or inject into it.
#pragma once

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
};

// The optional #SBATCH lines for partition, account and time limit (values reduced to the
// characters Slurm accepts there).
std::string slurm_options(const EmitInput& in);

struct EmittedFile {
  std::string name;
  std::string content;
  bool executable = false;
};

class IEmitter {
 public:
  virtual ~IEmitter() = default;
  virtual const char* refusal(const EmitInput& in) const = 0;
  virtual std::vector<EmittedFile> emit(const EmitInput& in) const = 0;
};

const IEmitter* find_emitter(const std::string& name);
std::vector<std::string> emitter_names();

// POSIX shell quoting: 'text' with embedded quotes as '\''.
std::string shell_quote(const std::string& s);

// The Megatron-LM argument list for the model and plan (CONVENTIONS.md §1), one element per
// argv entry. Shared by the Megatron-LM and Megatron-DeepSpeed emitters.
std::vector<std::string> megatron_model_args(const ModelSpec& m, const Workload& w);
std::vector<std::string> megatron_parallel_args(const ModelSpec& m, const Workload& w,
                                                const Plan& p);

// Text safe inside a shell comment (no line breaks or control characters).
std::string comment_safe(const std::string& s);
// A Slurm job name: letters, digits, '.', '_' and '-' only (#SBATCH lines are not shell).
std::string slurm_name(const std::string& s);

// "#!/bin/bash" lines declaring a bash array: NAME=( 'a' 'b' ... ).
std::string bash_array(const std::string& name, const std::vector<std::string>& items);

}  // namespace dtplan
