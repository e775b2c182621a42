// Batch driver of a Verilated module whose every input is given per cycle (a combine unit or an op-level controller
// behind the wrapper kaleido_engine of sim/engines/verilator_stream.py, which registers the reset and gathers the
// module's inputs into in_bus and its outputs into out_bus, each port at a whole byte): per cycle the driver copies
// one record into in_bus, evaluates, and copies out_bus into the output file, with no Python per cycle and no
// protocol logic. A segment may end in a wait: its last record held until one output bit (the stop bit, e.g. a
// controller's done) is high, at most a given number of cycles.
//
// Usage: Vkaleido_engine <job dir> [--fst FILE --waves-from TICK --waves-cycles N]
//
// Files in the job dir (little-endian, written by sim/engines/verilator_stream.py):
//   meta.bin  int64[8]: version, n_runs, n_segments, n_records, in_bytes, out_bytes, stop byte (-1: none),
//             stop bit mask.
//   runs.bin  int64[n_runs][2]: first segment, segments.
//   segs.bin  int64[n_segments][3]: first record, records, wait (the most cycles its last record is held after
//             the records until the stop bit is high; 0: none).
//   stim.bin  uint8[n_records][in_bytes]: in_bus per cycle.
// Written: out.bin (uint8[sum of records + wait][out_bytes]: out_bus in each cycle, after its inputs settled and
// before the clock edge; segment after segment, each at its records + wait rows, the rows past its end zero),
// result.bin (int64[n_segments][2]: the tick of the segment's first cycle and the cycles it ran: its records plus
// the held cycles up to and including the one whose stop bit is high), perf.bin (int64[3]: wall and CPU
// nanoseconds of the clock loop, and its ticks). Every run starts from reset: 3 ticks with the wrapper's reset
// input high, 1 low, so the module leaves reset at the run's first record.
// Exit status: 0 done; 2 bad job files (message on stderr); 3 a wait ran out before the stop bit rose.

#include "Vkaleido_engine.h"
#include "verilator_common.h"

static const int64_t JOB_VERSION = 2;

int main(int argc, char** argv) {
    const Options opt = parse_options(argc, argv);
    const std::string dir = opt.dir;
    const int64_t* meta = read_meta(dir, 8, JOB_VERSION);
    const int64_t n_runs = meta[1], n_segs = meta[2], n_recs = meta[3], in_bytes = meta[4], out_bytes = meta[5];
    const int64_t stop_byte = meta[6], stop_mask = meta[7];
    Mapped runs_m = map_in(dir + "/runs.bin", (size_t)n_runs * 2 * 8);
    Mapped segs_m = map_in(dir + "/segs.bin", (size_t)n_segs * 3 * 8);
    Mapped stim_m = map_in(dir + "/stim.bin", (size_t)(n_recs * in_bytes));
    const int64_t* runs = static_cast<const int64_t*>(runs_m.ptr);
    const int64_t* segs = static_cast<const int64_t*>(segs_m.ptr);
    const uint8_t* stim = static_cast<const uint8_t*>(stim_m.ptr);
    int64_t rows = 0;
    for (int64_t s = 0; s < n_segs; ++s) {
        const int64_t first = segs[s * 3], n = segs[s * 3 + 1], wait = segs[s * 3 + 2];
        if (first < 0 || n < 0 || wait < 0 || first + n > n_recs || (wait > 0 && (n == 0 || stop_byte < 0)))
            fail(2, "segment " + std::to_string(s) + ": records out of range, or a wait without a record or stop bit");
        rows += n + wait;
    }
    if (stop_byte >= out_bytes) fail(2, "stop byte beyond out_bus");
    Mapped out_m = map_out(dir + "/out.bin.part", (size_t)(rows * out_bytes));
    uint8_t* out = static_cast<uint8_t*>(out_m.ptr);
    std::vector<int64_t> result(n_segs * 2, 0);

    VerilatedContext ctx;
    Vkaleido_engine top(&ctx);
    uint8_t* in_bus = bytes_of(top.in_bus);
    const uint8_t* out_bus = bytes_of(top.out_bus);
    if ((size_t)in_bytes > size_of(top.in_bus) || (size_t)out_bytes > size_of(top.out_bus))
        fail(2, "bus images larger than the Verilated ports (wrong config?)");
    Clock<Vkaleido_engine> clk(ctx, top, opt);

    const int64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint8_t* row = out;
    for (int64_t ri = 0; ri < n_runs; ++ri) {
        std::memset(in_bus, 0, size_of(top.in_bus));
        clk.reset(1);
        for (int64_t s = runs[ri * 2]; s < runs[ri * 2] + runs[ri * 2 + 1]; ++s) {
            const int64_t first = segs[s * 3], n = segs[s * 3 + 1], wait = segs[s * 3 + 2];
            result[s * 2] = clk.tick;
            int64_t ran = 0;
            for (int64_t c = first; c < first + n; ++c, ++ran) {
                std::memcpy(in_bus, stim + c * in_bytes, (size_t)in_bytes);
                clk.settle();
                std::memcpy(row + ran * out_bytes, out_bus, (size_t)out_bytes);
                clk.rise();
            }
            bool stopped = wait == 0;
            for (int64_t k = 0; k < wait && !stopped; ++k, ++ran) {  // the last record stays on in_bus
                clk.settle();
                std::memcpy(row + ran * out_bytes, out_bus, (size_t)out_bytes);
                stopped = (out_bus[stop_byte] & stop_mask) != 0;
                clk.rise();
            }
            if (!stopped)
                fail(3, "run " + std::to_string(ri) + " segment " + std::to_string(s) + ": the stop bit did not rise within " +
                            std::to_string(wait) + " cycles after its records");
            result[s * 2 + 1] = ran;
            row += (n + wait) * out_bytes;
        }
    }
    const std::vector<int64_t> perf = {now_ns(CLOCK_MONOTONIC) - wall0, now_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0, clk.tick};
    clk.close();
    top.final();
    finish_mapped(dir, "out.bin", out_m);
    write_result(dir, "perf.bin", perf);
    write_result(dir, "result.bin", result);  // last: its presence means the job finished
    return 0;
}
