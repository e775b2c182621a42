// Batch driver of a Verilated module whose every input is given per cycle (a combine unit behind the wrapper
// kaleido_engine of sim/engines/verilator_stream.py, which registers the reset and gathers the module's inputs
// into in_bus and its outputs into out_bus, each port at a whole byte): per cycle the driver copies one record
// into in_bus, evaluates, and copies out_bus into the output file, with no Python per cycle.
//
// Usage: Vkaleido_engine <job dir> [--fst FILE --waves-from TICK --waves-cycles N]
//
// Files in the job dir (little-endian, written by sim/engines/verilator_stream.py):
//   meta.bin  int64[8]: version, n_runs, n_cycles, in_bytes, out_bytes, 0, 0, 0.
//   runs.bin  int64[n_runs][2]: first cycle record, cycles.
//   stim.bin  uint8[n_cycles][in_bytes]: in_bus per cycle.
// Written: out.bin (uint8[n_cycles][out_bytes]: out_bus in each cycle, after its inputs settled and before the
// clock edge), result.bin (int64[n_runs][2]: the tick of the run's first reset cycle and of its cycle 0),
// perf.bin (int64[3]: wall and CPU nanoseconds of the clock loop, and its ticks). Every run starts from reset:
// 3 ticks with the wrapper's reset input high, 1 low, so the module leaves reset at cycle 0.
// Exit status: 0 done; 2 bad job files (message on stderr).

#include "Vkaleido_engine.h"
#include "verilator_common.h"

static const int64_t JOB_VERSION = 1;

int main(int argc, char** argv) {
    const Options opt = parse_options(argc, argv);
    const std::string dir = opt.dir;
    const int64_t* meta = read_meta(dir, 8, JOB_VERSION);
    const int64_t n_runs = meta[1], n_cycles = meta[2], in_bytes = meta[3], out_bytes = meta[4];
    Mapped runs_m = map_in(dir + "/runs.bin", (size_t)n_runs * 2 * 8);
    Mapped stim_m = map_in(dir + "/stim.bin", (size_t)(n_cycles * in_bytes));
    const int64_t* runs = static_cast<const int64_t*>(runs_m.ptr);
    const uint8_t* stim = static_cast<const uint8_t*>(stim_m.ptr);
    Mapped out_m = map_out(dir + "/out.bin.part", (size_t)(n_cycles * out_bytes));
    uint8_t* out = static_cast<uint8_t*>(out_m.ptr);
    std::vector<int64_t> result(n_runs * 2, 0);

    VerilatedContext ctx;
    Vkaleido_engine top(&ctx);
    uint8_t* in_bus = bytes_of(top.in_bus);
    const uint8_t* out_bus = bytes_of(top.out_bus);
    if ((size_t)in_bytes > size_of(top.in_bus) || (size_t)out_bytes > size_of(top.out_bus))
        fail(2, "bus images larger than the Verilated ports (wrong config?)");
    Clock<Vkaleido_engine> clk(ctx, top, opt);

    const int64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int64_t ri = 0; ri < n_runs; ++ri) {
        result[ri * 2] = clk.tick;
        std::memset(in_bus, 0, size_of(top.in_bus));
        clk.reset(1);
        result[ri * 2 + 1] = clk.tick;
        for (int64_t c = runs[ri * 2]; c < runs[ri * 2] + runs[ri * 2 + 1]; ++c) {
            std::memcpy(in_bus, stim + c * in_bytes, (size_t)in_bytes);
            clk.settle();
            std::memcpy(out + c * out_bytes, out_bus, (size_t)out_bytes);
            clk.rise();
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
