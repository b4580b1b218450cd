// The gkq subcommands. Each takes the argv after the subcommand name's position (argv[0] is the
// subcommand) and returns a process exit code (see args.h).
#pragma once

namespace gkq::cli {

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
