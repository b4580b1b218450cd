// A knot as the weights of a Transformer: records found by (role, layer), decoded one at a time; LowRank records
// keep their factors so the transformer can choose the factored product.
#include "gkq/knot_model.h"

#include "gkq/codec.h"
#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/naming.h"

#include <cstdio>
#include <cstring>

namespace gkq {

namespace {

int64_t find_record(const KnotFile& knot, TensorRole role, int32_t layer) {
    const std::vector<KnotEntry>& entries = knot.entries();
    for (size_t i = 0; i < entries.size(); ++i)
        if (entries[i].role == role && entries[i].layer == layer) return static_cast<int64_t>(i);
    return -1;
}

}  // namespace

WeightSource knot_weight_source(const KnotFile& knot) {
    return [&knot](TensorRole role, int32_t layer) -> Result<WeightData> {
        const int64_t i = find_record(knot, role, layer);
        if (i < 0)
            return error(StatusCode::NotFound, knot.path() + ": no record for " + gguf_name(role, layer) + " (role " +
                                                   std::string(role_name(role)) + ")");
        auto rec = knot.read(static_cast<size_t>(i));
        if (!rec) return rec.status();
        const std::string label = knot.path() + ": record " + std::to_string(i) + " '" + rec->name + "'";
        WeightData w;
        // Only a pure low-rank record can run factored: the transformer has no "factors + residual" product.
        if (rec->method == Method::LowRank && rec->shape.size() == 2) {
            auto f = decode_lowrank_factors(*rec);
            if (!f) return f.status().with_context(label);
            w.rank = f->rank;
            w.u = std::move(f->u);
            w.s = std::move(f->s);
            w.v = std::move(f->v);
            return w;
        }
        auto dense = decode_tensor(*rec);
        if (!dense) return dense.status().with_context(label);
        w.dense = std::move(*dense);
        return w;
    };
}

Result<Transformer> load_transformer(const KnotFile& knot, const TransformerOptions& options) {
    const KnotHeader& h = knot.header();
    if (h.shard_count != 1)
        return error(StatusCode::Unsupported, knot.path() + ": holds shard " + std::to_string(h.shard_index) + " of " +
                                                  std::to_string(h.shard_count) +
                                                  "; merge the shards (gkq merge) to run the model");
    ModelConfig config = h.config;
    // As for model files: a separate classifier record decides, whatever the stored flag says.
    config.shared_classifier = find_record(knot, TensorRole::Output, -1) < 0;
    if (Status s = check_model(knot.path(), config, knot.entries()); !s) return s;
    auto t = Transformer::load(config, knot_weight_source(knot), options);
    if (!t) return t.status().with_context(knot.path());
    return t;
}

bool is_knot_path(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    unsigned char head[8] = {};
    const size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b) return true;  // .knot.gz: models are never gzipped
    return n == 8 && std::memcmp(head, "GKQKNOT\0", 8) == 0;
}

Result<LoadedModel> load_model(const std::string& path, const TransformerOptions& options) {
    LoadedModel m;
    m.path = path;
    if (is_knot_path(path)) {
        auto knot = KnotFile::open(path);
        if (!knot) return knot.status();
        auto t = load_transformer(*knot, options);
        if (!t) return t.status();
        m.from_knot = true;
        m.config = t->config();
        m.vocab = knot->header().vocab;
        m.transformer = std::make_unique<Transformer>(std::move(*t));
        return m;
    }
    auto file = ModelFile::open(path);
    if (!file) return file.status();
    auto t = Transformer::load(*file, options);
    if (!t) return t.status();
    m.config = t->config();
    m.vocab = file->vocabulary();
    m.transformer = std::make_unique<Transformer>(std::move(*t));
    return m;
}

}  // namespace gkq
