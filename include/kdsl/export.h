// KDSL_API marks what the shared library libkdsl.so exports. Everything else in it (the compiler,
// the cache, spdlog and fmt instantiations) is built with hidden visibility, so it can neither
// clash with an application's own copies of those libraries nor be linked against by accident.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define KDSL_API __attribute__((visibility("default")))
#else
#define KDSL_API
#endif
