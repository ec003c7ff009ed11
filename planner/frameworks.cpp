#include "planner/frameworks.h"

namespace dtplan {

const std::vector<std::string>& framework_names() {
  static const std::vector<std::string> names = {"megatron", "deepspeed", "torchtitan"};
  return names;
}

Framework parse_framework(const std::string& name) {
  if (name == "deepspeed") return Framework::kDeepSpeed;
  if (name == "torchtitan") return Framework::kTorchtitan;
  return Framework::kMegatron;
}

const char* framework_refusal(Framework f, const Plan& p) {
  switch (f) {
    case Framework::kMegatron:
      // Megatron-LM: distributed optimizer (ZeRO-1) or Megatron-FSDP (ZeRO-3); its own 1F1B
      // and interleaved schedules.
      if (p.zero == 2)
        return "Megatron-LM shards optimizer state (ZeRO-1) or everything (FSDP), not gradients "
               "alone";
      if (p.pp > 1 && p.schedule != "1f1b" && p.schedule != "interleaved")
        return "Megatron-LM runs only its 1F1B and interleaved pipeline schedules";
      return nullptr;
    case Framework::kDeepSpeed:
      if (p.zero >= 2 && p.pp > 1) return "DeepSpeed refuses ZeRO-2/3 with pipeline parallelism";
      if (p.pp > 1 && p.schedule != "1f1b") return "DeepSpeed's pipeline engine runs 1F1B only";
      if (p.cp > 1) return "DeepSpeed (Megatron-DeepSpeed) has no context parallelism in this form";
      if (p.etp != 1) return "Megatron-DeepSpeed has no expert tensor parallelism";
      if (p.uneven_pp) return "DeepSpeed's pipeline engine partitions layers itself";
      return nullptr;
    case Framework::kTorchtitan:
      if (p.etp != 1 && p.etp != p.tp) return "torchtitan needs expert TP of 1 or equal to TP";
      if (p.zero == 1 || p.zero == 2) return "torchtitan shards with FSDP2 (ZeRO-3) or not at all";
      if (p.pp > 1 && p.schedule != "1f1b" && p.schedule != "interleaved" &&
          p.schedule != "gpipe" && p.schedule != "zb-v")
        return "torchtitan runs 1F1B, interleaved, GPipe and ZB-V pipeline schedules only";
      return nullptr;
  }
  return nullptr;
}

}  // namespace dtplan
