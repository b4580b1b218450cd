// The gkq subcommands. Each takes the argv after the subcommand name's position (argv[0] is the
// subcommand) and returns a process exit code (see args.h).
#pragma once

namespace gkq::cli {

// The help of --activations, one text for every command that runs a model: commands that run a model for its output
// (generate, serve) default to q8, those that measure it (eval, logits) to f32.
inline constexpr const char* kActivationsQ8Help =
    "how Q4_0 and Q8_0 weights multiply: q8 (default) quantizes the activations to Q8_0 blocks as llama.cpp "
    "does (integer dot products); f32 keeps them float32 (slower; logits equal the float32 model's)";
inline constexpr const char* kActivationsF32Help =
    "how Q4_0 and Q8_0 weights multiply: f32 (default) keeps the activations float32, so only the weights' "
    "compression is measured; q8 quantizes them to Q8_0 blocks as llama.cpp and gkq generate do";

int cmd_inspect(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_analyze(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_reconstruct(int argc, char** argv);
int cmd_export(int argc, char** argv);
int cmd_merge(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_profile(int argc, char** argv);
int cmd_imatrix(int argc, char** argv);
int cmd_rknot(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_synth(int argc, char** argv);

}  // namespace gkq::cli
