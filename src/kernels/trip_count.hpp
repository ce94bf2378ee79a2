#pragma once
// Loop iteration counts of the kernels in C simulation: FPGALLM_TRIP("id") in the body of a
// pipelined loop counts one iteration (one II slot issued) under the loop id "id", the name
// arch::unit_work's schedule gives the kernel loop it describes (arch::Loop::kernel_loop).
// tests/unit_loops/test_unit_loops.cpp runs each instruction through the kernels with counting
// on and compares the counts with the schedule.
//
// Under __SYNTHESIS__ (Vitis HLS defines it while synthesizing) the macro is empty and this
// file declares nothing. In C simulation counting is off until trip_counting(true): the
// accelerator backend runs the kernels on several host threads and pays one predictable
// branch per iteration, no shared write.
#ifdef __SYNTHESIS__
#define FPGALLM_TRIP(id) ((void)0)
#else
#include <cstring>

namespace kernels {

struct TripCount {
  const char* id;
  long long iterations;
};

// Every loop id counted since the last trip_reset(), in order of first use.
struct TripCounts {
  static const int kCapacity = 64;
  TripCount entry[kCapacity];
  int used;
  bool on;
  long long unregistered;  // iterations of ids past kCapacity (the harness requires none)
};

inline TripCounts& trip_counts() {
  static TripCounts counts = {};
  return counts;
}

inline void trip_counting(bool on) { trip_counts().on = on; }

inline void trip_reset() {
  TripCounts& c = trip_counts();
  for (int i = 0; i < c.used; ++i) c.entry[i].iterations = 0;
  c.unregistered = 0;
}

// The counter of loop `id` (registered on first use; ids are string literals).
inline long long& trip_counter(const char* id) {
  TripCounts& c = trip_counts();
  for (int i = 0; i < c.used; ++i)
    if (std::strcmp(c.entry[i].id, id) == 0) return c.entry[i].iterations;
  if (c.used == TripCounts::kCapacity) return c.unregistered;
  c.entry[c.used].id = id;
  c.entry[c.used].iterations = 0;
  return c.entry[c.used++].iterations;
}

inline void trip_count(const char* id) {
  if (trip_counts().on) ++trip_counter(id);
}

}  // namespace kernels

#define FPGALLM_TRIP(id) ::kernels::trip_count(id)
#endif
