#include <gtest/gtest.h>

#include "inferlab/experiments/spec.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_spec(yaml, "s.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Spec, PointsAreCasesCrossedWithTheSweepInOrder) {
  const Spec s = parse_spec(R"(
name: t
scenario: model
fixed: {model: llama-2-7b}
cases:
  - {phase: decode, batch: 1}
  - {phase: prefill, batch: 2}
sweep:
  hardware: [a, b]
  context: [1, 2, 3]
)",
                            "s.yaml");
  const auto pts = s.points();
  ASSERT_EQ(pts.size(), 2u * 2u * 3u);
  EXPECT_EQ(pts[0].params.at("phase"), "decode");
  EXPECT_EQ(pts[0].params.at("hardware"), "a");
  EXPECT_EQ(pts[0].params.at("context"), "1");
  EXPECT_EQ(pts[1].params.at("context"), "2");  // the last axis runs fastest
  EXPECT_EQ(pts[3].params.at("hardware"), "b");
  EXPECT_EQ(pts[6].params.at("phase"), "prefill");
  EXPECT_EQ(pts[0].key(), "batch=1;context=1;hardware=a;model=llama-2-7b;phase=decode");
  EXPECT_EQ(s.location("context"), "s.yaml:10");
}

TEST(Spec, NoSweepGivesOnePointPerCase) {
  EXPECT_EQ(parse_spec("scenario: memory\nfixed: {model: x}\n", "s.yaml").points().size(), 1u);
  EXPECT_EQ(parse_spec("scenario: memory\ncases: [{a: 1}, {a: 2}]\n", "s.yaml").points().size(), 2u);
}

TEST(Spec, ACaseWithListsExpandsIntoOnePerValueBeforeTheSweep) {
  const Spec s = parse_spec(R"(
scenario: linear
cases:
  - {n: 4096, k: 4096, format: &f [bf16, int4], m: [1, 2, 4]}
  - {n: 8192, k: 8192, format: fp8, m: 8192}
  - ~
sweep:
  hardware: [a, b]
)",
                            "s.yaml");
  const auto pts = s.points();
  ASSERT_EQ(pts.size(), (2u * 3u + 1u + 1u) * 2u);
  // Within a case the lists run in file order, the last fastest; the sweep axes inside each case.
  EXPECT_EQ(pts[0].key(), "format=bf16;hardware=a;k=4096;m=1;n=4096");
  EXPECT_EQ(pts[1].key(), "format=bf16;hardware=b;k=4096;m=1;n=4096");
  EXPECT_EQ(pts[2].params.at("m"), "2");
  EXPECT_EQ(pts[6].params.at("format"), "int4");
  EXPECT_EQ(pts[6].params.at("m"), "1");
  EXPECT_EQ(pts[12].key(), "format=fp8;hardware=a;k=8192;m=8192;n=8192");
  EXPECT_EQ(pts[14].key(), "hardware=a");
  EXPECT_EQ(s.location("m"), "s.yaml:4");
  EXPECT_NE(error_of("scenario: linear\ncases:\n  - {m: []}\n").find("s.yaml:3: parameter 'm' has no values"),
            std::string::npos);
  EXPECT_NE(error_of("scenario: linear\ncases:\n  - {m: [1, [2]]}\n").find("a value of parameter 'm'"),
            std::string::npos);
  EXPECT_NE(error_of("scenario: linear\ncases:\n  - {m: [1, 2]}\nsweep:\n  m: [3]\n").find("axis 'm'"),
            std::string::npos);
}

TEST(Spec, MalformedYamlNamesFileLineAndColumn) {
  const std::string msg = error_of("scenario: model\nsweep:\n  batch: [1, 2\n  context: [3]\n");
  EXPECT_NE(msg.find("s.yaml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed YAML"), std::string::npos) << msg;
}

TEST(Spec, RejectsStructuralMistakesWithTheirLine) {
  EXPECT_NE(error_of("scenario: model\nswep: {batch: [1]}\n").find("s.yaml:2: unknown key 'swep'"), std::string::npos);
  EXPECT_NE(error_of("fixed: {model: x}\n").find("missing key 'scenario'"), std::string::npos);
  EXPECT_NE(error_of("scenario: model\nfixed: {batch: 1}\nsweep:\n  batch: [1, 2]\n").find("s.yaml:4: axis 'batch'"),
            std::string::npos);
  EXPECT_NE(error_of("scenario: model\nsweep:\n  batch: []\n").find("has no values"), std::string::npos);
  EXPECT_NE(error_of("scenario: model\nfixed: [1, 2]\n").find("must be a mapping"), std::string::npos);
  EXPECT_NE(error_of("scenario: model\nplots:\n  - {name: a}\n").find("needs at least a 'kind'"), std::string::npos);
  EXPECT_NE(error_of("scenario: model\nplots:\n  - {kind: line}\n  - {kind: line}\n").find("two plots"),
            std::string::npos);
  EXPECT_NE(error_of("- a\n- b\n").find("must be a YAML mapping"), std::string::npos);
}

// A repeated key is an error naming both lines, wherever it is (YAML parsers keep one silently).
TEST(Spec, RepeatedKeysAreRefused) {
  EXPECT_EQ(error_of("scenario: model\nfixed:\n  context: 512\n  context: 1024\n"),
            "s.yaml:4: key 'context' appears twice in one mapping (first at s.yaml:3)");
  EXPECT_NE(error_of("scenario: model\nsweep:\n  batch: [1, 2]\n  batch: [4]\n").find("key 'batch' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of("scenario: model\nscenario: memory\n").find("s.yaml:2: key 'scenario' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of("scenario: model\nplots:\n  - {kind: line, x: a, x: b}\n").find("key 'x' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of("scenario: model\ncases:\n  - {batch: 1, batch: 2}\n").find("key 'batch' appears twice"),
            std::string::npos);
}

}  // namespace
}  // namespace inferlab
