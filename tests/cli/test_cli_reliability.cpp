// The real gkq binary against data loss and unbounded resources: an output naming an input (same path, symlink,
// hard link, a shard, a tokenizer beside the model) is refused before any work in every command that writes;
// SIGTERM cancels like SIGINT (exit 143, a message, no temporary, the old output intact); stale temporaries of a
// killed run are removed by the next run; reconstruct keeps another model's config.json; gzip bombs (made here with
// zlib) stop within bounded time and memory (the child's ru_maxrss).
#include "cli_run.h"
#include "gkq/model_writer.h"
#include "gkq/naming.h"
#include "gkq/quantize.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QProcess>
#include <QtTest>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>

extern char** environ;

using namespace gkq;
namespace fs = std::filesystem;

namespace {

using Run = gkq::test::CliRunT<std::string>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<std::string>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + std::string(needle) + "]")))

std::vector<std::string> temporaries_in(const std::string& dir) {
    std::vector<std::string> t;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".tmp-") != std::string::npos) t.push_back(e.path().string());
    return t;
}

// gzip of `prefix` followed by `n_fill_mib` MiB of `fill`, built without ever holding the inflated bytes: one
// deflate block sequence for 1 MiB of `fill` (which refers only to the `fill` bytes before it) repeated.
std::vector<uint8_t> gzip_bomb(const std::string& prefix, char fill, size_t n_fill_mib) {
    const std::vector<uint8_t> mib(1 << 20, static_cast<uint8_t>(fill));
    auto raw_deflate = [](z_stream& z, const uint8_t* p, size_t n, int flush) {
        std::vector<uint8_t> out(deflateBound(&z, n) + 64);
        z.next_in = const_cast<Bytef*>(p);
        z.avail_in = static_cast<uInt>(n);
        z.next_out = out.data();
        z.avail_out = static_cast<uInt>(out.size());
        if (deflate(&z, flush) == Z_STREAM_ERROR) qFatal("deflate failed");
        out.resize(out.size() - z.avail_out);
        return out;
    };
    // the prefix, then one MiB of fill so that the window holds only fill bytes
    z_stream a{};
    deflateInit2(&a, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    std::vector<uint8_t> head =
        raw_deflate(a, reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size(), Z_NO_FLUSH);
    const std::vector<uint8_t> head2 = raw_deflate(a, mib.data(), mib.size(), Z_SYNC_FLUSH);
    head.insert(head.end(), head2.begin(), head2.end());
    const std::vector<uint8_t> tail = raw_deflate(a, nullptr, 0, Z_FINISH);
    deflateEnd(&a);
    // the repeated block: a second MiB of fill after a first one
    z_stream b{};
    deflateInit2(&b, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    raw_deflate(b, mib.data(), mib.size(), Z_SYNC_FLUSH);
    const std::vector<uint8_t> block = raw_deflate(b, mib.data(), mib.size(), Z_SYNC_FLUSH);
    deflateEnd(&b);

    std::vector<uint8_t> gz;
    gz.reserve(head.size() + (n_fill_mib + 1) * block.size() + tail.size() + 18);
    for (uint8_t b : {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}) gz.push_back(b);  // gzip header: deflate, no name, Unix
    gz.insert(gz.end(), head.begin(), head.end());
    uLong crc = crc32(crc32(0, reinterpret_cast<const Bytef*>(prefix.data()), static_cast<uInt>(prefix.size())),
                      mib.data(), static_cast<uInt>(mib.size()));
    const uLong crc_mib = crc32(0, mib.data(), static_cast<uInt>(mib.size()));
    for (size_t i = 1; i < n_fill_mib; ++i) {
        gz.insert(gz.end(), block.begin(), block.end());
        crc = crc32_combine(crc, crc_mib, static_cast<z_off_t>(mib.size()));
    }
    gz.insert(gz.end(), tail.begin(), tail.end());
    const uint64_t total = prefix.size() + n_fill_mib * mib.size();
    for (int i = 0; i < 4; ++i) gz.push_back(static_cast<uint8_t>(crc >> (8 * i)));
    for (int i = 0; i < 4; ++i) gz.push_back(static_cast<uint8_t>(total >> (8 * i)));
    return gz;
}

struct Measured {
    int code = -1;  // exit code, or -signal
    double seconds = 0;
    long max_rss_kb = 0;
    std::string err;
};

// Runs gkq with `args`, waiting with wait4 for its resource usage (ru_maxrss: the child's peak resident set).
Measured run_measured(const std::vector<std::string>& args, const std::string& err_path) {
    const std::string exe = qgetenv("GKQ_CLI").toStdString();
    std::vector<char*> argv;
    std::vector<std::string> all = {exe};
    all.insert(all.end(), args.begin(), args.end());
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    Measured m;
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = 0;
    if (posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ) != 0) qFatal("posix_spawn failed");
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    rusage ru{};
    if (wait4(pid, &status, 0, &ru) != pid) qFatal("wait4 failed");
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    m.max_rss_kb = ru.ru_maxrss;
    const auto e = test::read_file(err_path);
    m.err.assign(e.begin(), e.end());
    return m;
}

// A model big enough that quantizing it takes a while on any machine (10.6 M weights), with a vocabulary.
std::string write_big_model(const test::TempDir& dir) {
    ModelConfig c = test::tiny_config(true);
    c.dim = 384;
    c.hidden_dim = 1024;
    c.n_layers = 6;
    c.n_heads = 6;
    c.n_kv_heads = 6;
    c.context_length = 64;
    const test::TinyModel m = test::make_tiny_model(c, 7);
    const std::string path = dir.file("big.gguf");
    const Status s = write_gguf(path, c, m.tensors, test::tiny_vocabulary());
    if (!s) qFatal("%s", s.message().c_str());
    return path;
}

}  // namespace

class TestCliReliability : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    // Every command that writes refuses an output that is one of its inputs, before any work, with exit 2.
    void outputNamingAnInputIsRefused() {
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("m.gguf"), false, 1, test::tiny_vocabulary());
        const std::vector<uint8_t> model_bytes = test::read_file(model);
        fs::create_symlink(model, dir.file("link.gguf"));
        fs::create_hard_link(model, dir.file("hard.gguf"));
        const std::string text = dir.file("text.txt");
        test::write_file(text, std::string_view("abc abc ba ab"));
        Run k = run_gkq({"quantize", q(model), "-o", q(dir.file("k.knot")), "--preset", "q8_0"});
        QCOMPARE(k.code, 0);
        const std::vector<uint8_t> knot_bytes = test::read_file(dir.file("k.knot"));
        fs::create_symlink(dir.file("k.knot"), dir.file("k-link.gguf"));

        for (const char* out : {"m.gguf", "link.gguf", "hard.gguf"}) {
            const std::string o = dir.file(out);
            const std::vector<QStringList> cases = {
                {"quantize", q(model), "-o", q(o)},
                {"analyze", q(model), "-o", q(o)},
                {"profile", q(model), "--text", q(text), "-o", q(o)},
                {"rknot", "encode", "--knot", q(dir.file("k.knot")), "--model", q(model), "-o", q(o)},
                {"eval", "--base", q(model), "--candidate", q(dir.file("k.knot")), "--text", q(text), "--save-base",
                 q(o)},
            };
            for (const QStringList& args : cases) {
                Run r = run_gkq(args);
                QVERIFY2(r.code == 2, qPrintable(args.join(' ') + " -> " + QString::number(r.code) + q(r.err)));
                VERIFY_CONTAINS(r.err, o + ": this output is the input " + model);
                QVERIFY(test::read_file(model) == model_bytes);
            }
        }
        // the kind of link is named
        VERIFY_CONTAINS(run_gkq({"quantize", q(model), "-o", q(dir.file("link.gguf"))}).err, "a symbolic link to it");
        VERIFY_CONTAINS(run_gkq({"quantize", q(model), "-o", q(dir.file("hard.gguf"))}).err, "a hard link");
        // reconstruct and merge over the knot they read (directly and through a link)
        Run rec = run_gkq({"reconstruct", q(dir.file("k.knot")), "-o", q(dir.file("k-link.gguf"))});
        QCOMPARE(rec.code, 2);
        VERIFY_CONTAINS(rec.err, "this output is the input " + dir.file("k.knot") + " (a symbolic link to it)");
        Run merge = run_gkq({"merge", "-o", q(dir.file("k.knot")), q(dir.file("k.knot"))});
        QCOMPARE(merge.code, 2);
        VERIFY_CONTAINS(merge.err, "this output is the input");
        Run rk = run_gkq({"rknot", "encode", "--knot", q(dir.file("k.knot")), "-o", q(dir.file("k.knot"))});
        QCOMPARE(rk.code, 2);
        QVERIFY(test::read_file(dir.file("k.knot")) == knot_bytes);
        // a tokenizer beside the model and the shard of a sharded model are inputs too
        const std::string tok = dir.file("tokenizer.bin");
        test::write_file(tok, std::string_view("not really a tokenizer"));
        Run over_tok = run_gkq({"quantize", q(model), "-o", q(tok)});
        QCOMPARE(over_tok.code, 2);
        VERIFY_CONTAINS(over_tok.err, tok + ": this output is the input " + tok);
        const std::string shard = dir.file("sharded/model-00001-of-00001.safetensors");
        fs::create_directories(dir.file("sharded"));
        const test::TinyModel tm = test::make_tiny_model(test::tiny_config(true), 3);
        QVERIFY(write_safetensors(shard, tm.config, tm.tensors).is_ok());
        nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
        for (const WriteTensor& t : tm.tensors)
            index["weight_map"][hf_name(t.role, t.layer)] = fs::path(shard).filename();
        test::write_file(dir.file("sharded/model.safetensors.index.json"), std::string_view(index.dump()));
        const std::vector<uint8_t> shard_bytes = test::read_file(shard);
        Run over_shard = run_gkq({"quantize", q(dir.file("sharded")), "-o", q(shard)});
        QCOMPARE(over_shard.code, 2);
        VERIFY_CONTAINS(over_shard.err, shard + ": this output is the input " + shard);
        QVERIFY(test::read_file(shard) == shard_bytes);
        // a new name beside the inputs is fine
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(dir.file("sharded/x.knot")), "--preset", "q8_0"}).code, 0);
    }

    // SIGTERM, as Kubernetes, systemd and timeout send it: the run stops at the next tensor, removes its temporary,
    // says what was not written and exits 143; the previous output stays as it was.
    void sigtermCancelsQuantize() {
        test::TempDir dir;
        const std::string model = write_big_model(dir);
        const std::string out = dir.file("out.knot");
        test::write_file(out, std::string_view("the previous knot"));
        const int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        QVERIFY(in >= 0);
        QVERIFY(inotify_add_watch(in, dir.path().c_str(), IN_CREATE) >= 0);
        QProcess p;
        p.start(qEnvironmentVariable("GKQ_CLI"), {"quantize", q(model), "-o", q(out), "--preset", "paper"});
        QVERIFY(p.waitForStarted(10000));
        // Wait for the temporary to appear (the run is under way), event by event: no fixed sleep.
        bool seen = false;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!seen && std::chrono::steady_clock::now() < deadline && p.state() == QProcess::Running) {
            pollfd pfd{in, POLLIN, 0};
            if (::poll(&pfd, 1, 100) <= 0) continue;
            alignas(inotify_event) char buf[4096];
            const ssize_t n = ::read(in, buf, sizeof buf);
            for (ssize_t off = 0; off < n;) {
                const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
                if (ev->len > 0 && std::string(ev->name).rfind("out.knot.tmp-", 0) == 0) seen = true;
                off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
            }
        }
        ::close(in);
        QVERIFY2(seen, "the quantize run never created its temporary");
        QVERIFY(::kill(static_cast<pid_t>(p.processId()), SIGTERM) == 0);
        QVERIFY(p.waitForFinished(60000));
        const std::string err = p.readAllStandardError().toStdString();
        QVERIFY2(p.exitStatus() == QProcess::NormalExit, ("killed by the signal, not handled: " + err).c_str());
        QCOMPARE(p.exitCode(), 143);
        VERIFY_CONTAINS(err, "gkq quantize: interrupted by SIGTERM; " + out + " was not written");
        QVERIFY(temporaries_in(dir.path()).empty());
        const auto kept = test::read_file(out);
        QCOMPARE(std::string(kept.begin(), kept.end()), std::string("the previous knot"));
    }

    // A temporary left by a run that was killed with SIGKILL (its pid no longer runs) is removed by the next run to
    // the same output; one whose process still runs is left alone.
    void staleTemporariesAreRemoved() {
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("m.gguf"), false, 1, test::tiny_vocabulary());
        const pid_t gone = fork();
        if (gone == 0) _exit(0);
        QVERIFY(gone > 0);
        QCOMPARE(waitpid(gone, nullptr, 0), gone);  // reaped: that pid runs nothing now
        const std::string stale = dir.file("out.knot.tmp-" + std::to_string(gone) + "-abcdef");
        const std::string live = dir.file("out.knot.tmp-" + std::to_string(::getpid()) + "-ghijkl");
        const std::string other = dir.file("other.knot.tmp-" + std::to_string(gone) + "-abcdef");
        for (const std::string& f : {stale, live, other}) test::write_file(f, std::string_view("partial"));
        Run r = run_gkq({"quantize", q(model), "-o", q(dir.file("out.knot")), "--preset", "q8_0"});
        QCOMPARE(r.code, 0);
        QVERIFY2(!fs::exists(stale), stale.c_str());
        QVERIFY(fs::exists(live));
        QVERIFY(fs::exists(other));  // another output's
        // and a kill -9 in the middle leaves a temporary that the next run removes
        const std::string big = write_big_model(dir);
        QProcess p;
        p.start(qEnvironmentVariable("GKQ_CLI"), {"quantize", q(big), "-o", q(dir.file("out.knot"))});
        QVERIFY(p.waitForStarted(10000));
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        const std::string prefix = "out.knot.tmp-" + std::to_string(p.processId()) + "-";
        auto mine = [&] {
            for (const std::string& t : temporaries_in(dir.path()))
                if (fs::path(t).filename().string().rfind(prefix, 0) == 0) return true;
            return false;
        };
        while (!mine() && std::chrono::steady_clock::now() < deadline && p.state() == QProcess::Running)
            p.waitForFinished(5);
        QVERIFY(mine());
        ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
        QVERIFY(p.waitForFinished(30000));
        QVERIFY(mine());
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(dir.file("out.knot")), "--preset", "q8_0"}).code, 0);
        QVERIFY(!mine());
    }

    // reconstruct writes config.json beside a .safetensors output: not over another model's without --force.
    void reconstructKeepsAnotherModelsConfig() {
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("m.gguf"), false, 1, test::tiny_vocabulary());
        const std::string knot = dir.file("m.knot");
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(knot), "--preset", "q8_0"}).code, 0);
        fs::create_directories(dir.file("other"));
        const std::string config = dir.file("other/config.json");
        const std::string theirs =
            R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":896,"num_hidden_layers":24,)"
            R"("num_attention_heads":14,"num_key_value_heads":2,"intermediate_size":4864,"vocab_size":151936})";
        test::write_file(config, std::string_view(theirs));
        test::write_file(dir.file("other/tokenizer.json"), std::string_view("{}"));
        const std::string out = dir.file("other/m.safetensors");
        Run r = run_gkq({"reconstruct", q(knot), "-o", q(out)});
        QCOMPARE(r.code, 2);
        VERIFY_CONTAINS(r.err, config + " describes a different model (\"architectures\" is [\"Qwen2ForCausalLM\"]");
        VERIFY_CONTAINS(r.err, "tokenizer.json");
        VERIFY_CONTAINS(r.err, "--force");
        QVERIFY(!fs::exists(out));
        auto kept = test::read_file(config);
        QCOMPARE(std::string(kept.begin(), kept.end()), theirs);
        // --force replaces it; the same model again needs no --force
        QCOMPARE(run_gkq({"reconstruct", q(knot), "-o", q(out), "--force"}).code, 0);
        QVERIFY(fs::exists(out));
        kept = test::read_file(config);
        QCOMPARE(nlohmann::json::parse(std::string(kept.begin(), kept.end()))["hidden_size"].get<int>(), 64);
        Run again = run_gkq({"reconstruct", q(knot), "-o", q(dir.file("other/m2.safetensors"))});
        QVERIFY2(again.code == 0, again.err.c_str());
        // tokenizer files without any config.json may belong to any model
        fs::create_directories(dir.file("tok"));
        test::write_file(dir.file("tok/tokenizer.model"), std::string_view("x"));
        Run tok = run_gkq({"reconstruct", q(knot), "-o", q(dir.file("tok/m.safetensors"))});
        QCOMPARE(tok.code, 2);
        VERIFY_CONTAINS(tok.err, "holds tokenizer.model but no config.json");
    }

    // A gzip bomb (GiBs of fill behind a few bytes) stops early: within seconds and a bounded peak memory.
    void gzipBombsStopEarly() {
        test::TempDir dir;
        const std::string model = test::write_tiny_gguf(dir.file("m.gguf"), false, 1, test::tiny_vocabulary());
        QCOMPARE(run_gkq({"quantize", q(model), "-o", q(dir.file("m.knot")), "--preset", "q8_0"}).code, 0);
        const auto knot = test::read_file(dir.file("m.knot"));
        const std::string knot_text(knot.begin(), knot.end());
        struct Bomb {
            const char* name;
            std::string prefix;
            char fill;
            std::vector<std::string> args;
            const char* message;
        };
        const std::string zeros = dir.file("zeros.knot.gz"), behind = dir.file("behind.knot.gz"),
                          rk_zeros = dir.file("zeros.rknot"), rk_spaces = dir.file("spaces.rknot");
        const std::vector<Bomb> bombs = {
            {"zeros as a knot", "", '\0', {"verify", zeros}, "not a knot file (the gzip data does not start with"},
            {"fill behind a real knot", knot_text, '\0', {"verify", behind}, "not a knot, or a gzip bomb"},
            {"zeros as an rknot", "", '\0', {"rknot", "verify", rk_zeros}, "not an rknot"},
            {"spaces inside a JSON object",
             "{\"model_name\": \"",
             ' ',
             {"rknot", "verify", rk_spaces},
             "inflates to more than 64 MiB, the limit for an rknot"},
        };
        for (const Bomb& b : bombs) {
            const std::vector<uint8_t> gz = gzip_bomb(b.prefix, b.fill, 2048);  // 2 GiB inflated
            QVERIFY(gz.size() < (uint64_t{8} << 20));
            test::write_file(b.args.back(), gz);
            const Measured m = run_measured(b.args, dir.file("err.txt"));
            qInfo("%s: %zu bytes of gzip, exit %d after %.2f s, peak RSS %ld kB", b.name, gz.size(), m.code, m.seconds,
                  m.max_rss_kb);
            QVERIFY2(m.code == 2, (std::string(b.name) + ": " + m.err).c_str());
            VERIFY_CONTAINS(m.err, b.message);
            QVERIFY2(m.max_rss_kb < 256 * 1024, b.name);  // 2 GiB inflated would show here
            QVERIFY2(m.seconds < 20, b.name);
        }
    }
};

QTEST_GUILESS_MAIN(TestCliReliability)
#include "test_cli_reliability.moc"
