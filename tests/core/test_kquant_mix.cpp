// llama.cpp's k-quant mixtures as gkq presets (q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k): two tiny llama models built here
// from fixed seeds (k256: rows of 256 and 512 values, whole k-quant blocks, 8 layers so that llama.cpp's
// use_more_bits picks some; k64: rows of 64 and 128, tied embeddings, every k-quant falling back), quantized by gkq
// with each preset, without and with an importance matrix, and exported to GGUF keeping the stored types, must hold
// exactly the tensors llama.cpp's llama_model_quantize writes for the same GGUF: the same type and the same bytes
// for every tensor (tests/data/kquant/MODEL.PRESET[.imatrix].tensors, written by tests/fixtures-tools/quantize_ref.c).
// The knot then runs: its logits stay close to the f32 model's.
//
// `test_kquant_mix --write-models DIR` writes DIR/k256.gguf and DIR/k64.gguf for quantize_ref and exits.
#include "test_support.h"
#include "tiny_model.h"

#include "gkq/codec.h"
#include "gkq/export.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/transformer.h"
#include "gkq/type_traits.h"
#include "gkq/weights.h"
#include "gkq/workflows.h"

#include <QtTest/QtTest>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace gkq;

namespace {

struct MixModel {
    const char* name;
    ModelConfig config;
    uint64_t seed;
};

std::vector<MixModel> mix_models() {
    ModelConfig a;
    a.architecture = "llama";
    a.dim = 256;
    a.hidden_dim = 512;
    a.n_layers = 8;
    a.n_heads = 4;
    a.n_kv_heads = 1;  // n_gqa 4: Q2_K's attn_v rule takes its Q4_K branch
    a.vocab_size = 259;
    a.context_length = 64;
    a.norm_eps = 1e-5;
    a.shared_classifier = false;
    a.rope_style = RopeStyle::Interleaved;
    ModelConfig b = a;
    b.dim = 64;
    b.hidden_dim = 128;
    b.n_layers = 2;
    b.n_kv_heads = 2;
    b.shared_classifier = true;
    return {{"k256", a, 31}, {"k64", b, 32}};
}

const char* const kPresets[] = {"q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"};

// The importance quantize_ref.c gives column j of the 2-D tensor `name` (keep the two equal).
float importance(const std::string& name, int64_t j) {
    return 1.0f + static_cast<float>((37 * j + 11 * static_cast<int64_t>(name.size())) % 17) / 8.0f;
}

uint64_t fnv1a64(std::span<const uint8_t> bytes) {
    uint64_t h = 1469598103934665603ull;
    for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
    return h;
}

std::string write_model(const MixModel& m, const std::string& path) {
    test::TinyModel t = test::make_tiny_model(m.config, m.seed);
    if (Status s = write_gguf(path, m.config, t.tensors, test::byte_vocabulary()); !s)
        qFatal("%s", s.message().c_str());
    return path;
}

// "NAME TYPE BYTES HASH" per tensor, keyed by name.
std::map<std::string, std::string> read_listing(const std::string& path) {
    std::map<std::string, std::string> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const size_t sp = line.find(' ');
        if (sp == std::string::npos) continue;
        std::string rest = line.substr(sp + 1);  // ggml's type names mix cases ("q4_K"); gkq's are lower case
        std::transform(rest.begin(), rest.end(), rest.begin(), [](unsigned char c) { return std::tolower(c); });
        out[line.substr(0, sp)] = rest;
    }
    return out;
}

std::map<std::string, std::string> listing_of(const std::string& gguf) {
    auto f = ModelFile::open(gguf);
    if (!f) qFatal("%s", f.message().c_str());
    std::map<std::string, std::string> out;
    for (size_t i = 0; i < f->n_tensors(); ++i) {
        auto s = f->read_stored(i);
        if (!s) qFatal("%s", s.message().c_str());
        char hash[24];
        std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a64(s->data)));
        out[f->tensor_info(i).name] =
            std::string(type_traits(s->info.dtype).name) + " " + std::to_string(s->data.size()) + " " + hash;
    }
    return out;
}

}  // namespace

class TestKquantMix : public QObject {
    Q_OBJECT

private slots:
    void presetsAreListedWithWhatTheyStore() {
        const std::vector<std::string> names = preset_names();
        for (const char* p : kPresets) {
            QVERIFY2(std::find(names.begin(), names.end(), p) != names.end(), p);
            auto preset = find_preset(p);
            QVERIFY2(static_cast<bool>(preset), p);
            QCOMPARE(preset->llama_mixture, std::string(p));
            QVERIFY2(preset->description.find("llama-quantize") != std::string::npos, p);
            QVERIFY2(preset->description.find("bits per weight") != std::string::npos, p);
        }
    }

    void sameTensorsAsLlamaQuantize_data() {
        QTest::addColumn<int>("model");
        QTest::addColumn<QString>("preset");
        QTest::addColumn<bool>("with_imatrix");
        const auto models = mix_models();
        for (int m = 0; m < static_cast<int>(models.size()); ++m)
            for (const char* p : kPresets)
                for (bool im : {false, true})
                    QTest::newRow(
                        (std::string(models[static_cast<size_t>(m)].name) + "." + p + (im ? ".imatrix" : "")).c_str())
                        << m << QString(p) << im;
    }

    void sameTensorsAsLlamaQuantize() {
        QFETCH(int, model);
        QFETCH(QString, preset);
        QFETCH(bool, with_imatrix);
        const MixModel mm = mix_models()[static_cast<size_t>(model)];
        const std::string suffix = std::string(".") + preset.toStdString() + (with_imatrix ? ".imatrix" : "");
        const std::string fixture = std::string(GKQ_TEST_DATA_DIR) + "/kquant/" + mm.name + suffix + ".tensors";
        const std::map<std::string, std::string> want = read_listing(fixture);
        QVERIFY2(!want.empty(), (fixture + ": missing or empty").c_str());

        test::TempDir dir;
        const std::string gguf = write_model(mm, dir.file("model.gguf"));
        auto file = ModelFile::open(gguf);
        QVERIFY2(static_cast<bool>(file), file.message().c_str());
        QuantizeOptions o;
        o.preset = preset.toStdString();
        o.n_threads = 1;
        if (with_imatrix) {
            o.importance.resize(file->n_tensors());
            for (size_t i = 0; i < file->n_tensors(); ++i) {
                const TensorInfo& t = file->tensor_info(i);
                if (t.n_dims() < 2) continue;
                for (int64_t j = 0; j < t.cols(); ++j) o.importance[i].push_back(importance(t.name, j));
            }
        }
        const std::string knot = dir.file("model.knot");
        auto report = quantize_model(*file, o, knot);
        QVERIFY2(static_cast<bool>(report), report.message().c_str());
        const std::string out = dir.file("out.gguf");
        auto exported = export_gguf(knot, out, ExportOptions{});
        QVERIFY2(static_cast<bool>(exported), exported.message().c_str());

        const std::map<std::string, std::string> got = listing_of(out);
        QCOMPARE(got.size(), want.size());
        int n_quantized = 0;
        for (const auto& [name, line] : want) {
            const auto it = got.find(name);
            QVERIFY2(it != got.end(), (name + ": not in gkq's export").c_str());
            QVERIFY2(it->second == line,
                     (name + ": gkq " + it->second + ", llama-quantize " + line + " (TYPE BYTES FNV1A64)").c_str());
            if (line.rfind("F32 ", 0) != 0) ++n_quantized;
        }
        QVERIFY(n_quantized >= 2 * static_cast<int>(mm.config.n_layers) * 7 / 2);

        // The knot runs in its stored types: its logits stay near the f32 model's (q2_k loses the most).
        auto base = open_weights(gguf);
        auto quant = open_weights(knot);
        QVERIFY(static_cast<bool>(base) && static_cast<bool>(quant));
        auto tb = Transformer::load(**base);
        auto tq = Transformer::load(**quant);
        QVERIFY2(static_cast<bool>(tb) && static_cast<bool>(tq),
                 (static_cast<bool>(tb) ? tq.message() : tb.message()).c_str());
        const std::vector<int32_t> tokens = test::cycle_tokens(mm.config.vocab_size, 8);
        const std::vector<float> lb = test::all_logits(*tb, tokens, true);
        const std::vector<float> lq = test::all_logits(*tq, tokens, true);
        double num = 0, den = 0;
        for (size_t i = 0; i < lb.size(); ++i) {
            num += (lq[i] - lb[i]) * (lq[i] - lb[i]);
            den += lb[i] * lb[i];
        }
        const double rel = std::sqrt(num / den);
        qInfo("%s%s: relative logit error %.4f against f32", mm.name, suffix.c_str(), rel);
        QVERIFY2(rel > 0.0 && rel < 0.5, std::to_string(rel).c_str());
    }

    // --target-bpw: the plan fits the budget, mixes types where the budget lies between two of them, the knot's
    // payload is what the plan counted, and a larger budget never measures a larger total error.
    void targetBpwPlansUnderTheBudget() {
        const MixModel mm = mix_models()[0];
        test::TempDir dir;
        auto file = ModelFile::open(write_model(mm, dir.file("model.gguf")));
        QVERIFY(static_cast<bool>(file));
        std::vector<std::vector<float>> imp(file->n_tensors());
        for (size_t i = 0; i < file->n_tensors(); ++i) {
            const TensorInfo& t = file->tensor_info(i);
            if (t.n_dims() == 2)
                for (int64_t j = 0; j < t.cols(); ++j) imp[i].push_back(importance(t.name, j));
        }
        auto low = plan_target_bpw(*file, 1.0, imp, 1);
        QVERIFY(!low);
        QCOMPARE(low.status().code(), StatusCode::InvalidArgument);
        QVERIFY2(low.message().find("below what the cheapest types need") != std::string::npos, low.message().c_str());

        double last_error = -1.0;
        for (double target : {4.0, 5.0, 6.5}) {
            auto plan = plan_target_bpw(*file, target, imp, 2);
            QVERIFY2(static_cast<bool>(plan), plan.message().c_str());
            QVERIFY(plan->weighted);
            QVERIFY2(plan->planned_bpw <= target && plan->planned_bpw >= plan->lowest_bpw,
                     std::to_string(plan->planned_bpw).c_str());
            QVERIFY2(plan->planned_bpw > target - 0.5, std::to_string(plan->planned_bpw).c_str());  // uses the budget
            std::map<Method, int> used;
            double total_error = 0.0;
            for (const BpwPlanTensor& t : plan->tensors) {
                QVERIFY(!t.candidates.empty());
                for (size_t c = 1; c < t.candidates.size(); ++c)
                    QVERIFY(t.candidates[c].bits_per_weight > t.candidates[c - 1].bits_per_weight);
                if (t.role != TensorRole::TokenEmbd && t.role != TensorRole::Output)
                    QCOMPARE(t.candidates.size(), size_t(6));
                ++used[t.candidates[t.chosen].method];
                total_error += t.candidates[t.chosen].error;
            }
            QVERIFY2(used.size() >= 3, std::to_string(used.size()).c_str());  // a mix, not one type
            if (last_error >= 0.0) QVERIFY(total_error <= last_error);
            last_error = total_error;

            // The knot stores what was planned: its payload bits over every parameter are the plan's.
            QuantizeOptions o;
            o.preset = "q4_k_m";
            o.n_threads = 1;
            o.importance = imp;
            o.per_layer = plan->overrides;
            auto report = quantize_model(*file, o, dir.file("planned.knot"));
            QVERIFY2(static_cast<bool>(report), report.message().c_str());
            double bits = 0.0;
            for (const QuantizedTensor& q : report->tensors) bits += 8.0 * static_cast<double>(q.codec.payload_bytes);
            QCOMPARE(bits / static_cast<double>(report->n_params), plan->planned_bpw);
            for (size_t k = 0; k < plan->tensors.size(); ++k) {
                const BpwPlanTensor& t = plan->tensors[k];
                QCOMPARE(report->tensors[t.source_index].codec.method, t.candidates[t.chosen].method);
            }
        }
    }

    // Of the 4.5-bit types a projection can take, the plan measures both and keeps the one with the smaller error:
    // Q4_K and IQ4_NL on 256-value rows, Q4_0 (Q2_K's and Q3_K's fallback) and IQ4_NL on narrower ones; the error
    // is the codec's, unweighted here. The small models' rows make IQ4_NL the better one somewhere.
    void targetBpwKeepsTheBetterType() {
        int iq4_nl = 0;
        for (const MixModel& mm : mix_models()) {
            test::TempDir dir;
            auto file = ModelFile::open(write_model(mm, dir.file("model.gguf")));
            QVERIFY(static_cast<bool>(file));
            auto plan = plan_target_bpw(*file, 8.0, {}, 1);
            QVERIFY2(static_cast<bool>(plan), plan.message().c_str());
            for (const BpwPlanTensor& t : plan->tensors) {
                if (t.candidates.size() < 2) continue;
                const BpwCandidate* at45 = nullptr;
                for (const BpwCandidate& c : t.candidates)
                    if (c.bits_per_weight == 4.5) at45 = &c;
                QVERIFY2(at45 != nullptr, t.name.c_str());
                auto w = file->read_f32(t.source_index);
                QVERIFY(static_cast<bool>(w));
                TensorInput in;
                static_cast<TensorInfo&>(in) = file->tensor_info(t.source_index);
                in.dtype = DType::F32;
                in.data = w->data();
                std::map<Method, double> error;
                const Method other = in.cols() % 256 == 0 ? Method::Q4_K : Method::Q4_0;
                for (Method m : {other, Method::IQ4_NL}) {
                    CodecParams p;
                    p.method = m;
                    auto e = encode_tensor(in, p);
                    QVERIFY2(static_cast<bool>(e), e.message().c_str());
                    auto back = decode_tensor(*e);
                    QVERIFY(static_cast<bool>(back));
                    double sum = 0.0;
                    for (size_t i = 0; i < w->size(); ++i) sum += std::pow(double((*w)[i]) - double((*back)[i]), 2);
                    error[m] = sum;
                }
                const Method better = error[Method::IQ4_NL] < error[other] ? Method::IQ4_NL : other;
                QVERIFY2(at45->method == better, (std::string(mm.name) + " " + t.name).c_str());
                QCOMPARE(at45->error, error[better]);
                iq4_nl += better == Method::IQ4_NL ? 1 : 0;
            }
        }
        QVERIFY2(iq4_nl > 0, "IQ4_NL is never the better 4.5-bit type on these models");
    }

    // The matrices --target-bpw does not search take the q4_k_m preset's (llama-quantize's) types: output Q6_K and
    // token_embd Q4_K, or, where the model ties them (k64: no output matrix), token_embd the output's type.
    void targetBpwFixedTypesAreTheMixtures() {
        for (const MixModel& mm : mix_models()) {
            test::TempDir dir;
            auto file = ModelFile::open(write_model(mm, dir.file("model.gguf")));
            QVERIFY(static_cast<bool>(file));
            auto plan = plan_target_bpw(*file, 8.0, {}, 1);
            QVERIFY2(static_cast<bool>(plan), plan.message().c_str());
            QuantizeOptions o;
            o.preset = "q4_k_m";
            o.n_threads = 1;
            auto report = quantize_model(*file, o, dir.file("model.knot"));
            QVERIFY2(static_cast<bool>(report), report.message().c_str());
            int fixed = 0;
            for (const BpwPlanTensor& t : plan->tensors) {
                if (t.candidates.size() != 1) continue;
                ++fixed;
                QVERIFY2(
                    t.candidates[0].method == report->tensors[t.source_index].codec.method,
                    (std::string(mm.name) + " " + t.name + ": " + std::string(method_name(t.candidates[0].method)) +
                     " vs the preset's " + std::string(method_name(report->tensors[t.source_index].codec.method)))
                        .c_str());
            }
            QCOMPARE(fixed, mm.config.shared_classifier ? 1 : 2);
        }
    }

    // The output probe runs the model with one matrix replaced: the matrix's own values cost nothing, a larger
    // perturbation costs more, and --target-bpw with the probe records each projection's measured KLD.
    void outputProbeMeasuresTheReplacedModel() {
        const MixModel mm = mix_models()[1];
        test::TempDir dir;
        auto file = ModelFile::open(write_model(mm, dir.file("model.gguf")));
        QVERIFY(static_cast<bool>(file));
        const std::string text = dir.file("calib.txt");
        {
            std::ofstream out(text);
            out << "The quick brown fox jumps over the lazy dog. A probe measures what a matrix costs.";
        }
        OutputProbeRequest r;
        r.text_path = text;
        r.n_threads = 1;
        auto probe = make_output_probe(*file, r);
        QVERIFY2(static_cast<bool>(probe), probe.message().c_str());
        const int64_t i = file->index_of(TensorRole::AttnV, 1);
        QVERIFY(i >= 0);
        auto w = file->read_f32(static_cast<size_t>(i));
        QVERIFY(static_cast<bool>(w));
        auto same = (*probe)(static_cast<size_t>(i), *w);
        QVERIFY2(static_cast<bool>(same), same.message().c_str());
        QVERIFY2(*same >= 0.0 && *same < 1e-12, std::to_string(*same).c_str());
        double last = 0.0;
        for (float scale : {0.05f, 0.5f}) {
            std::vector<float> v = *w;
            for (size_t k = 0; k < v.size(); ++k) v[k] += scale * ((k * 7919) % 13 == 0 ? 1.0f : -0.1f);
            auto kld = (*probe)(static_cast<size_t>(i), std::move(v));
            QVERIFY2(static_cast<bool>(kld), kld.message().c_str());
            QVERIFY2(*kld > last, (std::to_string(*kld) + " after " + std::to_string(last)).c_str());
            last = *kld;
        }
        auto wrong = (*probe)(static_cast<size_t>(i), std::vector<float>(3, 0.0f));
        QVERIFY(!wrong);
        QVERIFY2(wrong.message().find("attn_v") != std::string::npos, wrong.message().c_str());

        auto plan = plan_target_bpw(*file, 6.0, {}, 1, {}, *probe);
        QVERIFY2(static_cast<bool>(plan), plan.message().c_str());
        QVERIFY(plan->output_measured);
        for (const BpwPlanTensor& t : plan->tensors) {
            if (t.candidates.size() < 2) continue;
            QVERIFY2(t.probe_kld > 0.0 && std::isfinite(t.sensitivity) && t.sensitivity > 0.0, t.name.c_str());
            QCOMPARE(t.sensitivity, t.probe_kld / t.candidates[0].error);
        }
    }

    // A row length that no k-quant block divides falls back as llama-quantize does, and the report says so.
    void fallbackIsReported() {
        const MixModel mm = mix_models()[1];
        test::TempDir dir;
        auto file = ModelFile::open(write_model(mm, dir.file("model.gguf")));
        QVERIFY(static_cast<bool>(file));
        QuantizeOptions o;
        o.preset = "q4_k_m";
        o.n_threads = 1;
        auto report = quantize_model(*file, o, dir.file("model.knot"));
        QVERIFY2(static_cast<bool>(report), report.message().c_str());
        int fell_back = 0;
        for (const QuantizedTensor& q : report->tensors) {
            const std::string& why = q.codec.fallback;
            if (why.empty()) continue;
            ++fell_back;
            QVERIFY2(why.find("not a multiple of 256") != std::string::npos, why.c_str());
            QVERIFY2(why.find("q5_0 instead of q4_k") != std::string::npos ||
                         why.find("q8_0 instead of q6_k") != std::string::npos,
                     why.c_str());
        }
        QVERIFY(fell_back >= 7);
    }
};

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "--write-models") {
        for (const MixModel& m : mix_models())
            std::printf("%s\n", write_model(m, std::string(argv[2]) + "/" + m.name + ".gguf").c_str());
        return 0;
    }
    TestKquantMix t;
    return QTest::qExec(&t, argc, argv);
}

#include "test_kquant_mix.moc"
