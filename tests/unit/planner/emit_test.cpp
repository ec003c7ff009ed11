// Launch emitters: golden files, round trip of every plan and model value, shell safety
// (bash -n, shellcheck, a hostile name), and each refusal rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/catalog.h"
#include "core/error.h"
#include "planner/emit/i_emitter.h"
#include "planner/frameworks.h"

namespace dtplan {
namespace {

namespace fs = std::filesystem;

struct LaunchCase {
  const char* id;
  const char* model;
  const char* profile;
  int gpus;
  Plan plan;
  int64_t seq;
  std::vector<const char*> formats;  // the formats that can express it
  Precision precision = Precision::kBf16;
  Fp8Recipe recipe = Fp8Recipe::kDelayed;
};

Plan make_plan(int tp, int pp, int cp, int dp, int ep, int vpp, int zero, Recompute rc, int mbs,
               int64_t gbs, const char* schedule) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.cp = cp;
  p.dp = dp;
  p.ep = ep;
  p.vpp = vpp;
  p.sp = tp > 1;
  p.zero = zero;
  p.recompute = rc;
  p.mbs = mbs;
  p.gbs = gbs;
  p.schedule = schedule;
  return p;
}

Plan uneven(Plan p) {
  p.uneven_pp = true;
  return p;
}

Plan offloaded(Plan p, int layers) {
  p.offload_layers = layers;
  return p;
}

Plan dispatched(Plan p, MoeDispatcher d) {
  p.moe_dispatcher = d;
  return p;
}

// The golden launch set (issue #17): each case in every format that can express it; the
// others must refuse it naming the rule and its source (GoldenRefusalsNameTheirSource).
std::vector<LaunchCase> cases() {
  return {
      // Issue #6: GPT-3 175B on 256 A100, TP8 PP8 DP4 VPP3, interleaved, SP, selective, ZeRO-1.
      {"gpt3-175b_256xa100",
       "gpt3-175b",
       "dgx-a100-80g",
       256,
       make_plan(8, 8, 1, 4, 1, 3, 1, Recompute::kSelective, 1, 1536, "interleaved"),
       2048,
       {"megatron"}},
      // Llama 3.1 405B on 1024 H100 with context parallelism 2, fully sharded.
      {"llama3.1-405b_1024xh100_cp",
       "llama3.1-405b",
       "dgx-h100",
       1024,
       make_plan(8, 2, 2, 32, 1, 1, 3, Recompute::kFull, 1, 512, "1f1b"),
       8192,
       {"megatron", "torchtitan"}},
      // 126 layers on 16 stages: 7 on the first and last, 8 on the others; FP8.
      {"llama3.1-405b_1024xh100_uneven",
       "llama3.1-405b",
       "dgx-h100",
       1024,
       uneven(make_plan(8, 16, 2, 4, 1, 1, 3, Recompute::kFull, 1, 512, "1f1b")),
       8192,
       {"megatron", "torchtitan"},
       Precision::kFp8,
       Fp8Recipe::kTensorwise},
      // The same on 32 virtual stages: 3 layers on the first and last chunk, 4 on the others
      // (Megatron: --pipeline-model-parallel-layout, not --decoder-first-pipeline-num-layers).
      {"llama3.1-405b_1024xh100_uneven_vpp",
       "llama3.1-405b",
       "dgx-h100",
       1024,
       uneven(make_plan(8, 16, 2, 4, 1, 2, 3, Recompute::kFull, 1, 512, "interleaved")),
       8192,
       {"megatron", "torchtitan"}},
      // Llama 3 70B FP8 with the distributed optimizer.
      {"llama3-70b_64xh100_fp8",
       "llama3-70b",
       "dgx-h100",
       64,
       make_plan(8, 2, 1, 4, 1, 1, 1, Recompute::kSelective, 1, 512, "1f1b"),
       8192,
       {"megatron"},
       Precision::kFp8},
      // The same in bf16 on a pipeline: Megatron-DeepSpeed's engine too (FP8 it refuses).
      {"llama3-70b_64xh100_pp2",
       "llama3-70b",
       "dgx-h100",
       64,
       make_plan(8, 2, 1, 4, 1, 1, 1, Recompute::kFull, 1, 512, "1f1b"),
       8192,
       {"megatron", "deepspeed"}},
      // Mixtral 8x7B with expert parallelism, fully sharded (Megatron-FSDP).
      {"mixtral-8x7b_64xh100_ep",
       "mixtral-8x7b",
       "dgx-h100",
       64,
       make_plan(2, 1, 1, 32, 8, 1, 3, Recompute::kFull, 1, 256, "1f1b"),
       4096,
       {"megatron"}},
      // Mixtral 8x7B with expert parallelism and ZeRO-1.
      {"mixtral-8x7b_64xh100_ep_zero1",
       "mixtral-8x7b",
       "dgx-h100",
       64,
       make_plan(2, 1, 1, 32, 8, 1, 1, Recompute::kFull, 1, 256, "1f1b"),
       4096,
       {"megatron", "deepspeed"}},
      // DeepSeek-V3: MLA, MTP on the last stage, EP64, the sigmoid group-limited router;
      // 61 layers on 16 stages (3 first, 2 last); DeepEP's dispatcher, as Megatron-Bridge's
      // H100 recipes run it (moe_flex_dispatcher_backend, scripts/performance/run_script.py:61
      // @fa0315ae2).
      {"deepseek-v3_1024xh100",
       "deepseek-v3",
       "dgx-h100",
       1024,
       dispatched(uneven(make_plan(1, 16, 1, 64, 64, 1, 1, Recompute::kFull, 1, 4096, "1f1b")),
                  MoeDispatcher::kDeepEP),
       4096,
       {"megatron"}},
      // DeepSeek-V3 as Megatron-Bridge's GB200 recipes run it: 8 stages x 4 virtual, 61 layers
      // on 32 chunks, the last holding only the MTP module and the loss.
      {"deepseek-v3_256xgb200_vpp",
       "deepseek-v3",
       "gb200-nvl72",
       256,
       uneven(make_plan(1, 8, 1, 32, 32, 4, 1, Recompute::kNone, 1, 4096, "interleaved")),
       4096,
       {"megatron"}},
      // Qwen2.5-72B: Q/K/V biases.
      {"qwen2.5-72b_64xh100",
       "qwen2.5-72b",
       "dgx-h100",
       64,
       make_plan(8, 2, 1, 4, 1, 1, 1, Recompute::kSelective, 1, 512, "1f1b"),
       8192,
       {"megatron"}},
      // Llama 3 70B FP8 (current scaling) on 64 GB200, Megatron-FSDP, the activations of 40 of
      // its 80 layers offloaded to the Grace memory: Megatron-Bridge's GB200 recipe
      // (scripts/performance/configs/llama/llama3_workload_base_configs.py @74695a06d,
      // cpu_offloading_num_layers=40, use_megatron_fsdp).
      {"llama3-70b_64xgb200_offload",
       "llama3-70b",
       "gb200-nvl72",
       64,
       offloaded(make_plan(1, 1, 1, 64, 1, 1, 3, Recompute::kNone, 2, 256, "1f1b"), 40),
       8192,
       {"megatron"},
       Precision::kFp8,
       Fp8Recipe::kTensorwise},
      // Qwen3-235B-A22B: q/k norms, 128 experts; 94 layers on 4 stages (23 first and last).
      {"qwen3-235b-a22b_256xh100",
       "qwen3-235b-a22b",
       "dgx-h100",
       256,
       uneven(make_plan(4, 4, 1, 16, 8, 1, 1, Recompute::kFull, 1, 1024, "1f1b")),
       4096,
       {"megatron"}},
  };
}

struct Emitted {
  ModelSpec model;
  Cluster cluster;
  Workload work;
  Plan plan;
  std::vector<EmittedFile> files;
};

// The case's model, cluster, workload and plan (files empty).
Emitted setup(const LaunchCase& c) {
  Emitted e{load_model(c.model), load_cluster(c.profile, c.gpus), {}, c.plan, {}};
  e.work.seq_len = c.seq;
  e.work.global_batch = c.plan.gbs;
  e.work.precision = c.precision;
  e.work.fp8_recipe = c.recipe;
  return e;
}

EmitInput input_of(const Emitted& e) {
  EmitInput in;
  in.model = &e.model;
  in.cluster = &e.cluster;
  in.work = &e.work;
  in.plan = &e.plan;
  return in;
}

Emitted emit_case(const LaunchCase& c, const std::string& format,
                  const std::string& job = "dtplan") {
  Emitted e = setup(c);
  EmitInput in = input_of(e);
  in.job_name = job;
  const IEmitter* em = find_emitter(format);
  EXPECT_NE(em, nullptr) << format;
  if (!em) return e;
  const std::string why = em->refusal(in);
  EXPECT_EQ(why, "") << c.id << " " << format;
  if (!why.empty()) return e;
  e.files = em->emit(in);
  return e;
}

const EmittedFile* file(const Emitted& e, const std::string& name) {
  for (const auto& f : e.files)
    if (f.name == name) return &f;
  return nullptr;
}

std::map<std::string, std::string> args_map(const std::string& list) {
  std::map<std::string, std::string> m;
  std::istringstream in(list);
  std::string line, flag;
  while (std::getline(in, line)) {
    if (line.rfind("--", 0) == 0) {
      flag = line;
      m[flag] = "";
    } else if (!flag.empty()) {
      m[flag] = line;
    }
  }
  return m;
}

std::string write_temp(const std::string& name, const std::string& content) {
  fs::path dir = fs::temp_directory_path() / "dtplan_emit_test";
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << content;
  return p.string();
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "popen failed";
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int rc = pclose(f);
  return rc == 0 ? out : "exit " + std::to_string(rc) + ": " + out;
}

TEST(Emitters, GoldenFiles) {
  const bool update = std::getenv("DTPLAN_UPDATE_GOLDEN") != nullptr;
  const fs::path root = fs::path(DTPLAN_TEST_DATA_DIR) / "tests/golden/launch";
  for (const auto& c : cases())
    for (const char* format : c.formats) {
      Emitted e = emit_case(c, format);
      ASSERT_FALSE(e.files.empty());
      for (const auto& f : e.files) {
        const fs::path g = root / c.id / format / f.name;
        if (update) {
          fs::create_directories(g.parent_path());
          std::ofstream(g) << f.content;
          continue;
        }
        std::ifstream in(g);
        ASSERT_TRUE(in) << "missing golden " << g << " (DTPLAN_UPDATE_GOLDEN=1 writes it)";
        std::stringstream ss;
        ss << in.rdbuf();
        EXPECT_EQ(ss.str(), f.content) << g;
      }
    }
}

TEST(Emitters, MegatronArgumentsRoundTrip) {
  for (const auto& c : cases()) {
    Emitted e = emit_case(c, "megatron");
    const EmittedFile* list = file(e, "megatron_args.txt");
    ASSERT_NE(list, nullptr);
    auto a = args_map(list->content);
    const ModelSpec& m = e.model;
    const Plan& p = e.plan;
    EXPECT_EQ(a["--num-layers"], std::to_string(m.layers)) << c.id;
    EXPECT_EQ(a["--hidden-size"], std::to_string(m.hidden));
    EXPECT_EQ(a["--ffn-hidden-size"], std::to_string(m.ffn_hidden));
    EXPECT_EQ(a["--num-attention-heads"], std::to_string(m.heads));
    if (m.kv_heads < m.heads) {
      EXPECT_EQ(a["--num-query-groups"], std::to_string(m.kv_heads));
    }
    EXPECT_EQ(a["--vocab-size"], std::to_string(m.vocab));
    EXPECT_EQ(a["--seq-length"], std::to_string(e.work.seq_len));
    EXPECT_EQ(a["--max-position-embeddings"], std::to_string(m.max_seq));
    EXPECT_EQ(a.count("--swiglu"), m.ffn_act == FfnAct::kSwiglu ? 1u : 0u);
    EXPECT_EQ(a.count("--untie-embeddings-and-output-weights"), m.tied_embeddings ? 0u : 1u);
    if (m.moe) {
      EXPECT_EQ(a["--num-experts"], std::to_string(m.moe->experts));
      EXPECT_EQ(a["--moe-router-topk"], std::to_string(m.moe->topk));
      EXPECT_EQ(a["--moe-ffn-hidden-size"], std::to_string(m.moe->expert_ffn_hidden));
      EXPECT_EQ(a["--expert-model-parallel-size"], std::to_string(p.ep));
    }
    EXPECT_EQ(a["--tensor-model-parallel-size"], std::to_string(p.tp));
    EXPECT_EQ(a["--pipeline-model-parallel-size"], std::to_string(p.pp));
    if (p.cp > 1) {
      EXPECT_EQ(a["--context-parallel-size"], std::to_string(p.cp));
    }
    if (p.vpp > 1 && !p.uneven_pp) {
      EXPECT_EQ(a["--num-virtual-stages-per-pipeline-rank"], std::to_string(p.vpp));
    }
    if (p.vpp > 1 && p.uneven_pp) {  // the layout says the virtual stages (pp x vpp segments)
      const std::string layout = a["--pipeline-model-parallel-layout"];
      EXPECT_EQ(std::count(layout.begin(), layout.end(), '|'), p.pp * p.vpp - 1) << c.id;
    }
    EXPECT_EQ(a.count("--sequence-parallel"), p.sp ? 1u : 0u);
    EXPECT_EQ(a.count("--use-distributed-optimizer"), p.zero == 1 ? 1u : 0u);
    EXPECT_EQ(a.count("--use-megatron-fsdp"), p.zero == 3 ? 1u : 0u);
    EXPECT_EQ(a["--recompute-granularity"],
              p.recompute == Recompute::kNone ? "" : to_string(p.recompute));
    EXPECT_EQ(a["--micro-batch-size"], std::to_string(p.mbs));
    EXPECT_EQ(a["--global-batch-size"], std::to_string(p.gbs));
    // Data parallelism is what remains: world / (tp pp cp).
    EXPECT_EQ(e.cluster.num_gpus / (std::stoi(a["--tensor-model-parallel-size"]) *
                                    std::stoi(a["--pipeline-model-parallel-size"]) *
                                    (p.cp > 1 ? std::stoi(a["--context-parallel-size"]) : 1)),
              p.dp);
  }
}

const LaunchCase& case_named(const std::string& id) {
  static const std::vector<LaunchCase> all = cases();
  for (const auto& c : all)
    if (c.id == id) return c;
  throw std::runtime_error("no case " + id);
}

// Megatron-DeepSpeed's spelling (megatron/arguments.py@f4157be, tests/data/framework_flags/
// megatron-deepspeed.json): rotary as --use-rotary-position-embeddings with its theta,
// lower-case normalisation, MoE on every layer (--expert-interval 1, default 2), dropless.
TEST(Emitters, DeepSpeedConfigRoundTrip) {
  const LaunchCase& c = case_named("mixtral-8x7b_64xh100_ep_zero1");
  Emitted e = emit_case(c, "deepspeed");
  auto j = nlohmann::json::parse(file(e, "ds_config.json")->content);
  EXPECT_EQ(j["train_batch_size"], c.plan.gbs);
  EXPECT_EQ(j["train_micro_batch_size_per_gpu"], c.plan.mbs);
  EXPECT_EQ(j["gradient_accumulation_steps"], c.plan.gbs / (int64_t{c.plan.mbs} * c.plan.dp));
  EXPECT_EQ(j["zero_optimization"]["stage"], c.plan.zero);
  EXPECT_EQ(j["bf16"]["enabled"], true);
  auto a = args_map(file(e, "megatron_deepspeed_args.txt")->content);
  EXPECT_EQ(a["--zero-stage"], "1");
  EXPECT_EQ(a["--moe-expert-parallel-size"], "8");
  EXPECT_EQ(a["--num-experts"], "8");
  EXPECT_EQ(a["--topk"], "2");
  EXPECT_EQ(a["--expert-interval"], "1");
  EXPECT_EQ(a.count("--disable-moe-token-dropping"), 1u);
  EXPECT_EQ(a["--num-key-value-heads"], "8");
  EXPECT_EQ(a.count("--no-pipeline-parallel"), 1u);
  EXPECT_EQ(a.count("--use-rotary-position-embeddings"), 1u);
  EXPECT_EQ(a["--rotary-position-embeddings-theta"], "1000000");
  EXPECT_EQ(a["--normalization"], "rmsnorm");
  EXPECT_EQ(a["--attention-dropout"], "0");
  EXPECT_EQ(a.count("--position-embedding-type"), 0u);
  // Model values.
  const ModelSpec& m = e.model;
  EXPECT_EQ(a["--num-layers"], std::to_string(m.layers));
  EXPECT_EQ(a["--hidden-size"], std::to_string(m.hidden));
  EXPECT_EQ(a["--ffn-hidden-size"], std::to_string(m.ffn_hidden));
  EXPECT_EQ(a["--num-attention-heads"], std::to_string(m.heads));
  EXPECT_EQ(a["--max-position-embeddings"], std::to_string(m.max_seq));
  EXPECT_EQ(a["--seq-length"], std::to_string(e.work.seq_len));
  EXPECT_EQ(a["--tensor-model-parallel-size"], std::to_string(c.plan.tp));
  EXPECT_EQ(a["--micro-batch-size"], std::to_string(c.plan.mbs));
  EXPECT_EQ(a["--global-batch-size"], std::to_string(c.plan.gbs));
  EXPECT_EQ(a.count("--swiglu"), 1u);
  EXPECT_EQ(file(e, "hostfile")->content.substr(0, 15), "node-0 slots=8\n");
  // Mixtral's router: top-2 without DeepSpeed's sampled second expert; fp32 gradient
  // accumulation as the plan prices it (DeepSpeed's default under ZeRO is bf16).
  EXPECT_EQ(a.count("--disable-moe-top2-2nd-expert-sampling"), 1u);
  EXPECT_EQ(j["data_types"]["grad_accum_dtype"], "fp32");
  // Sequence parallelism needs one CUDA connection (megatron/arguments.py:401-406@f4157be).
  EXPECT_NE(file(e, "train_deepspeed.sh")->content.find("export CUDA_DEVICE_MAX_CONNECTIONS=1"),
            std::string::npos);
}

TEST(Emitters, TorchtitanTomlRoundTrip) {
  for (const auto& c : cases()) {
    if (std::find_if(c.formats.begin(), c.formats.end(), [](const char* f) {
          return std::string(f) == "torchtitan";
        }) == c.formats.end())
      continue;
    Emitted e = emit_case(c, "torchtitan");
    std::map<std::string, std::string> kv;
    std::istringstream in(file(e, "torchtitan.toml")->content);
    std::string line, section;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      if (line[0] == '[') {
        section = line.substr(1, line.find(']') - 1);
        continue;
      }
      const auto eq = line.find(" = ");
      if (eq != std::string::npos) kv[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
    }
    const Plan& p = e.plan;
    EXPECT_EQ(kv["model.name"], "\"llama3\"") << c.id;
    EXPECT_EQ(kv["model.flavor"], "\"405B\"") << c.id;
    EXPECT_EQ(kv["parallelism.tensor_parallel_degree"], std::to_string(p.tp)) << c.id;
    EXPECT_EQ(kv["parallelism.pipeline_parallel_degree"], std::to_string(p.pp));
    EXPECT_EQ(kv["parallelism.context_parallel_degree"], std::to_string(p.cp));
    EXPECT_EQ(kv["parallelism.expert_parallel_degree"], std::to_string(p.ep));
    EXPECT_EQ(kv["parallelism.data_parallel_shard_degree"], std::to_string(p.zero == 3 ? p.dp : 1));
    // FSDP with pipelining reshards after every forward, as dtplan prices it (torchtitan's
    // default keeps a stage's parameters gathered: reshard_after_forward = not pp_enabled).
    if (p.zero == 3 && p.pp > 1)
      EXPECT_EQ(kv["parallelism.fsdp_reshard_after_forward"], "\"always\"") << c.id;
    else
      EXPECT_EQ(kv.count("parallelism.fsdp_reshard_after_forward"), 0u) << c.id;
    EXPECT_EQ(kv["training.global_batch_size"], std::to_string(p.gbs));
    EXPECT_EQ(kv["training.seq_len"], std::to_string(e.work.seq_len));
    EXPECT_EQ(kv["activation_checkpoint.mode"], "\"" + std::string(to_string(p.recompute)) + "\"");
    EXPECT_EQ(kv.count("parallelism.pipeline_parallel_layers_per_stage"), 0u);
    if (c.precision == Precision::kFp8) {
      EXPECT_EQ(kv["model.converters"], "[\"quantize.linear.float8\"]") << c.id;
    }
  }
}

// torchtitan's stages by module name (module_fqns_per_model_part): the embedding first, the
// norm and head last, each stage's layers as dtplan splits them; the 126-layer model on 32
// virtual stages gives 3, 4 x 30, 3 (torchtitan's own layers_per_stage would give 9 stages for
// the issue's 80 layers on PP4 x VPP2 and a ValueError).
TEST(Emitters, TorchtitanStagesByModuleName) {
  Emitted e = emit_case(case_named("llama3.1-405b_1024xh100_uneven_vpp"), "torchtitan");
  const std::string& t = file(e, "torchtitan.toml")->content;
  EXPECT_NE(t.find("  [\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\"],\n  "
                   "[\"layers.3\", \"layers.4\", \"layers.5\", \"layers.6\"],"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  [\"layers.123\", \"layers.124\", \"layers.125\", \"norm\", \"output\"],\n]"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("pipeline_parallel_schedule = \"Interleaved1F1B\""), std::string::npos);
}

// torchtitan main takes a Python config module (--module/--config) instead of TOML
// (torchtitan/config/manager.py:48@b5bcd76); tokens instead of batch sizes (configs.py:37-51).
TEST(Emitters, TorchtitanMainWritesAPythonConfig) {
  const LaunchCase& c = case_named("llama3.1-405b_1024xh100_cp");
  Emitted e = setup(c);
  EmitInput in = input_of(e);
  in.version = "main";
  const IEmitter* em = find_emitter("torchtitan");
  ASSERT_EQ(em->refusal(in), "");
  const auto files = em->emit(in);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "dtplan_job.py");
  const std::string& py = files[0].content;
  EXPECT_NE(py.find("def dtplan_job() -> Trainer.Config:"), std::string::npos) << py;
  EXPECT_NE(py.find("model_registry(\"405B\")"), std::string::npos);
  EXPECT_NE(py.find("num_tokens_per_train_step=" + std::to_string(c.plan.gbs * c.seq)),
            std::string::npos);
  EXPECT_NE(py.find("\"lm_head\"]"), std::string::npos);
  EXPECT_NE(py.find("activation_checkpoint=FullAC.Config()"), std::string::npos);
  // Float8 at main scales rowwise only (float8.py:57@b5bcd76): refused.
  e.work.precision = Precision::kFp8;
  e.work.fp8_recipe = Fp8Recipe::kTensorwise;
  EXPECT_NE(em->refusal(in).find("rowwise only"), std::string::npos);
  e.work.precision = Precision::kBf16;
  EXPECT_NE(files[1].content.find("--module dtplan_job --config dtplan_job"), std::string::npos);
  in.version = "0.1.0";
  EXPECT_THROW(em->refusal(in), InputError);  // not a version this emitter writes for
}

// The checkpoint interval launch computes (cli/cmd_launch.cpp: estimate's Young interval in
// steps) reaches every framework's file, and --async-save becomes each framework's own switch:
// Megatron's needs the persistent worker (megatron/training/arguments.py:1814-1820@d98e8a6
// turns it off otherwise), torchtitan's is [checkpoint] async_mode (job_config.py:591@v0.2.2,
// checkpointer/dcp.py:137@b5bcd76), and Megatron-DeepSpeed has none (refused).
TEST(Emitters, CheckpointIntervalAndAsyncSave) {
  const LaunchCase& c = case_named("llama3.1-405b_1024xh100_cp");
  Emitted e = setup(c);
  EmitInput in = input_of(e);
  in.save_interval_steps = 37;
  in.save_interval_why = "Young's interval 249 s";
  in.async_save = true;
  const auto mg = find_emitter("megatron")->emit(in);
  const EmittedFile* sb = nullptr;
  for (const auto& f : mg)
    if (f.name == "train_megatron.sbatch") sb = &f;
  ASSERT_NE(sb, nullptr);
  EXPECT_NE(sb->content.find("--save-interval \"${SAVE_INTERVAL:-37}\" --async-save "
                             "--use-persistent-ckpt-worker)"),
            std::string::npos)
      << sb->content;
  EXPECT_NE(sb->content.find("# SAVE_INTERVAL defaults to 37 iterations: Young's interval 249 s."),
            std::string::npos);

  const auto tt = find_emitter("torchtitan")->emit(in);
  EXPECT_NE(tt[0].content.find("[checkpoint]\n# Set enable = true to write checkpoints; "
                               "interval: Young's interval 249 s.\nenable = false\ninterval = "
                               "37\nasync_mode = \"async\"\n"),
            std::string::npos)
      << tt[0].content;
  in.version = "main";
  const auto ttm = find_emitter("torchtitan")->emit(in);
  EXPECT_NE(
      ttm[0].content.find(
          "checkpoint=CheckpointManager.Config(enable=False, interval=37, async_mode=\"async\")"),
      std::string::npos)
      << ttm[0].content;
  in.version = "";

  const LaunchCase& d = case_named("llama3-70b_64xh100_pp2");
  Emitted ed = setup(d);
  EmitInput ind = input_of(ed);
  ind.save_interval_steps = 12;
  const auto ds = find_emitter("deepspeed")->emit(ind);
  bool found = false;
  for (const auto& f : ds)
    found |= f.content.find("--save-interval \"${SAVE_INTERVAL:-12}\")") != std::string::npos;
  EXPECT_TRUE(found);
  ind.async_save = true;
  EXPECT_NE(find_emitter("deepspeed")->refusal(ind).find("asynchronous checkpoint save"),
            std::string::npos);
}

TEST(Emitters, ScriptsPassBashAndShellcheck) {
  ASSERT_EQ(std::system("command -v shellcheck > /dev/null"), 0)
      << "shellcheck is not installed (scripts/setup-debian.sh installs it)";
  for (const auto& c : cases())
    for (const char* format : c.formats) {
      Emitted e = emit_case(c, format);
      for (const auto& f : e.files) {
        if (!f.executable) continue;
        const std::string path = write_temp(std::string(c.id) + "_" + f.name, f.content);
        EXPECT_EQ(run("bash -n '" + path + "' 2>&1"), "") << path;
        EXPECT_EQ(run("shellcheck '" + path + "' 2>&1"), "") << path;
      }
    }
}

TEST(Emitters, HostileNamesAreQuoted) {
  const std::string hostile = "\"; rm -rf / #";
  const auto c = cases()[0];
  Emitted e = emit_case(c, "megatron", hostile + "\n$(touch /tmp/dtplan_pwned)");
  const EmittedFile* script = file(e, "train_megatron.sbatch");
  ASSERT_NE(script, nullptr);
  const std::string path = write_temp("hostile.sbatch", script->content);
  EXPECT_EQ(run("bash -n '" + path + "' 2>&1"), "");
  EXPECT_EQ(run("shellcheck '" + path + "' 2>&1"), "");
  // Evaluate only the LOG_ARGS array: the hostile text comes back as one inert element.
  const std::string got = run("bash -c 'eval \"$(sed -n \"/^LOG_ARGS=(/,/^)/p\" \"" + path +
                              "\")\"; printf \"%s|\" \"${LOG_ARGS[@]}\"'");
  EXPECT_EQ(got, "--tensorboard-dir|tensorboard/" + hostile + "\n$(touch /tmp/dtplan_pwned)|");
  EXPECT_FALSE(fs::exists("/tmp/dtplan_pwned"));
  // The Slurm job name is reduced to a safe name; comments cannot be broken out of.
  const auto at = script->content.find("#SBATCH --job-name=");
  ASSERT_NE(at, std::string::npos);
  const std::string name =
      script->content.substr(at + 19, script->content.find('\n', at) - at - 19);
  EXPECT_EQ(name, "___rm_-rf_______touch__tmp_dtplan_pwned_");
  for (char ch : name)
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' ||
                ch == '.');
}

TEST(Emitters, ArgsInScriptEqualArgsFile) {
  // The quoted ARGS array in the script expands to exactly the argument list file.
  for (const auto& c : cases()) {
    Emitted e = emit_case(c, "megatron");
    const std::string path =
        write_temp("args_check.sbatch", file(e, "train_megatron.sbatch")->content);
    const std::string got = run("bash -c 'eval \"$(sed -n \"/^ARGS=(/,/^)/p\" \"" + path +
                                "\")\"; printf \"%s\\n\" \"${ARGS[@]}\"'");
    EXPECT_EQ(got, file(e, "megatron_args.txt")->content) << c.id;
  }
}

TEST(Emitters, RefusalRules) {
  const ModelSpec dense = load_model("llama3-8b");
  auto refused = [&](Framework f, Plan p) { return framework_refusal(f, p, dense) != nullptr; };
  Plan p = make_plan(8, 4, 1, 8, 1, 1, 2, Recompute::kNone, 1, 512, "1f1b");
  EXPECT_TRUE(refused(Framework::kDeepSpeed, p));  // ZeRO-2 with PP > 1
  p.zero = 3;
  EXPECT_TRUE(refused(Framework::kDeepSpeed, p));  // ZeRO-3 with PP > 1
  p.zero = 1;
  EXPECT_FALSE(refused(Framework::kDeepSpeed, p));
  p.vpp = 2;
  p.schedule = "interleaved";
  EXPECT_TRUE(refused(Framework::kDeepSpeed, p));  // a schedule DeepSpeed lacks
  p = make_plan(4, 1, 1, 16, 8, 1, 3, Recompute::kNone, 1, 512, "1f1b");
  p.etp = 2;
  EXPECT_TRUE(refused(Framework::kTorchtitan, p));  // expert TP not in {1, tp}
  p.etp = 4;
  EXPECT_FALSE(refused(Framework::kTorchtitan, p));
  p.zero = 1;
  EXPECT_TRUE(refused(Framework::kTorchtitan, p));  // FSDP2 or nothing
  p = make_plan(8, 4, 1, 8, 1, 1, 1, Recompute::kNone, 1, 512, "zb-h1");
  EXPECT_TRUE(refused(Framework::kMegatron, p));  // a schedule Megatron-LM lacks
  p.schedule = "1f1b";
  p.zero = 2;
  EXPECT_FALSE(refused(Framework::kMegatron, p));  // ZeRO-2: Megatron-FSDP optim_grads
}

// ZeRO-2 and ZeRO-3 under Megatron-LM are Megatron-FSDP with its sharding strategy and the
// checkpoint format it asserts (megatron/training/arguments.py:1169, :3190 @d98e8a6), without
// CUDA_DEVICE_MAX_CONNECTIONS=1, which it refuses (:1166).
TEST(Emitters, MegatronFsdpStrategies) {
  for (int zero : {2, 3}) {
    LaunchCase c{"llama3-8b_64xh100_fsdp",
                 "llama3-8b",
                 "dgx-h100",
                 64,
                 make_plan(8, 1, 1, 8, 1, 1, zero, Recompute::kNone, 1, 512, "1f1b"),
                 8192,
                 {"megatron"}};
    Emitted e = emit_case(c, "megatron");
    auto a = args_map(file(e, "megatron_args.txt")->content);
    EXPECT_EQ(a.count("--use-megatron-fsdp"), 1u);
    EXPECT_EQ(a["--data-parallel-sharding-strategy"],
              zero == 3 ? "optim_grads_params" : "optim_grads");
    EXPECT_EQ(a["--ckpt-format"], "fsdp_dtensor");
    EXPECT_EQ(a.count("--use-distributed-optimizer"), 0u);
    EXPECT_EQ(file(e, "train_megatron.sbatch")->content.find("CUDA_DEVICE_MAX_CONNECTIONS"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// The embedding/loss pipeline split goes to Megatron as its own flags
// (megatron/training/arguments.py: --account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split, store_true; NVIDIA/Megatron-LM@d98e8a6), never with the
// first/last stage layer counts, which Megatron refuses beside them.
TEST(Emitters, MegatronGetsTheEmbeddingAndLossSplitFlags) {
  LaunchCase c{"llama3.1-405b_256xgb200_split",
               "llama3.1-405b",
               "gb200-nvl72",
               256,
               make_plan(4, 16, 1, 4, 1, 8, 1, Recompute::kFull, 1, 1536, "interleaved"),
               8192,
               {"megatron"}};
  c.plan.account_for_embedding = c.plan.account_for_loss = true;
  Emitted e = emit_case(c, "megatron");
  const EmittedFile* list = file(e, "megatron_args.txt");
  ASSERT_NE(list, nullptr);
  const std::string& a = list->content;
  EXPECT_NE(a.find("--account-for-embedding-in-pipeline-split"), std::string::npos);
  EXPECT_NE(a.find("--account-for-loss-in-pipeline-split"), std::string::npos);
  EXPECT_EQ(a.find("--decoder-first-pipeline-num-layers"), std::string::npos);
}

// The two-part split goes to Megatron as --pipeline-model-parallel-layout
// (megatron/training/arguments.py, NVIDIA/Megatron-LM@d98e8a6: stages split by '|', E the
// embedding, t a decoder layer, L the loss; pipeline_parallel_layer_layout.py
// validate_layer_layout: E first, L last, one each, as many t as --num-layers), never beside
// the first/last stage layer counts or --num-virtual-stages-per-pipeline-rank, which
// arguments.py refuses with a layout.
TEST(Emitters, MegatronGetsTheTwoPartSplitAsALayout) {
  LaunchCase c{"llama3-8b_32xh100_split",
               "llama3-8b",
               "dgx-h100",
               32,
               make_plan(8, 4, 1, 1, 1, 1, 0, Recompute::kNone, 1, 64, "1f1b"),
               2048,
               {"megatron"}};
  c.plan.split_stages = 2;
  c.plan.split_layers = 10;  // 10, 10, 6, 6 of Llama 3 8B's 32 layers
  Emitted e = emit_case(c, "megatron");
  const EmittedFile* list = file(e, "megatron_args.txt");
  ASSERT_NE(list, nullptr);
  const std::string& a = list->content;
  const std::string t10(10, 't'), t6(6, 't');
  const std::string layout = "E" + t10 + "|" + t10 + "|" + t6 + "|" + t6 + "L";
  EXPECT_NE(a.find("--pipeline-model-parallel-layout"), std::string::npos) << a;
  EXPECT_NE(a.find(layout), std::string::npos) << a;
  EXPECT_EQ(a.find("--decoder-first-pipeline-num-layers"), std::string::npos);
  EXPECT_EQ(a.find("--num-virtual-stages-per-pipeline-rank"), std::string::npos);
  EXPECT_NE(a.find("--num-layers\n32\n"), std::string::npos) << a;
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// Every format a golden case is not written in refuses it, naming the rule and the framework
// code it comes from (a file@commit or file:line@version).
TEST(Emitters, GoldenRefusalsNameTheirSource) {
  int refusals = 0;
  for (const auto& c : cases())
    for (const std::string& format : emitter_names()) {
      if (std::find(c.formats.begin(), c.formats.end(), format) != c.formats.end()) continue;
      const Emitted e = setup(c);
      const std::string why = find_emitter(format)->refusal(input_of(e));
      EXPECT_NE(why, "") << c.id << " " << format << " is not in the golden set but emits";
      EXPECT_NE(why.find('@'), std::string::npos) << c.id << " " << format << ": " << why;
      ++refusals;
    }
  EXPECT_GE(refusals, 15);
}

// Architecture facts reach Megatron-LM (flags per megatron/training/arguments.py and
// transformer_config.py @d98e8a6; values from each model's HF config.json).
TEST(Emitters, MegatronModelFields) {
  auto args = [](const char* id) {
    return args_map(file(emit_case(case_named(id), "megatron"), "megatron_args.txt")->content);
  };
  auto l = args("llama3.1-405b_1024xh100_cp");
  EXPECT_EQ(l["--position-embedding-type"], "rope");
  EXPECT_EQ(l["--rotary-base"], "500000");
  EXPECT_EQ(l.count("--use-rope-scaling"), 1u);
  EXPECT_EQ(l["--rope-scaling-factor"], "8");
  EXPECT_EQ(l["--norm-epsilon"], "1e-05");
  EXPECT_EQ(l["--attention-dropout"], "0");
  EXPECT_EQ(l["--hidden-dropout"], "0");
  EXPECT_EQ(l["--ckpt-format"], "fsdp_dtensor");
  auto q2 = args("qwen2.5-72b_64xh100");
  EXPECT_EQ(q2.count("--add-qkv-bias"), 1u);
  EXPECT_EQ(q2.count("--qk-layernorm"), 0u);
  EXPECT_EQ(q2["--rotary-base"], "1000000");
  auto q3 = args("qwen3-235b-a22b_256xh100");
  EXPECT_EQ(q3.count("--qk-layernorm"), 1u);
  EXPECT_EQ(q3["--norm-epsilon"], "1e-06");
  EXPECT_EQ(q3.count("--moe-router-pre-softmax"), 0u);  // renormalised top-k: the default
  auto d = args("deepseek-v3_1024xh100");
  EXPECT_EQ(d["--moe-router-score-function"], "sigmoid");
  EXPECT_EQ(d.count("--moe-router-enable-expert-bias"), 1u);
  EXPECT_EQ(d["--moe-router-topk-scaling-factor"], "2.5");
  EXPECT_EQ(d["--moe-router-num-groups"], "8");
  EXPECT_EQ(d["--moe-router-group-topk"], "4");
  EXPECT_EQ(d["--rope-type"], "yarn");
  EXPECT_EQ(d["--rotary-scaling-factor"], "40");
  EXPECT_EQ(d["--mtp-num-layers"], "1");
  // 61 layers on 16 stages with virtual stages 1: first/last counts, not a layout; 61 - 14 x 4
  // = 5, the larger half on the first stage (the last holds the output layer and the loss).
  EXPECT_EQ(d["--decoder-first-pipeline-num-layers"], "3");
  EXPECT_EQ(d["--decoder-last-pipeline-num-layers"], "2");
  // Uneven with virtual stages: the layout, without --num-virtual-stages-per-pipeline-rank
  // (arguments.py:928-939) or first/last counts (transformer_config.py:2305-2317 @d98e8a6).
  auto v = args("llama3.1-405b_1024xh100_uneven_vpp");
  EXPECT_EQ(v.count("--num-virtual-stages-per-pipeline-rank"), 0u);
  EXPECT_EQ(v.count("--decoder-first-pipeline-num-layers"), 0u);
  std::string layout = "Ettt";
  for (int c = 1; c < 31; ++c) layout += "|tttt";
  layout += "|tttL";
  EXPECT_EQ(v["--pipeline-model-parallel-layout"], layout);
  // DeepSeek-V3 on 8 x 4 chunks: Megatron-Bridge's performance recipe's layout for it,
  // 'Et|(tt|)*30mL' (src/megatron/bridge/perf_recipes/deepseek/h100/deepseek_v3.py:48,
  // NVIDIA-NeMo/Megatron-Bridge@067f987), written out in full.
  auto ds = args("deepseek-v3_256xgb200_vpp");
  std::string ds_layout = "Et";
  for (int c = 1; c < 31; ++c) ds_layout += "|tt";
  ds_layout += "|mL";
  EXPECT_EQ(ds["--pipeline-model-parallel-layout"], ds_layout);
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// What each framework's own checks past argument parsing would reject is refused here, with
// the check's source (issue #17 review).
TEST(Emitters, RefusalsBeyondTheFlagTables) {
  auto refusal = [](const char* format, const char* model, const char* profile, int gpus, Plan p,
                    Precision prec = Precision::kBf16) {
    ModelSpec m = load_model(model);
    Cluster c = load_cluster(profile, gpus);
    Workload w;
    w.seq_len = 4096;
    w.global_batch = p.gbs;
    w.precision = prec;
    EmitInput in;
    in.model = &m;
    in.cluster = &c;
    in.work = &w;
    in.plan = &p;
    return find_emitter(format)->refusal(in);
  };
  // torchtitan has no Mixtral: the refusal says no flavor has this MoE architecture, not that a
  // dense flavor of the same shape differs in its vocabulary (a new-user trial).
  Plan tt_moe = make_plan(2, 1, 1, 32, 8, 1, 1, Recompute::kNone, 1, 256, "1f1b");
  tt_moe.sp = true;
  tt_moe.zero = 3;
  const std::string no_flavor = refusal("torchtitan", "mixtral-8x7b", "dgx-h100", 64, tt_moe);
  EXPECT_NE(no_flavor.find("none has this architecture (32 layers, hidden 4096, 32 heads, MoE of "
                           "8 experts, top-2)"),
            std::string::npos)
      << no_flavor;
  EXPECT_EQ(no_flavor.find("differs in vocab"), std::string::npos) << no_flavor;
  Plan moe = make_plan(2, 1, 1, 32, 8, 1, 1, Recompute::kFull, 1, 256, "1f1b");
  moe.ep_comm_overlap = true;
  EXPECT_NE(
      refusal("megatron", "mixtral-8x7b", "dgx-h100", 64, moe).find("transformer_config.py:3021"),
      std::string::npos);
  Plan tpo = make_plan(2, 1, 1, 8, 1, 1, 1, Recompute::kNone, 1, 256, "1f1b");
  tpo.sp = false;
  tpo.tp_comm_overlap = true;
  EXPECT_NE(refusal("megatron", "llama3-8b", "dgx-h100", 16, tpo).find("arguments.py:1441"),
            std::string::npos);
  EXPECT_NE(
      refusal("deepspeed", "llama3-70b", "dgx-h100", 64,
              make_plan(8, 2, 1, 4, 1, 1, 1, Recompute::kNone, 1, 512, "1f1b"), Precision::kFp8)
          .find("gpt_model.py:386-394"),
      std::string::npos);
  Plan block = make_plan(8, 4, 1, 2, 1, 1, 1, Recompute::kFull, 1, 512, "1f1b");
  block.recompute_layers = 2;
  EXPECT_NE(refusal("deepspeed", "llama3-70b", "dgx-h100", 64, block).find("gpt_model.py:446"),
            std::string::npos);
  EXPECT_NE(refusal("torchtitan", "llama3.1-405b", "dgx-h100", 1024,
                    uneven(make_plan(8, 16, 1, 8, 1, 1, 0, Recompute::kFull, 1, 512, "1f1b")))
                .find("parallelize.py:148-151"),
            std::string::npos);
  EXPECT_NE(refusal("torchtitan", "llama3.1-405b", "dgx-h100", 1024,
                    uneven(make_plan(8, 16, 1, 8, 1, 1, 3, Recompute::kSelective, 1, 512, "1f1b")))
                .find("activation_checkpoint.py:109-116"),
            std::string::npos);
  // DeepEP / HybridEP: Megatron's flex dispatcher needs expert TP x EP > 1; Megatron-DeepSpeed has
  // none; dtplan writes no torchtitan dispatcher settings.
  Plan flex = dispatched(make_plan(2, 1, 1, 32, 1, 1, 1, Recompute::kNone, 1, 256, "1f1b"),
                         MoeDispatcher::kHybridEP);
  EXPECT_NE(refusal("megatron", "mixtral-8x7b", "dgx-h100", 64, flex).find("token_dispatcher.py"),
            std::string::npos);
  flex.ep = 8;
  EXPECT_EQ(refusal("megatron", "mixtral-8x7b", "dgx-h100", 64, flex), "");
  EXPECT_NE(refusal("deepspeed", "mixtral-8x7b", "dgx-h100", 64, flex).find("DeepEP"),
            std::string::npos);
  flex.zero = 0;  // torchtitan shards with FSDP2 or not at all
  EXPECT_NE(refusal("torchtitan", "mixtral-8x7b", "dgx-h100", 64, flex).find("DeepEP"),
            std::string::npos);
  // The FP8 recipe: torchtitan v0.2.2 scales tensorwise only.
  EXPECT_NE(refusal("torchtitan", "llama3.1-405b", "dgx-h100", 1024,
                    uneven(make_plan(8, 16, 1, 8, 1, 1, 3, Recompute::kFull, 1, 512, "1f1b")),
                    Precision::kFp8)
                .find("recipe_name"),
            std::string::npos);
}

// A top-1 softmax router (renormalised: weight 1.0) has no Megatron spelling
// (transformer_config.py:2669 @d98e8a6); MLA with plain rope needs --no-rope-fusion
// (transformer_config.py:3345).
TEST(Emitters, RouterAndMlaEdgeCases) {
  ModelSpec m = load_model("mixtral-8x7b");
  m.moe->topk = 1;
  Workload w;
  w.seq_len = 4096;
  w.global_batch = 256;
  EXPECT_NE(megatron_model_args(m, w, MoeDispatcher::kAllToAll)
                .refusal.find("transformer_config.py:2669"),
            std::string::npos);
  m.moe->router.normalize_topk = false;  // pre-softmax: the expert's probability
  EXPECT_EQ(megatron_model_args(m, w, MoeDispatcher::kAllToAll).refusal, "");
  ModelSpec d = load_model("deepseek-v3");
  d.rope.scaling = RopeScaling::kNone;
  const auto a = megatron_model_args(d, w, MoeDispatcher::kAllToAll);
  EXPECT_EQ(a.refusal, "");
  EXPECT_NE(std::find(a.args.begin(), a.args.end(), "--no-rope-fusion"), a.args.end());
  // The flex dispatcher and its backend (transformer_config.py:891-899 @d98e8a6).
  const auto f = megatron_model_args(d, w, MoeDispatcher::kDeepEP);
  const auto type = std::find(f.args.begin(), f.args.end(), "--moe-token-dispatcher-type");
  ASSERT_NE(type, f.args.end());
  EXPECT_EQ(*(type + 1), "flex");
  const auto backend = std::find(f.args.begin(), f.args.end(), "--moe-flex-dispatcher-backend");
  ASSERT_NE(backend, f.args.end());
  EXPECT_EQ(*(backend + 1), "deepep");
}

}  // namespace
}  // namespace dtplan
