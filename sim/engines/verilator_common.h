// Shared by the compiled RTL engine's drivers (verilator_driver.cpp: kaleido_top; verilator_band_driver.cpp:
// kaleido_ctop / kaleido_dtop; sim/engines/verilator_build.py compiles each with this header): the command line,
// job files mapped into memory, Verilated ports as byte images, signed lanes of a byte image, the clock with its
// FST window, results written atomically.
#pragma once

#include "verilated.h"
#ifdef KALEIDO_WAVES
#include "verilated_fst_c.h"
#endif

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

[[noreturn]] static void fail(int code, const std::string& msg) {
    std::fprintf(stderr, "%s\n", msg.c_str());
    std::exit(code);
}

// A driver's command line: Vkaleido_engine JOB_DIR [--fst FILE --waves-from TICK --waves-cycles N].
struct Options {
    std::string dir, fst;
    int64_t wfrom = 0, wcycles = 0;
};

static Options parse_options(int argc, char** argv) {
    if (argc < 2) fail(2, "usage: Vkaleido_engine JOB_DIR [--fst FILE --waves-from TICK --waves-cycles N]");
    Options o;
    o.dir = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--fst") o.fst = argv[i + 1];
        else if (a == "--waves-from") o.wfrom = std::atoll(argv[i + 1]);
        else if (a == "--waves-cycles") o.wcycles = std::atoll(argv[i + 1]);
        else fail(2, "unknown option " + a);
    }
    return o;
}

// The clock of a Verilated top, counting ticks (clock cycles since the job started), with the FST window of
// `Options` (builds with KALEIDO_WAVES only). A cycle is `settle` (this cycle's inputs applied; the falling edge
// is evaluated with them, the design has no negative-edge logic) then `rise`: two evaluations.
template <class Top> struct Clock {
    Top& top;
    const Options& opt;
    int64_t tick = 0;
#ifdef KALEIDO_WAVES
    VerilatedFstC* tfp = nullptr;
#endif
    Clock(VerilatedContext& ctx, Top& t, const Options& o) : top(t), opt(o) {
#ifdef KALEIDO_WAVES
        if (!o.fst.empty()) {
            ctx.traceEverOn(true);
            tfp = new VerilatedFstC;
            top.trace(tfp, 99);
            tfp->open(o.fst.c_str());
        }
#else
        (void)ctx;
        if (!o.fst.empty()) fail(2, "this build has no waveform support (build with waves)");
#endif
    }
    void dump(int64_t t) {
#ifdef KALEIDO_WAVES
        if (tfp && tick >= opt.wfrom && tick < opt.wfrom + opt.wcycles) tfp->dump((uint64_t)t);
#else
        (void)t;
#endif
    }
    void settle() {
        top.eval();
        dump(2 * tick);
    }
    void rise() {
        top.clk = 1;
        top.eval();
        dump(2 * tick + 1);
        top.clk = 0;
        ++tick;
    }
    // Every input but rst and clk set to idle first: rst high for 3 cycles, then low for `low` cycles. Behind a
    // wrapper that registers rst, the design is in reset for 4 cycles and idle for `low` - 1 before the first
    // cycle the caller drives.
    void reset(int low) {
        top.rst = 1;
        top.clk = 0;
        for (int i = 0; i < 3; ++i) { settle(); rise(); }
        top.rst = 0;
        for (int i = 0; i < low; ++i) { settle(); rise(); }
    }
    void close() {
#ifdef KALEIDO_WAVES
        if (tfp) { tfp->close(); delete tfp; tfp = nullptr; }
#endif
    }
};

struct Mapped {
    void* ptr = nullptr;
    size_t size = 0;
};

// A job file of exactly `want` bytes, mapped read-only (exit 2 otherwise).
static Mapped map_in(const std::string& path, size_t want) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) fail(2, "cannot open " + path + ": " + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) fail(2, "cannot stat " + path);
    if ((size_t)st.st_size != want)
        fail(2, path + ": " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(want));
    Mapped m;
    m.size = want;
    if (want) {
        m.ptr = mmap(nullptr, want, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m.ptr == MAP_FAILED) fail(2, "cannot map " + path);
    }
    ::close(fd);
    return m;
}

// A new file of `size` bytes (zeros), mapped read-write.
static Mapped map_out(const std::string& path, size_t size) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail(2, "cannot create " + path + ": " + std::strerror(errno));
    if (ftruncate(fd, (off_t)size) != 0) fail(2, "cannot size " + path);
    Mapped m;
    m.size = size;
    if (size) {
        m.ptr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m.ptr == MAP_FAILED) fail(2, "cannot map " + path);
    }
    ::close(fd);
    return m;
}

// Storage of a Verilated port as bytes: scalars (CData .. QData) and VlWide<N>.
template <typename T> static uint8_t* bytes_of(T& port) { return reinterpret_cast<uint8_t*>(&port); }
template <std::size_t N> static uint8_t* bytes_of(VlWide<N>& port) {
    return reinterpret_cast<uint8_t*>(port.data());
}
template <typename T> static size_t size_of(T&) { return sizeof(T); }
template <std::size_t N> static size_t size_of(VlWide<N>&) { return N * sizeof(EData); }

// `bits` bits at bit offset `off` of a little-endian byte image padded by 8 bytes, sign-extended.
static inline int64_t lane(const uint8_t* buf, size_t off, int bits) {
    uint64_t w;
    std::memcpy(&w, buf + (off >> 3), 8);
    w >>= (off & 7);
    uint64_t mask = (bits >= 64) ? ~0ull : ((1ull << bits) - 1);
    w &= mask;
    if (bits < 64 && (w >> (bits - 1)) & 1) w |= ~mask;
    return (int64_t)w;
}

// This cycle's drained rows: when any of the D drain ports is valid, copies the top's out_data and out_row images
// into dbuf and rbuf (data_bytes, row_bytes) and calls on_row(p, row) for each valid port p in order, row being its
// RB-bit row field (shared by the lock-step and band drivers).
template <class Top, class F>
static void for_each_drained_row(Top& top, std::vector<uint8_t>& dbuf, std::vector<uint8_t>& rbuf, size_t data_bytes,
                                 size_t row_bytes, int D, int RB, F on_row) {
    const uint64_t ov = (uint64_t)top.out_valid;
    if (!ov) return;
    std::memcpy(dbuf.data(), bytes_of(top.out_data), data_bytes);
    std::memcpy(rbuf.data(), bytes_of(top.out_row), row_bytes);
    for (int p = 0; p < D; ++p)
        if ((ov >> p) & 1) on_row(p, lane(rbuf.data(), (size_t)p * RB, RB) & ((1ll << RB) - 1));
}

// meta.bin of a job: `n` int64 words, the first the job version the driver reads (exit 2 otherwise).
static const int64_t* read_meta(const std::string& dir, size_t n, int64_t version) {
    Mapped m = map_in(dir + "/meta.bin", n * 8);
    const int64_t* meta = static_cast<const int64_t*>(m.ptr);
    if (meta[0] != version)
        fail(2, "job version " + std::to_string(meta[0]) + ", driver reads " + std::to_string(version));
    return meta;
}

// A file of map_out written in place under `dir/name.part`: flushed and renamed to `dir/name`.
static void finish_mapped(const std::string& dir, const std::string& name, const Mapped& m) {
    if (m.size) msync(m.ptr, m.size, MS_SYNC);
    if (std::rename((dir + "/" + name + ".part").c_str(), (dir + "/" + name).c_str()) != 0)
        fail(2, "cannot rename " + name + ".part");
}

static int64_t now_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// `dir/name` written through `dir/name.part` and a rename (a reader never sees half a file).
static void write_result(const std::string& dir, const std::string& name, const std::vector<int64_t>& v) {
    const std::string tmp = dir + "/" + name + ".part";
    FILE* fh = std::fopen(tmp.c_str(), "wb");
    if (!fh || std::fwrite(v.data(), 8, v.size(), fh) != v.size() || std::fclose(fh) != 0)
        fail(2, "cannot write " + tmp);
    if (std::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) fail(2, "cannot rename " + tmp);
}
