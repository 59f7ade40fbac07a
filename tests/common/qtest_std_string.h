#pragma once
// QCOMPARE on std::string shows both sides when they differ.
#include <QtTest>

#include <string>

namespace QTest {
template <>
inline char* toString(const std::string& s) {
    return qstrdup(s.c_str());
}
}  // namespace QTest
