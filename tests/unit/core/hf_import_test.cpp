// import-hf reproduces the zoo specs from Hugging Face config.json fixtures (values per
// CONVENTIONS.md §9), and refuses what it cannot represent.
#include "core/hf_import.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/catalog.h"
#include "core/error.h"

namespace dtplan {
namespace {

std::string fixture(const std::string& name) {
  return std::string(DTPLAN_TEST_DATA_DIR) + "/tests/fixtures/hf/" + name;
}

class HfFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(HfFixture, ReproducesZooSpec) {
  const std::string stem = GetParam();
  ModelSpec imported = import_hf_config(fixture(stem + ".json"), stem);
  ModelSpec zoo = load_model(stem);
  EXPECT_TRUE(imported.same_architecture(zoo)) << "imported:\n"
                                               << model_to_yaml(imported) << "zoo:\n"
                                               << model_to_yaml(zoo);
  EXPECT_EQ(count_params(imported).total(), count_params(zoo).total());
  EXPECT_EQ(imported.name, stem);
}

INSTANTIATE_TEST_SUITE_P(Zoo, HfFixture,
                         // mixtral-8x22b is not here: the zoo carries the Instruct model's
                         // vocabulary (32768), the fixture the base model's (32000).
                         ::testing::Values("llama3.1-405b", "mixtral-8x7b", "deepseek-v3",
                                           "qwen3-235b-a22b", "qwen2.5-72b"),
                         [](const auto& param_info) {
                           std::string s = param_info.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// Expectation: import-hf counts every parameter of the checkpoint: the published safetensors
// index totals (metadata.total_size / 2 for these BF16 checkpoints; DeepSeek-V3's main model
// derived from its mixed-precision index), as tests/fixtures/hf/SOURCES.md records them with the
// model cards' rounded figures. Exact equality: Q/K/V biases (Qwen2.5, 819,200 of 72.7B), Qwen3's
// q/k norms (9,216 of 8.2B) and DeepSeek-V3's router score bias (14,848 of 671B) all count.
struct PublishedCount {
  const char* fixture;
  int64_t total;
  int64_t active;  // 0: dense
};

class HfCounts : public ::testing::TestWithParam<PublishedCount> {};

TEST_P(HfCounts, EqualThePublishedCheckpointTotals) {
  const PublishedCount& p = GetParam();
  const ParamCounts c = count_params(import_hf_config(fixture(std::string(p.fixture) + ".json")));
  EXPECT_EQ(c.total(), p.total) << p.fixture;
  EXPECT_EQ(c.active(), p.active > 0 ? p.active : p.total) << p.fixture;
}

INSTANTIATE_TEST_SUITE_P(
    Published, HfCounts,
    ::testing::Values(PublishedCount{"llama3.1-8b", 8'030'261'248, 0},
                      PublishedCount{"llama3.1-70b", 70'553'706'496, 0},
                      PublishedCount{"llama3.1-405b", 405'853'388'800, 0},
                      // Active: 12.9B and 39B published (Mistral AI), rounded.
                      PublishedCount{"mixtral-8x7b", 46'702'792'704, 12'879'925'248},
                      PublishedCount{"mixtral-8x22b", 140'620'634'112, 39'152'031'744},
                      PublishedCount{"qwen2.5-72b", 72'706'203'648, 0},
                      PublishedCount{"qwen3-8b", 8'190'735'360, 0},
                      // 22B active published (model card), rounded.
                      PublishedCount{"qwen3-235b-a22b", 235'093'634'560, 22'190'763'520},
                      // 2.4B active published; our 2.66B counts embedding and head (see
                      // SOURCES.md: no convention reproduces DeepSeek's active figures exactly).
                      PublishedCount{"deepseek-v2-lite", 15'706'484'224, 2'661'150'208},
                      // Main model without the 11.6B MTP module; 37B active published, rounded.
                      PublishedCount{"deepseek-v3", 671'026'419'200, 37'552'282'624 + 14'848}),
    [](const auto& param_info) {
      std::string s = param_info.param.fixture;
      for (char& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

std::string write_temp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "dtplan_hf_test";
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

// DeepSeek-V3's config.json carries its FP8 checkpoint format (quantization_config, the HF
// repository's file, tests/fixtures/hf/SOURCES.md): the import says it does not carry it over;
// a BF16 checkpoint's config has none and gets no note.
TEST(HfImport, NotesAQuantizedCheckpoint) {
  std::vector<std::string> notes;
  import_hf_config(fixture("deepseek-v3.json"), "deepseek-v3", &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("quantization_config (quant_method 'fp8')"), std::string::npos)
      << notes[0];
  notes.clear();
  import_hf_config(fixture("llama3.1-8b.json"), "llama3.1-8b", &notes);
  EXPECT_TRUE(notes.empty());
}

TEST(HfImport, UnknownArchitectureListsMissingFields) {
  std::string p = write_temp("gpt2.json", R"({"model_type": "gpt2", "n_embd": 768,
  "n_layer": 12, "n_head": 12, "vocab_size": 50257})");
  try {
    import_hf_config(p);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("gpt2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
    EXPECT_NE(msg.find("num_hidden_layers"), std::string::npos) << msg;
    EXPECT_NE(msg.find(":1:1"), std::string::npos) << msg;
  }
}

TEST(HfImport, WrongTypeNamesLineAndColumn) {
  std::string p = write_temp("bad_type.json",
                             "{\n  \"model_type\": \"llama\",\n  \"hidden_size\": \"big\",\n"
                             "  \"num_hidden_layers\": 2, \"num_attention_heads\": 2,\n"
                             "  \"intermediate_size\": 8, \"vocab_size\": 10,\n"
                             "  \"max_position_embeddings\": 16\n}\n");
  try {
    import_hf_config(p);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.location().line, 3);
    EXPECT_EQ(e.location().column, 18);
    EXPECT_EQ(e.field(), "hidden_size");
  }
}

TEST(HfImport, NameDefaultsToFolderOfConfigJson) {
  auto dir = std::filesystem::temp_directory_path() / "dtplan_hf_test" / "tiny-llama";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json")
      << R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
            "num_key_value_heads":2,"intermediate_size":128,"vocab_size":100,
            "max_position_embeddings":256})";
  ModelSpec m = import_hf_config((dir / "config.json").string());
  EXPECT_EQ(m.name, "tiny-llama");
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_FALSE(m.tied_embeddings);
}

// Expectation: transformers' rope type "default" is unscaled rotary (modeling_rope_utils.py);
// a Qwen2 config gets its Q/K/V biases and no q/k norm, a Qwen3 one the reverse (the modeling
// files, not config fields, decide both).
TEST(HfImport, RopeDefaultAndQwenAttentionFlavours) {
  const std::string base = R"("hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
      "num_key_value_heads":2,"intermediate_size":128,"vocab_size":100,
      "max_position_embeddings":256)";
  ModelSpec d = import_hf_config(write_temp(
      "rope_default.json",
      "{\"model_type\":\"llama\"," + base + R"(,"rope_scaling":{"rope_type":"default"}})"));
  EXPECT_EQ(d.rope.scaling, RopeScaling::kNone);
  ModelSpec q2 =
      import_hf_config(write_temp("qwen2.json", "{\"model_type\":\"qwen2\"," + base + "}"));
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.qk_norm);
  ModelSpec q3 =
      import_hf_config(write_temp("qwen3.json", "{\"model_type\":\"qwen3\"," + base + "}"));
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_TRUE(q3.qk_norm);
  // Q/K/V biases: q (4 x 16) + k and v (2 x 16 each) per layer; q/k norms: 2 x head_dim.
  EXPECT_EQ(count_params(q2).total() - count_params(d).total(), 2 * (64 + 2 * 32));
  EXPECT_EQ(count_params(q3).total() - count_params(d).total(), 2 * (2 * 16));
}

// Expectation: config.json is JSON (RFC 8259): Python's json module, which transformers'
// PretrainedConfig reads it with, refuses a trailing comma, a comment and single quotes, which
// yaml-cpp's YAML 1.2 reader accepts. Each exits 2 at its line and column.
TEST(HfImport, RefusesWhatJsonDoesNotAllow) {
  const std::string base = R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,
"num_attention_heads":4,"intermediate_size":128,"vocab_size":100,"max_position_embeddings":256)";
  struct Bad {
    const char* name;
    std::string text;
    int line, col;
  };
  const Bad bad[] = {
      {"trailing_comma.json", base + ",}", 2, 96},
      {"comment.json", base + "\n# a comment\n}", 3, 1},
      {"single_quote.json", base + ",'torch_dtype':'bfloat16'}", 2, 96},
  };
  for (const Bad& b : bad) {
    try {
      import_hf_config(write_temp(b.name, b.text));
      ADD_FAILURE() << b.name << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.location().line, b.line) << b.name << ": " << e.what();
      EXPECT_EQ(e.location().column, b.col) << b.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
    }
  }
  // The same text without the offence is read.
  EXPECT_EQ(import_hf_config(write_temp("strict_ok.json", base + "}")).layers, 2);
}

}  // namespace
}  // namespace dtplan
