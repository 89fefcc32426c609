// SVDQ_* booleans are parsed strictly: 1/0/true/false/yes/no in any case; anything else is an error naming the
// variable (SVDQ_DISABLE_JIT=maybe must not silently mean "JIT on").
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/env.hpp"
#include "svdq/error.hpp"

namespace {

struct EnvVar {
  const char* name;
  EnvVar(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~EnvVar() { unsetenv(name); }
};

TEST(Env, BooleansAcceptTheSixSpellingsInAnyCase) {
  const char* var = "SVDQ_TEST_BOOL";
  for (const char* t : {"1", "true", "TRUE", "Yes", "yes"}) {
    EnvVar e(var, t);
    EXPECT_TRUE(svdq::env::get_bool(var, false)) << t;
  }
  for (const char* f : {"0", "false", "False", "NO", "no"}) {
    EnvVar e(var, f);
    EXPECT_FALSE(svdq::env::get_bool(var, true)) << f;
  }
  unsetenv(var);
  EXPECT_TRUE(svdq::env::get_bool(var, true));
  EXPECT_FALSE(svdq::env::get_bool(var, false));
}

TEST(Env, AnythingElseIsAnErrorNamingTheVariable) {
  const char* var = "SVDQ_DISABLE_JIT";
  for (const char* bad : {"", "maybe", "2", "on", "off", "tru", " 1", "yes please"}) {
    EnvVar e(var, bad);
    try {
      svdq::env::get_bool(var, false);
      FAIL() << "accepted '" << bad << "'";
    } catch (const svdq::Error& err) {
      EXPECT_EQ(err.code(), svdq::ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(err.what()).find("SVDQ_DISABLE_JIT"), std::string::npos) << err.what();
    }
  }
}

}  // namespace

TEST(EnvScopedVar, RestoresThePreviousValueOrAbsence) {
  ::setenv("SVDQ_TEST_SCOPED", "before", 1);
  {
    const svdq::env::ScopedVar v("SVDQ_TEST_SCOPED");
    v.set("inside");
    EXPECT_STREQ(std::getenv("SVDQ_TEST_SCOPED"), "inside");
    v.unset();
    EXPECT_EQ(std::getenv("SVDQ_TEST_SCOPED"), nullptr);
  }
  EXPECT_STREQ(std::getenv("SVDQ_TEST_SCOPED"), "before");
  ::unsetenv("SVDQ_TEST_SCOPED");
  {
    const svdq::env::ScopedVar v("SVDQ_TEST_SCOPED");
    v.set("inside");
  }
  EXPECT_EQ(std::getenv("SVDQ_TEST_SCOPED"), nullptr);
}

TEST(Env, IntegersParseStrictly) {
  const svdq::env::ScopedVar v("SVDQ_TEST_INT");
  v.unset();
  EXPECT_FALSE(svdq::env::get_int("SVDQ_TEST_INT", 0, 10).has_value());
  v.set("7");
  EXPECT_EQ(*svdq::env::get_int("SVDQ_TEST_INT", 0, 10), 7);
  for (const char* bad : {"11", "-1", "3x", " 3", "0x4", "99999999999999999999"}) {
    v.set(bad);
    try {
      (void)svdq::env::get_int("SVDQ_TEST_INT", 0, 10);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const svdq::Error& e) {
      EXPECT_NE(std::string(e.what()).find("SVDQ_TEST_INT"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[0, 10]"), std::string::npos) << e.what();
    }
  }
}
