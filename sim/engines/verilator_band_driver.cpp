// Batch driver of the Verilated banded array top (kaleido_ctop or kaleido_dtop behind the wrapper kaleido_engine
// of sim/engines/verilator_band.py, which registers the reset and gathers the per-band ports into vectors, a
// band's field at a whole byte): the band-tile stimulus of a job lies in memory-mapped files, the clock loop is
// compiled, no Python runs per cycle. It drives the ports as tests/rtl/compact_bench.py's `run_top` does under
// Amaranth's simulator: each band runs the band-tile its b{b}_tile output names (the RTL's band choice), slot by
// slot as its ready allows, and every drained row is matched to the band-tile whose last slot armed its port.
//
// Usage: Vkaleido_engine <job dir> [--fst FILE --waves-from TICK --waves-cycles N]
//
// Files in the job dir (little-endian, written by sim/engines/verilator_band.py):
//   meta.bin     int64[16]: version, n_runs, n_slots, n_tiles, n_rows, rec_bytes, B, brows, C, d, acc_bits,
//                words per drained column (2 compact, 1 delta), row bits of out_row, operand image bytes per
//                band (x_a, x_b), mode image bytes per band, ports per band.
//   ports.bin    int64[B][ports per band]: the output port of each of a band's drain sequencers, in the order
//                the band uses them (round robin).
//   runs.bin     int64[n_runs][4]: first band-tile, band-tiles, x_unsigned, 0.
//   tiles_in.bin int64[n_tiles][3]: first slot, slots, first row (index into rows.bin) of each band-tile.
//   stim.bin     uint8[n_slots][rec_bytes]: per slot the byte images of b_x_a, b_x_b, b_mode (the operand
//                and mode lanes of the band's rows), b_w_a, b_w_b (C bytes each), a flag byte (first | last
//                << 1) and the band-tile's valid rows.
// Written: rows.bin (int64[n_rows][C * words]: each band-tile's drained rows, word w of column j at j * words
// + w), rowat.bin (int64[n_rows][2]: the cycle each row was on the output ports and its port), tiles.bin
// (int64[n_tiles][2]: the band that ran the band-tile and the cycle its last slot was accepted), result.bin
// (int64[n_runs][4]: the cycle of the last drained row, the tick of the run's first reset cycle, the tick of
// its cycle 0, the tick of its last row), perf.bin (int64[3]: wall and CPU nanoseconds of the clock loop over
// every run, reset cycles included, and the ticks it ran). Cycles count from a run's first stimulus cycle
// (cycle 0: band b presents band-tile b), as sim.timing.compact.band_schedule counts them.
// Exit status: 0 done; 2 bad job files (message on stderr); 3 the RTL broke the drain protocol (a row out of
// order, a row for no armed band-tile, rows not drained in time).

#include "Vkaleido_engine.h"
#include "verilator_common.h"

#include <deque>

static const int64_t JOB_VERSION = 1;

int main(int argc, char** argv) {
    const Options opt = parse_options(argc, argv);
    const std::string dir = opt.dir;

    const int64_t* meta = read_meta(dir, 16, JOB_VERSION);
    const int64_t n_runs = meta[1], n_slots = meta[2], n_tiles = meta[3], n_rows = meta[4], rec = meta[5];
    const int B = (int)meta[6], BR = (int)meta[7], C = (int)meta[8], D = (int)meta[9], AB = (int)meta[10];
    const int NW = (int)meta[11], RB = (int)meta[12], XB = (int)meta[13], MB = (int)meta[14], PB = (int)meta[15];
    if (AB > 56 || AB < 2) fail(2, "acc_bits " + std::to_string(AB) + " outside 2..56");
    if (rec != 2 * XB + MB + 2 * C + 2) fail(2, "record size " + std::to_string(rec) + " does not match the meta");

    Mapped ports_m = map_in(dir + "/ports.bin", (size_t)B * PB * 8);
    Mapped runs_m = map_in(dir + "/runs.bin", (size_t)n_runs * 4 * 8);
    Mapped tin_m = map_in(dir + "/tiles_in.bin", (size_t)n_tiles * 3 * 8);
    Mapped stim_m = map_in(dir + "/stim.bin", (size_t)(n_slots * rec));
    const int64_t* bports = static_cast<const int64_t*>(ports_m.ptr);
    const int64_t* runs = static_cast<const int64_t*>(runs_m.ptr);
    const int64_t* tin = static_cast<const int64_t*>(tin_m.ptr);
    const uint8_t* stim = static_cast<const uint8_t*>(stim_m.ptr);
    const int64_t row_words = (int64_t)C * NW;
    Mapped rows_m = map_out(dir + "/rows.bin.part", (size_t)(n_rows * row_words * 8));
    int64_t* rows_out = static_cast<int64_t*>(rows_m.ptr);
    std::vector<int64_t> rowat(n_rows * 2, -1), tiles_out(n_tiles * 2, -1), result(n_runs * 4, 0);

    VerilatedContext ctx;
    Vkaleido_engine top(&ctx);
    uint8_t* img_xa = bytes_of(top.in_x_a);
    uint8_t* img_xb = bytes_of(top.in_x_b);
    uint8_t* img_mode = bytes_of(top.in_mode);
    uint8_t* img_wa = bytes_of(top.in_w_a);
    uint8_t* img_wb = bytes_of(top.in_w_b);
    uint8_t* img_rows = bytes_of(top.in_rows);
    if ((size_t)B * XB > size_of(top.in_x_a) || (size_t)B * MB > size_of(top.in_mode) ||
        (size_t)B * C > size_of(top.in_w_a) || (size_t)B > size_of(top.in_rows) || 4 * (size_t)B > size_of(top.out_tile))
        fail(2, "stimulus images larger than the Verilated ports (wrong config?)");
    const size_t data_bytes = size_of(top.out_data), row_bytes = size_of(top.out_row);
    if ((size_t)(D * C * NW * AB + 7) / 8 > data_bytes || (size_t)(D * RB + 7) / 8 > row_bytes)
        fail(2, "output ports narrower than the job's C, d, acc_bits (wrong config?)");
    std::vector<uint8_t> dbuf(data_bytes + 8, 0), rbuf(row_bytes + 8, 0);

    Clock<Vkaleido_engine> clk(ctx, top, opt);

    const int64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    std::vector<int64_t> cur(B), slot(B), ended(B);
    std::vector<std::deque<int64_t>> armed((size_t)D * B);  // per (port, band): band-tiles draining there, in order
    std::vector<int64_t> drained(n_tiles, 0);
    for (int64_t ri = 0; ri < n_runs; ++ri) {
        const int64_t t0 = runs[ri * 4], nt = runs[ri * 4 + 1];
        result[ri * 4 + 1] = clk.tick;
        std::memset(img_xa, 0, size_of(top.in_x_a));
        std::memset(img_xb, 0, size_of(top.in_x_b));
        std::memset(img_mode, 0, size_of(top.in_mode));
        std::memset(img_wa, 0, size_of(top.in_w_a));
        std::memset(img_wb, 0, size_of(top.in_w_b));
        std::memset(img_rows, 0, size_of(top.in_rows));
        top.in_valid = 0; top.in_first = 0; top.in_last = 0;
        top.x_unsigned = (uint8_t)runs[ri * 4 + 2];
        // The wrapper registers rst: 3 cycles high, then 1 low, so the design sees 4 reset cycles and leaves reset at
        // cycle 0 (BAND_RESET_TICKS in verilator_band.py): its drain sequencers' time-share counter is 0 there,
        // as band_schedule's port phases (c mod q) assume.
        clk.reset(1);
        result[ri * 4 + 2] = clk.tick;

        int64_t rows_left = 0, slots_all = 0;
        for (int64_t t = t0; t < t0 + nt; ++t) {
            rows_left += stim[(tin[t * 3] + tin[t * 3 + 1] - 1) * rec + rec - 1];
            slots_all += tin[t * 3 + 1];
        }
        for (int b = 0; b < B; ++b) { cur[b] = -1; slot[b] = 0; ended[b] = 0; }
        for (auto& q : armed) q.clear();
        int64_t cycle = 0, last_row = -1;
        const int64_t limit = 50 * (slots_all + 10);
        while (rows_left && cycle < limit) {
            uint64_t valid = 0, first = 0, last = 0;
            const uint8_t* tiles_reg = bytes_of(top.out_tile);
            for (int b = 0; b < B; ++b) {
                uint32_t ti;
                std::memcpy(&ti, tiles_reg + 4 * b, 4);
                if ((int64_t)ti != cur[b]) { cur[b] = ti; slot[b] = 0; }
                if (cur[b] >= nt) continue;
                const int64_t t = t0 + cur[b];
                const uint8_t* r = stim + (tin[t * 3] + slot[b]) * rec;
                std::memcpy(img_xa + (size_t)b * XB, r, XB); r += XB;
                std::memcpy(img_xb + (size_t)b * XB, r, XB); r += XB;
                std::memcpy(img_mode + (size_t)b * MB, r, MB); r += MB;
                std::memcpy(img_wa + (size_t)b * C, r, C); r += C;
                std::memcpy(img_wb + (size_t)b * C, r, C); r += C;
                valid |= 1ull << b;
                first |= (uint64_t)(r[0] & 1) << b;
                last |= (uint64_t)((r[0] >> 1) & 1) << b;
                img_rows[b] = r[1];
            }
            top.in_valid = valid; top.in_first = first; top.in_last = last;
            clk.settle();
            const uint64_t ready = (uint64_t)top.out_ready;
            for_each_drained_row(top, dbuf, rbuf, data_bytes, row_bytes, D, RB, [&](int p, int64_t row) {
                const int band = (int)(row / BR), i = (int)(row % BR);
                auto& q = armed[(size_t)p * B + band];
                const std::string where = "run " + std::to_string(ri) + " cycle " + std::to_string(cycle) +
                                          " port " + std::to_string(p) + " band " + std::to_string(band);
                if (band >= B || q.empty()) fail(3, where + ": a row for no armed band-tile");
                const int64_t t = q.front();
                if (i != drained[t]) fail(3, where + ": row " + std::to_string(i) + ", expected " +
                                                 std::to_string(drained[t]));
                const int64_t at = tin[t * 3 + 2] + i;
                for (int j = 0; j < C; ++j)
                    for (int w = 0; w < NW; ++w)
                        rows_out[at * row_words + j * NW + w] =
                            lane(dbuf.data(), ((size_t)(p * C + j) * NW + w) * AB, AB);
                rowat[at * 2] = cycle;
                rowat[at * 2 + 1] = p;
                const int nrows = stim[(tin[t * 3] + tin[t * 3 + 1] - 1) * rec + rec - 1];
                if (++drained[t] == nrows) q.pop_front();
                --rows_left;
                last_row = cycle;
            });
            for (int b = 0; b < B; ++b) {
                if (!((valid >> b) & 1) || !((ready >> b) & 1)) continue;
                const int64_t t = t0 + cur[b];
                if (slot[b] == tin[t * 3 + 1] - 1) {  // its last slot: the band-tile arms its port's sequencer
                    const int64_t port = bports[b * PB + ended[b] % PB];
                    armed[(size_t)port * B + b].push_back(t);
                    ++ended[b];
                    tiles_out[t * 2] = b;
                    tiles_out[t * 2 + 1] = cycle;
                }
                ++slot[b];
            }
            clk.rise();
            ++cycle;
        }
        if (rows_left)
            fail(3, "run " + std::to_string(ri) + ": " + std::to_string(rows_left) + " rows never drained within " +
                        std::to_string(limit) + " cycles");
        result[ri * 4] = last_row;
        result[ri * 4 + 3] = result[ri * 4 + 2] + last_row;
    }
    const std::vector<int64_t> perf = {now_ns(CLOCK_MONOTONIC) - wall0, now_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0, clk.tick};
    clk.close();
    top.final();
    finish_mapped(dir, "rows.bin", rows_m);
    write_result(dir, "rowat.bin", rowat);
    write_result(dir, "tiles.bin", tiles_out);
    write_result(dir, "perf.bin", perf);
    write_result(dir, "result.bin", result);  // last: its presence means the job finished
    return 0;
}
