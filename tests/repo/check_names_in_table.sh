#!/usr/bin/env bash
# File-format names live in the architecture table only (core/src/formats/arch_table.cpp, see gkq/arch.h): no
# other tracked source under core, kernels, wasm, app or ui spells an HF or GGUF tensor name pattern, a
# hyperparameter key of config.json or GGUF, an HF class name, or one of our role names (those equal GGUF's
# tensor names, so they live in the same file). Comments are not checked: they may show example names.
# Not checked because they are also our own identifiers: `vocab_size`, `rope_theta`, `context_length` outside a
# GGUF key, `token_embd` and `output` as words in messages, "llama" (also the SPM tokenizer's name).
# Usage: check_names_in_table.sh REPO_ROOT. Prints every offending file:line; exit 1 if there is one.
set -euo pipefail
root="$1"
table="core/src/formats/arch_table.cpp"

patterns=(
    # HF tensor names
    'self_attn' '\b(q|k|v|o|qkv|gate|up|down|gate_up)_proj\b' 'embed_tokens' 'lm_head' 'model\.layers\.'
    'input_layernorm' 'post_attention_layernorm' 'model\.norm\.'
    # GGUF tensor names and our role names
    'blk\.' 'token_embd\.' '\boutput_norm\b' 'output\.weight' '\battn_(q|k|v|o|qkv|output|norm)\b'
    '\bffn_(gate|up|down|norm)\b'
    # config.json keys and names
    'hidden_size' 'intermediate_size' 'num_hidden_layers' 'num_attention_heads' 'num_key_value_heads'
    'max_position_embeddings' 'rms_norm_eps' 'tie_word_embeddings' '"(model_type|architectures|hidden_act)"'
    'ForCausalLM' '"mistral"'
    # GGUF keys
    'general\.architecture' 'embedding_length' 'feed_forward_length' 'block_count' 'attention\.head_count'
    'layer_norm_rms_epsilon' 'rope\.freq_base' '"[A-Za-z0-9_.%]*\.(context_length|vocab_size)"'
)
regex=$(IFS='|'; echo "${patterns[*]}")

# "file:line<TAB>code" for every line of the given files, with // and /* */ comments removed.
strip_comments() {
    awk 'FNR == 1 { inblock = 0 }
    {
        line = $0; out = ""
        while (length(line) > 0) {
            if (inblock) {
                i = index(line, "*/")
                if (i == 0) { line = ""; break }
                line = substr(line, i + 2); inblock = 0; continue
            }
            i = index(line, "/*"); j = index(line, "//")
            if (j > 0 && (i == 0 || j < i)) { out = out substr(line, 1, j - 1); line = ""; break }
            if (i > 0) { out = out substr(line, 1, i - 1); line = substr(line, i + 2); inblock = 1; continue }
            out = out line; line = ""
        }
        print FILENAME ":" FNR "\t" out
    }' "$@"
}

cd "$root"
status=0
if [ -f "$table" ]; then
    # The patterns must find the table's own names, or they test nothing.
    for p in 'self_attn' 'blk\.' 'hidden_size' 'embedding_length' '\battn_(q|k|v|o|qkv|output|norm)\b'; do
        strip_comments "$table" | cut -f2- | grep -E "$p" >/dev/null || { echo "pattern '$p' finds nothing in $table"; status=1; }
    done
else
    echo "$table is missing"
    status=1
fi

mapfile -t files < <(git ls-files core kernels wasm app ui | grep -E '\.(c|cc|cpp|h|hpp|inc|cu|cuh|js|mjs|ts|mts)$' |
    grep -vxF "$table")
hits=$(strip_comments "${files[@]}" | grep -E $'\t.*('"$regex"')' || true)
if [ -n "$hits" ]; then
    echo "file-format names outside $table (move them into the architecture table):"
    printf '%s\n' "$hits" | sed 's/\t/: /'
    echo "$(printf '%s\n' "$hits" | wc -l) line(s)"
    exit 1
fi
[ "$status" -eq 0 ] && echo "no file-format names outside $table (${#files[@]} files checked)"
exit "$status"
