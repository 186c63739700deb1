// A call that must fail with a UserError whose message names every fragment (where, what
// was expected, what was found): EXPECT_TRUE(throwsUserError([&] { ... }, {...})).
// Shared by the reader tests of the stages.
#pragma once
#include <functional>
#include <gtest/gtest.h>
#include <initializer_list>
#include <string>

#include "compiler/support/Error.h"

namespace nnc::test {

inline ::testing::AssertionResult throwsUserError(const std::function<void()>& f,
                                                  std::initializer_list<std::string> fragments) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string what = e.what();
    for (const std::string& fragment : fragments)
      if (what.find(fragment) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << fragment << "\": " << what;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "expected a UserError; the call returned";
}

} // namespace nnc::test
