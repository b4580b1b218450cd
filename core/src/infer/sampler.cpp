// Sampler: run.c's sample(), sample_argmax(), sample_mult(), sample_topp() and its xorshift generator.
#include "gkq/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

// Every float expression rounds as written (run.c's), whatever -march allows: no contraction into fused
// multiply-adds, so logits do not change between builds for different CPUs.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace gkq {

void softmax_in_place(float* x, int64_t n) {
    float max_val = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > max_val) max_val = x[i];
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = std::exp(x[i] - max_val);
        sum += x[i];
    }
    for (int64_t i = 0; i < n; i++) x[i] /= sum;
}

Sampler::Sampler(int32_t vocab_size, const SamplerOptions& options)
    : m_vocab_size(vocab_size),
      m_options(options),
      m_state(options.seed != 0 ? options.seed : 1),
      m_probs(static_cast<size_t>(std::max(vocab_size, 1))) {}

uint32_t Sampler::random_u32() {
    m_state ^= m_state >> 12;
    m_state ^= m_state << 25;
    m_state ^= m_state >> 27;
    return static_cast<uint32_t>((m_state * 0x2545F4914F6CDD1Dull) >> 32);
}

float Sampler::random_f32() {
    return static_cast<float>(random_u32() >> 8) / 16777216.0f;
}

int32_t Sampler::sample_argmax(const float* values, int32_t n) {
    int32_t max_i = 0;
    float max_p = values[0];
    for (int32_t i = 1; i < n; i++)
        if (values[i] > max_p) {
            max_i = i;
            max_p = values[i];
        }
    return max_i;
}

int32_t Sampler::sample_mult(const float* probabilities, int32_t n, float coin) {
    float cdf = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        cdf += probabilities[i];
        if (coin < cdf) return i;
    }
    return n - 1;  // in case of rounding errors
}

int32_t Sampler::sample_topp(const float* probabilities, int32_t n, float top_p, float coin) {
    struct ProbIndex {
        float prob;
        int32_t index;
    };
    // run.c: tokens below (1 - top_p) / (n - 1) cannot be part of the nucleus, so they are not sorted.
    const float cutoff = n > 1 ? (1.0f - top_p) / static_cast<float>(n - 1) : 0.0f;
    std::vector<ProbIndex> candidates;
    candidates.reserve(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; i++)
        if (probabilities[i] >= cutoff) candidates.push_back({probabilities[i], i});
    if (candidates.empty()) return sample_argmax(probabilities, n);
    std::sort(candidates.begin(), candidates.end(), [](const ProbIndex& a, const ProbIndex& b) {
        return a.prob != b.prob ? a.prob > b.prob : a.index < b.index;
    });
    // truncate where the cumulative probability exceeds top_p
    float cumulative_prob = 0.0f;
    size_t last = candidates.size() - 1;
    for (size_t i = 0; i < candidates.size(); i++) {
        cumulative_prob += candidates[i].prob;
        if (cumulative_prob > top_p) {
            last = i;
            break;
        }
    }
    // sample from the truncated list
    const float r = coin * cumulative_prob;
    float cdf = 0.0f;
    for (size_t i = 0; i <= last; i++) {
        cdf += candidates[i].prob;
        if (r < cdf) return candidates[i].index;
    }
    return candidates[last].index;  // in case of rounding errors
}

int32_t Sampler::sample(const float* logits) {
    const int32_t n = m_vocab_size;
    if (m_options.temperature == 0.0f) return sample_argmax(logits, n);
    for (int32_t q = 0; q < n; q++) m_probs[static_cast<size_t>(q)] = logits[q] / m_options.temperature;
    softmax_in_place(m_probs.data(), n);
    const float coin = random_f32();
    if (m_options.top_p <= 0.0f || m_options.top_p >= 1.0f) return sample_mult(m_probs.data(), n, coin);
    return sample_topp(m_probs.data(), n, m_options.top_p, coin);
}

}  // namespace gkq
