// Status: the kind of an error survives the trip into an exception, so the tools can exit 2 for
// an invalid argument found deep in the library and 1 for everything else.
#include <gtest/gtest.h>

#include <stdexcept>

#include "recycle/status.h"

using recycle::Status;

TEST(Status, ThrowIfErrorKeepsTheKind) {
  EXPECT_NO_THROW(Status().throw_if_error());
  EXPECT_THROW(Status::invalid_argument("x").throw_if_error(), std::invalid_argument);
  for (const Status& st : {Status::not_found("x"), Status::corruption("x"), Status::io_error("x"),
                           Status::mismatch("x")}) {
    try {
      st.throw_if_error();
      FAIL() << st.to_string();
    } catch (const std::invalid_argument&) {
      FAIL() << "an invalid argument: " << st.to_string();
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), st.to_string());
    }
  }
}
