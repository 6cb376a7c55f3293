// Trace files: the format, and malformed rows named by line and request.
#include <gtest/gtest.h>

#include "inferlab/sim/error.h"
#include "inferlab/sim/trace.h"

namespace inferlab {
namespace {

void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_trace_csv(text, "t.csv");
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Trace, GeneratedTraceRoundTripsThroughCsv) {
  TraceSpec s;
  s.requests = 200;
  s.rate = 3.5;
  const auto a = generate_trace(s);
  const auto b = parse_trace_csv(trace_csv(a), "mem");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival, b[i].arrival);
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].output, b[i].output);
    EXPECT_EQ(b[i].id, int64_t(i));
  }
}

// max_tokens 0: the lognormal tail is kept (a server then rejects what is too long); a bound clips
// only the requests past it, from the same draws.
TEST(Trace, GeneratedLengthsAreClippedOnlyWhenAsked) {
  TraceSpec s;
  s.requests = 3000;
  s.max_tokens = 0;
  const auto free = generate_trace(s);
  s.max_tokens = 2048;
  const auto clipped = generate_trace(s);
  int longer = 0;
  for (std::size_t i = 0; i < free.size(); ++i) {
    EXPECT_LE(clipped[i].prompt + clipped[i].output, 2048);
    if (free[i].prompt + free[i].output > 2048)
      ++longer;
    else
      EXPECT_EQ(free[i].prompt + free[i].output, clipped[i].prompt + clipped[i].output);
    EXPECT_EQ(free[i].arrival, clipped[i].arrival);
  }
  EXPECT_GT(longer, 0);
  s.max_tokens = -1;
  EXPECT_THROW(generate_trace(s), Error);
}

TEST(Trace, ColumnsByNameInAnyOrderExtraColumnsIgnored) {
  const auto t = parse_trace_csv("user,output_tokens,arrival_s,prompt_tokens\nx,5,0.5,12\ny,7,0.5,3\n", "t.csv");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].prompt, 3);
  EXPECT_EQ(t[1].output, 7);
  EXPECT_DOUBLE_EQ(t[1].arrival, 0.5);
}

TEST(Trace, MalformedRowsNameTheRow) {
  const std::string h = "arrival_s,prompt_tokens,output_tokens\n";
  expect_error(h + "0,10,5\n1.0,20\n", "t.csv:3 (request 1): missing field 'output_tokens'");
  expect_error(h + "0,10,5\n1.0,,4\n", "t.csv:3 (request 1): missing field 'prompt_tokens'");
  expect_error(h + "0,10,5\n1,-3,4\n", "t.csv:3 (request 1): field 'prompt_tokens' must be positive, got -3");
  expect_error(h + "0,10,0\n", "t.csv:2 (request 0): field 'output_tokens' must be positive");
  expect_error(h + "0,10,5\n2,10,5\n1,10,5\n", "t.csv:4 (request 2): arrival_s 1 is before the previous row's");
  expect_error(h + "0,ten,5\n", "must be an integer, got 'ten'");
  expect_error(h + "soon,10,5\n", "'arrival_s' must be a number");
  expect_error(h + "-1,10,5\n", "must not be negative");
  expect_error("arrival_s,prompt_tokens\n0,1\n", "no column 'output_tokens'");
  expect_error(h, "no requests");
  expect_error("", "empty trace");
  EXPECT_THROW(read_trace_csv("/nonexistent/trace.csv"), Error);
}

}  // namespace
}  // namespace inferlab
