# Kaleido simulator and RTL generator. The README's two commands are `make demo` and `make test`;
# both create .venv and install everything on a fresh machine (`make setup`).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
KALEIDO := $(VENV)/bin/kaleido
STAMP  := $(VENV)/.stamp-setup
# torch is installed first and pinned: a CPU build of 2.13.0 lies on this machine's disk, while a
# bare `torch` requirement would pull a multi-GB CUDA build (README, "The two commands").
TORCH  := torch==2.13.0

# The demo captures the trained small model (algo/train/assets/wan-small) unless DEMO_WEIGHTS=seeded
# (the seeded tiny model, as before training existed).
TRAINED := algo/train/assets/wan-small/diffusion_pytorch_model.safetensors
DEMO_WEIGHTS ?= trained
ifeq ($(DEMO_WEIGHTS),seeded)
DEMO_MODEL := --model wan2.1-t2v-1.3b --size tiny
else
DEMO_MODEL := --model wan2.1-t2v-1.3b --size small --weights $(TRAINED)
endif

.PHONY: setup rtl demo test bench bench-capture lint train clean distclean help

help:
	@echo "make demo   - capture a trace of the trained small Wan DiT, simulate it with the baselines, write a report"
	@echo "              (sets up .venv first; DEMO_WEIGHTS=seeded: the seeded tiny model instead)"
	@echo "make train  - retrain the small Wan DiT (about 10 CPU minutes, one thread) into build/wan-small"
	@echo "make test   - run the test suite (sets up .venv first)"
	@echo "make rtl    - emit Verilog for every preset into rtl_out/ (parallel; unchanged files kept, FORCE=1: all)"
	@echo "make lint   - ruff on the Python, verilator --lint-only -Wall on every emitted Verilog file (hw.lint;"
	@echo "              tiny-8x8 also as a whole hierarchy)"
	@echo "make bench  - speed benchmarks (golden model, cycle model, vs SCALE-Sim); bench-capture: 480p capture"
	@echo "make clean  - remove generated outputs (keeps .venv); distclean also removes .venv"

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install --quiet $(TORCH) 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -m pip install --quiet -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -c "import torch, amaranth, cocotb, numba, diffusers, typer; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

# Converts in worker processes and keeps files whose inputs are unchanged (hw.rtl_build, docs/decisions.md
# D80); FORCE=1 converts everything again.
rtl: setup
	$(PY) -m hw.rtl --out rtl_out $(if $(FORCE),--force)

demo: setup
	$(KALEIDO) capture $(DEMO_MODEL) --out traces/demo.npz
	$(KALEIDO) simulate traces/demo.npz --config tiny-8x8 --json reports/demo-results.json
	$(KALEIDO) baselines traces/demo.npz --config tiny-8x8 --quality-steps 2 --json reports/demo-baselines.json
	$(KALEIDO) report reports/demo-baselines.json --out reports/demo
	@echo
	@echo "Demo outputs:"
	@echo "  trace          traces/demo.npz            (.venv/bin/kaleido inspect traces/demo.npz)"
	@echo "  results        reports/demo-results.json, reports/demo-baselines.json (+ dense, A100, AdapTiV/EXION/Cambricon-D-like)"
	@echo "  report         reports/demo/summary.md, per_op.csv, baselines.csv, baselines_per_op.csv, energy_breakdown.csv, area.csv"
	@echo "  figures        reports/demo/{cycles_per_op,energy_utilization,baselines,energy_breakdown,area_breakdown,"
	@echo "                 reuse_heatmap,quality_speedup}.png (.pdf)"

# Reproduces the shipped checkpoint (algo/train/assets/wan-small) into build/wan-small; compare
# with `kaleido train --eval build/wan-small/diffusion_pytorch_model.safetensors`.
train: setup
	$(KALEIDO) train --out build/wan-small

# pytest-xdist workers: one per CPU this process may use, at most 4 (CI: 2 cores); a test file's tests stay on one
# worker (--dist loadfile), so module fixtures such as tests/test_rtl.py's cocotb build run once. The compiled
# engines' build cache is locked per design (sim.engines.verilator_build.cache_lock), so two workers never build
# one engine twice. TEST_JOBS=0: one process.
TEST_JOBS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")

test: setup
	@case "$(TEST_JOBS)" in ''|*[!0-9]*) echo "error: TEST_JOBS=$(TEST_JOBS): expected a number of worker processes (0: one process)" >&2; exit 2;; esac
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile

bench: setup
	$(PY) -m sim.bench

# Capture of one Wan2.1-1.3B block at 480p vs a bare forward (about 10 minutes on 2 cores).
bench-capture: setup
	$(PY) -m algo.capture.bench

# Verilator -Wall over the whole hierarchy of tiny-8x8 (every file that instantiates others, with the whole
# folder), and per file (children as port stubs, hw.lint) on every other emitted folder; the 128x128
# hierarchy as a whole does not fit Verilator in this machine's memory (docs/decisions.md D29).
lint: setup rtl
	$(PY) -m ruff check algo hw sim tests
	$(PY) -m hw.lint --full rtl_out/tiny-8x8/
	$(PY) -m hw.lint $$(for d in rtl_out/*/; do [ "$$d" = rtl_out/tiny-8x8/ ] || echo "$$d"; done)

clean:
	rm -rf build reports out.json traces/demo.npz .pytest_cache .ruff_cache
	find rtl_out -mindepth 1 ! -name .gitkeep -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info
