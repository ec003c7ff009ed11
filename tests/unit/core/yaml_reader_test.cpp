// The strict YAML reader: positions are 1-based and point at the defect.
#include "core/yaml_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/model_spec.h"

namespace dtplan {
namespace {

const char* kGood =
    "name: tiny\n"
    "source: test\n"
    "layers: 2\n"
    "hidden: 64\n"
    "heads: 4\n"
    "ffn_hidden: 256\n"
    "ffn_act: gelu\n"
    "vocab: 100\n"
    "tied_embeddings: true\n"
    "max_seq: 128\n";

InputError parse_error(const std::string& text) {
  try {
    parse_model_yaml(text, "t.yaml");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return InputError({}, "", "");
}

TEST(YamlReader, GoodModelParses) {
  ModelSpec m = parse_model_yaml(kGood, "t.yaml");
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_EQ(m.kv_heads, 4);
}

TEST(YamlReader, UnknownKeySuggestsNearest) {
  InputError e = parse_error(std::string(kGood) + "hiden: 3\n");
  EXPECT_EQ(e.location().line, 11);
  EXPECT_EQ(e.location().column, 1);
  EXPECT_NE(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
}

TEST(YamlReader, WrongTypePointsAtValue) {
  std::string t = kGood;
  t.replace(t.find("layers: 2"), 9, "layers: two");
  InputError e = parse_error(t);
  EXPECT_EQ(e.location().line, 3);
  EXPECT_EQ(e.location().column, 9);
  EXPECT_EQ(e.field(), "layers");
}

TEST(YamlReader, MissingFieldPointsAtParent) {
  std::string t = kGood;
  t.erase(t.find("vocab: 100\n"), 11);
  InputError e = parse_error(t);
  EXPECT_EQ(e.location().line, 1);
  EXPECT_EQ(e.field(), "vocab");
}

TEST(YamlReader, DuplicateKeyRefused) {
  InputError e = parse_error(std::string(kGood) + "layers: 3\n");
  EXPECT_EQ(e.location().line, 11);
  EXPECT_NE(std::string(e.what()).find("duplicate"), std::string::npos);
}

TEST(YamlReader, NonPositiveRefused) {
  std::string t = kGood;
  t.replace(t.find("heads: 4"), 8, "heads: 0");
  EXPECT_EQ(parse_error(t).field(), "heads");
}

TEST(YamlReader, SyntaxErrorHasPosition) {
  InputError e = parse_error("name: [unclosed\nsource: x\n");
  EXPECT_GT(e.location().line, 0);
  EXPECT_NE(std::string(e.what()).find("syntax error"), std::string::npos);
}

// A lone ',' made yaml-cpp 0.7's LoadAll loop for ever, allocating (jbeder/yaml-cpp#1040):
// load_yaml_file probes the documents first and answers with a syntax error at the token.
TEST(YamlReader, LoneCommaIsASyntaxErrorNotAHang) {
  const auto path = std::filesystem::temp_directory_path() / "dtplan_lone_comma.yaml";
  for (const char* text : {",\n", ",", "a: 1\n,\n", "- x\n,\n", "[1],\n"}) {
    std::ofstream(path) << text;
    try {
      load_yaml_file(path.string());
      ADD_FAILURE() << "no error for " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
      EXPECT_GT(e.location().line, 0) << e.what();
    }
  }
  // Two documents are still named as such.
  std::ofstream(path) << "a: 1\n---\nb: 2\n";
  try {
    load_yaml_file(path.string());
    ADD_FAILURE() << "two documents accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than one YAML document"), std::string::npos);
  }
  std::filesystem::remove(path);
}

// Names reach the JSON outputs, which hold UTF-8 only: well-formed UTF-8 of every length
// loads, anything else is refused where it stands (RFC 3629).
TEST(YamlReader, Utf8IsCheckedWhereItStands) {
  const auto path = std::filesystem::temp_directory_path() / "dtplan_utf8.yaml";
  std::ofstream(path) << "name: \"caf\xc3\xa9 \xe2\x80\x93 \xe5\x90\x8d \xf0\x9f\x9a\x80\"\n";
  EXPECT_EQ(load_yaml_file(path.string())["name"].as<std::string>(),
            "caf\xc3\xa9 \xe2\x80\x93 \xe5\x90\x8d \xf0\x9f\x9a\x80");
  struct Bad {
    const char* text;
    int column;
  };
  for (const Bad& b : {Bad{"a: \"\xff\"\n", 5}, Bad{"a: \xc0\xaf\n", 4},  // overlong '/'
                       Bad{"a: \xed\xa0\x80\n", 4},                       // surrogate
                       Bad{"a: \xf4\x90\x80\x80\n", 4},                   // above U+10FFFF
                       Bad{"a: 1\nb: \xe2\x80\n", 4}}) {                  // cut short
    std::ofstream(path, std::ios::binary) << b.text;
    try {
      load_yaml_file(path.string());
      ADD_FAILURE() << "accepted " << b.text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("invalid UTF-8"), std::string::npos) << e.what();
      EXPECT_EQ(e.location().column, b.column) << e.what();
    }
  }
  std::filesystem::remove(path);
}

TEST(YamlReader, NestedUnknownKeyHasDottedPath) {
  InputError e = parse_error(std::string(kGood) + "moe:\n  expert: 8\n  topk: 2\n");
  EXPECT_EQ(e.field(), "moe.expert");  // a misspelled required key is named as such
  EXPECT_NE(std::string(e.what()).find("did you mean 'experts'"), std::string::npos);
  InputError e2 = parse_error(std::string(kGood) + "moe:\n  experts: 8\n  topk: 2\n  expert: 3\n");
  EXPECT_EQ(e2.field(), "moe.expert");
  EXPECT_NE(std::string(e2.what()).find("did you mean"), std::string::npos);
}

}  // namespace
}  // namespace dtplan
