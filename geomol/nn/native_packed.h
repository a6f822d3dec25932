// Entry points with their arguments packed as 64-bit words, for geomol_run_ranges (parallel.cpp): every compiled
// function takes 64-bit integers and pointers only, so one array of words can carry a call's arguments.
// GEOMOL_PACKED(f) defines extern "C" int f_packed(const int64_t* words), which calls f(words[0], words[1], ...).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace geomol_native {

template <typename T>
inline T from_word(int64_t word) {
  if constexpr (std::is_pointer_v<T>)
    return reinterpret_cast<T>(static_cast<intptr_t>(word));
  else
    return static_cast<T>(word);
}

template <typename... A, std::size_t... I>
inline int call_unpacked(int (*function)(A...), const int64_t* words, std::index_sequence<I...>) {
  return function(from_word<A>(words[I])...);
}

template <typename... A>
inline int call_packed(int (*function)(A...), const int64_t* words) {
  return call_unpacked(function, words, std::index_sequence_for<A...>{});
}

}  // namespace geomol_native

#define GEOMOL_PACKED(FUNCTION) \
  extern "C" int FUNCTION##_packed(const int64_t* words) { return geomol_native::call_packed(&FUNCTION, words); }
