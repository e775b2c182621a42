// Batch driver of the Verilated kaleido_engine (kaleido_top with a registered reset; sim/engines/verilator.py builds it with
// `verilator --cc --exe --build`): the whole stimulus of a run lies in memory-mapped files, the
// clock loop is compiled, no Python runs per cycle.
//
// Usage: Vkaleido_engine <job dir> [--fst FILE --waves-from TICK --waves-cycles N]
//
// Files in the job dir (all little-endian, written by sim/engines/verilator.py):
//   meta.bin   int64[16]: version, n_runs, n_slots, n_tiles, rec_bytes, R, C, d, acc_bits, row_bits,
//              out_len, then the byte sizes of in_x_a/in_x_b (R), in_mode, in_sel, in_w_a/in_w_b (C)
//              are implied by R and C (x: R, mode: ceil(2R/8), sel: ceil(R/8), w: C, g: 1 each).
//   runs.bin   int64[n_runs][5]: first slot, slots, first tile, tiles, x_unsigned.
//   stim.bin   uint8[n_slots][rec_bytes]: per slot the byte images of in_x_a, in_x_b, in_mode,
//              in_sel, in_w_a, in_w_b, in_g_a, in_g_b, then one flag byte
//              (first_a | first_b << 1 | sp_a << 2 | sp_b << 3 | last << 4 | clear << 5).
//   dest.bin   int64[n_tiles][R]: element offset in out.bin of row r's first column, -1 to drop.
//   ncols.bin  int64[n_tiles]: columns of the tile kept (tile.n1 - tile.n0).
// Written: out.bin (int64[out_len], zeros where no row landed), result.bin (int64[n_runs][4]:
// cycles = last row - first accepted slot + 1, tick of the first accepted slot, tick of the last
// row, tick of the run's first reset cycle), tiles.bin (int64[n_tiles]: the cycle, counted from
// the run's first accepted slot, at which the tile's last row is on the output ports), perf.bin
// (int64[3]: wall and CPU nanoseconds of the clock loop over every run, reset cycles included, and
// the ticks it ran; mapping, output scatter and file writes excluded).
// A tick is one clock cycle since the start of the job, reset cycles included.
// Exit status: 0 done; 2 bad job files (message on stderr); 3 the RTL broke the output protocol
// (row out of order, a row for no pending tile, tiles not drained in time).

#include "Vkaleido_engine.h"
#include "verilator_common.h"

static const int64_t JOB_VERSION = 1;
static const int64_t RESET = 5;  // ticks before a run's first slot (RESET_TICKS in verilator.py)

struct Port {
    uint8_t* p;
    size_t cap;
    size_t n;
};

int main(int argc, char** argv) {
    const Options opt = parse_options(argc, argv);
    const std::string dir = opt.dir;

    const int64_t* meta = read_meta(dir, 16, JOB_VERSION);
    const int64_t n_runs = meta[1], n_slots = meta[2], n_tiles = meta[3], rec = meta[4];
    const int R = (int)meta[5], C = (int)meta[6], D = (int)meta[7], AB = (int)meta[8], RB = (int)meta[9];
    const int64_t out_len = meta[10];
    if (AB > 56 || AB < 2) fail(2, "acc_bits " + std::to_string(AB) + " outside 2..56");

    Mapped runs_m = map_in(dir + "/runs.bin", (size_t)n_runs * 5 * 8);
    Mapped stim_m = map_in(dir + "/stim.bin", (size_t)(n_slots * rec));
    Mapped dest_m = map_in(dir + "/dest.bin", (size_t)n_tiles * R * 8);
    Mapped ncol_m = map_in(dir + "/ncols.bin", (size_t)n_tiles * 8);
    const int64_t* runs = static_cast<const int64_t*>(runs_m.ptr);
    const uint8_t* stim = static_cast<const uint8_t*>(stim_m.ptr);
    const int64_t* dest = static_cast<const int64_t*>(dest_m.ptr);
    const int64_t* ncols = static_cast<const int64_t*>(ncol_m.ptr);
    Mapped out_m = map_out(dir + "/out.bin.part", (size_t)out_len * 8);
    int64_t* out = static_cast<int64_t*>(out_m.ptr);
    std::vector<int64_t> result(n_runs * 4, 0), tile_done(n_tiles, -1);

    VerilatedContext ctx;
    Vkaleido_engine top(&ctx);
    // Byte images in stimulus order; each must fit the Verilated port's storage.
    Port ports[8] = {
        {bytes_of(top.in_x_a), size_of(top.in_x_a), (size_t)R},
        {bytes_of(top.in_x_b), size_of(top.in_x_b), (size_t)R},
        {bytes_of(top.in_mode), size_of(top.in_mode), (size_t)((2 * R + 7) / 8)},
        {bytes_of(top.in_sel), size_of(top.in_sel), (size_t)((R + 7) / 8)},
        {bytes_of(top.in_w_a), size_of(top.in_w_a), (size_t)C},
        {bytes_of(top.in_w_b), size_of(top.in_w_b), (size_t)C},
        {bytes_of(top.in_g_a), size_of(top.in_g_a), 1},
        {bytes_of(top.in_g_b), size_of(top.in_g_b), 1},
    };
    size_t rec_want = 1;
    for (auto& p : ports) {
        if (p.n > p.cap) fail(2, "stimulus port image larger than the Verilated port (wrong preset?)");
        std::memset(p.p, 0, p.cap);
        rec_want += p.n;
    }
    if ((size_t)rec != rec_want) fail(2, "record size " + std::to_string(rec) + ", expected " + std::to_string(rec_want));
    const size_t data_bytes = size_of(top.out_data), row_bytes = size_of(top.out_row);
    if ((size_t)(D * C * AB + 7) / 8 > data_bytes || (size_t)(D * RB + 7) / 8 > row_bytes)
        fail(2, "output ports narrower than the job's R, C, d, acc_bits (wrong preset?)");
    std::vector<uint8_t> dbuf(data_bytes + 8, 0), rbuf(row_bytes + 8, 0);

    Clock<Vkaleido_engine> clk(ctx, top, opt);

    const int64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int64_t ri = 0; ri < n_runs; ++ri) {
        const int64_t s0 = runs[ri * 5], ns = runs[ri * 5 + 1], t0 = runs[ri * 5 + 2], nt = runs[ri * 5 + 3];
        result[ri * 4 + 3] = clk.tick;
        // Reset: every input low, rst high for 3 cycles, then one idle cycle (as the cocotb bench).
        for (auto& p : ports) std::memset(p.p, 0, p.cap);
        top.in_valid = 0; top.in_first_a = 0; top.in_first_b = 0; top.in_sp_a = 0; top.in_sp_b = 0;
        top.in_last = 0; top.in_clear = 0;
        top.x_unsigned = (uint8_t)runs[ri * 5 + 4];
        // The wrapper registers rst (engine_wrapper in verilator.py): 3 cycles high, then 2 low, so
        // the design sees 4 reset cycles and one idle one before the first slot.
        clk.reset(2);

        std::vector<int64_t> rows_seen(D, 0), done_on_port(D, 0);
        int64_t tiles_left = nt, idx = 0, cycle = 0, first_accept = -1, last_output = -1;
        const int64_t limit = 50 * (ns + R + C + 10);
        while (tiles_left && cycle < limit) {
            if (idx < ns) {
                const uint8_t* r = stim + (s0 + idx) * rec;
                for (auto& p : ports) { std::memcpy(p.p, r, p.n); r += p.n; }
                const uint8_t f = *r;
                top.in_valid = 1;
                top.in_first_a = f & 1; top.in_first_b = (f >> 1) & 1;
                top.in_sp_a = (f >> 2) & 1; top.in_sp_b = (f >> 3) & 1;
                top.in_last = (f >> 4) & 1; top.in_clear = (f >> 5) & 1;
            } else {
                top.in_valid = 0;
                top.in_last = 0;
            }
            clk.settle();
            const bool accepted = idx < ns && top.in_ready;
            for_each_drained_row(top, dbuf, rbuf, data_bytes, row_bytes, D, RB, [&](int p, int64_t row) {
                const int64_t k = done_on_port[p];
                const int64_t tl = p + (int64_t)D * k;  // tile t leaves on port t mod d
                if (row != rows_seen[p] || tl >= nt)
                    fail(3, "run " + std::to_string(ri) + " port " + std::to_string(p) + ": row " +
                                std::to_string(row) + ", expected " + std::to_string(rows_seen[p]) +
                                (tl >= nt ? " (no tile pending)" : ""));
                const int64_t t = t0 + tl;
                const int64_t at = dest[t * R + row];
                if (at >= 0) {
                    for (int64_t j = 0; j < ncols[t]; ++j)
                        out[at + j] = lane(dbuf.data(), (size_t)(p * C + j) * AB, AB);
                }
                if (++rows_seen[p] == R) {
                    rows_seen[p] = 0;
                    ++done_on_port[p];
                    --tiles_left;
                    tile_done[t] = cycle - first_accept;
                }
                last_output = cycle;
            });
            clk.rise();
            if (accepted) {
                if (first_accept < 0) first_accept = cycle;
                ++idx;
            }
            ++cycle;
        }
        if (tiles_left)
            fail(3, "run " + std::to_string(ri) + ": " + std::to_string(tiles_left) + " tiles never drained within " +
                        std::to_string(limit) + " cycles");
        result[ri * 4] = last_output - first_accept + 1;
        result[ri * 4 + 1] = result[ri * 4 + 3] + RESET + first_accept;
        result[ri * 4 + 2] = result[ri * 4 + 3] + RESET + last_output;
    }
    const std::vector<int64_t> perf = {now_ns(CLOCK_MONOTONIC) - wall0, now_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0, clk.tick};
    clk.close();
    top.final();
    finish_mapped(dir, "out.bin", out_m);
    write_result(dir, "tiles.bin", tile_done);
    write_result(dir, "perf.bin", perf);
    write_result(dir, "result.bin", result);  // last: its presence means the job finished
    return 0;
}
