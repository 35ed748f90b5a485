#include <ATen/ATen.h>
#include <gtest/gtest.h>
TEST(X, Y) {}
