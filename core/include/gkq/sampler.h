// Sampler: picks the next token from logits as llama2.c's run.c sample() does. Temperature 0 is greedy
// (argmax, the lowest id among equal maxima); otherwise softmax(logits / temperature) and one draw with run.c's
// xorshift generator, from the whole distribution (top_p <= 0 or >= 1) or from the nucleus: the most likely
// tokens, in decreasing probability, up to and including the first whose cumulative probability exceeds top_p.
// Deterministic: the same seed and logits give the same tokens everywhere. Where run.c's qsort leaves the
// order of equal probabilities unspecified, they are ordered by token id.
#pragma once

#include <cstdint>
#include <vector>

namespace gkq {

struct SamplerOptions {
    float temperature = 1.0f;
    float top_p = 0.9f;
    uint64_t seed = 1;  // xorshift state; 0 (which would stall the generator) is replaced by 1
};

class Sampler {
public:
    Sampler(int32_t vocab_size, const SamplerOptions& options);

    // The next token for `logits` (vocab_size floats, left unchanged).
    int32_t sample(const float* logits);

    const SamplerOptions& options() const { return m_options; }

    // run.c's generator: xorshift64 (12, 25, 27) and the upper 32 bits of state * 0x2545F4914F6CDD1D.
    uint32_t random_u32();
    float random_f32();  // in [0, 1): (random_u32() >> 8) / 2^24

    // run.c's three samplers over a probability vector. `coin` is in [0, 1).
    static int32_t sample_argmax(const float* values, int32_t n);
    static int32_t sample_mult(const float* probabilities, int32_t n, float coin);
    static int32_t sample_topp(const float* probabilities, int32_t n, float top_p, float coin);

private:
    int32_t m_vocab_size = 0;
    SamplerOptions m_options;
    uint64_t m_state = 1;
    std::vector<float> m_probs;  // (vocab_size)
};

// run.c's softmax in place: exp(x - max) / sum, summed in index order.
void softmax_in_place(float* x, int64_t n);

}  // namespace gkq
