// The `sudo make demo` workload: a C++ program (PIE, frame pointers, -O2 -g)
// whose hot paths run through inlined functions and templates in the
// executable and through libdemostats.so, so the profile shows every kind of
// frame gsymprof names. Runs for argv[1] seconds (default 10).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "stats.h"

namespace physics {

struct Particle {
  double x, y, vx, vy;
};

template <class T>
inline T reflect(T position, T& velocity, T limit) {
  if (position < 0) {
    velocity = -velocity;
    return -position;
  }
  if (position > limit) {
    velocity = -velocity;
    return 2 * limit - position;
  }
  return position;
}

inline void integrate(Particle& p, double dt) {
  p.vy -= 9.81 * dt;
  p.x = reflect(p.x + p.vx * dt, p.vx, 100.0);
  p.y = reflect(p.y + p.vy * dt, p.vy, 100.0);
}

__attribute__((noinline)) double simulate(std::vector<Particle>& particles, int steps) {
  double energy = 0;
  for (int s = 0; s < steps; ++s) {
    for (Particle& p : particles) integrate(p, 0.001);
    energy = 0;
    for (const Particle& p : particles) energy += 0.5 * (p.vx * p.vx + p.vy * p.vy) + 9.81 * p.y;
    stats::publish({energy, 0});
  }
  return energy;
}

}  // namespace physics

namespace text {

template <unsigned Seed>
struct Fnv {
  static inline uint64_t mix(uint64_t h, uint8_t byte) { return (h ^ byte) * 1099511628211ull; }
};

template <class Hasher>
inline uint64_t hash_bytes(const std::vector<uint8_t>& bytes, size_t begin, size_t end) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = begin; i < end; ++i) h = Hasher::mix(h, bytes[i]);
  return h;
}

template <class Hasher>
__attribute__((noinline)) uint64_t hash_records(const std::vector<uint8_t>& bytes) {
  uint64_t combined = 0;
  for (size_t begin = 0; begin < bytes.size(); begin += 64) {
    combined += hash_bytes<Hasher>(bytes, begin, begin + 64 < bytes.size() ? begin + 64 : bytes.size());
    if ((begin & 0xffff) == 0) stats::publish({static_cast<double>(combined), 0});
  }
  return combined;
}

}  // namespace text

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds));
  std::vector<physics::Particle> particles(2000);
  for (size_t i = 0; i < particles.size(); ++i)
    particles[i] = {double(i % 100), double(i % 37), double(i % 7) - 3, double(i % 5)};
  std::vector<double> samples(1 << 16);
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = std::sin(double(i));
  std::vector<uint8_t> bytes(1 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 131);

  double checksum = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    checksum += physics::simulate(particles, 40);
    checksum += stats::summarize(samples).mean;
    checksum += double(text::hash_records<text::Fnv<1>>(bytes) & 0xff);
  }
  std::printf("checksum %.3f\n", checksum);
  return 0;
}
