"""The quality θ sweep's files: ``quality_sweep.csv``, ``.json``, ``.png`` and ``.pdf``
(`write_quality_sweep`, called by ``kaleido quality-sweep``), from `algo.quality.sweep_quality`'s result.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from algo.fileio import atomic_write_bytes
from algo.quality.output import caption, to_jsonable


def _fmt(v: float, nd: int = 2) -> str:
    return f"{v:.{nd}f}" if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def write_quality_sweep(res: dict, out_dir: str | Path) -> list[Path]:
    """Write ``quality_sweep.csv``, ``quality_sweep.json``, ``quality_sweep.png`` and ``.pdf`` atomically.

    The figure plots PSNR (dB) and SSIM of the final latents and the SNR (dB) of the model output
    against the MAC-weighted work saved (%), marks the PSNR Pareto front and draws the int8-vs-fp32
    values (no reuse) as context lines; points with
    infinite PSNR (no reuse) are listed in the legend, not plotted. Fixed metadata: equal inputs give
    byte-identical files.

    Args:
        res: `algo.quality.sweep_quality`'s result (its ``files`` key is not written).
        out_dir: folder, created if missing.

    Returns:
        The written paths, in order (CSV, JSON, PNG, PDF).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pts, front, cfg = res["points"], set(res["pareto"]), res["config"]
    ops = cfg["quant_ops"]
    written = []

    fields = ["theta1", "theta2", "compute", "partial", "reuse", "mac_saved", "latent_psnr_db", "latent_ssim",
              "velocity_snr_db", "update_snr_db", "pareto"] + [f"snr_db_{o}" for o in ops] + [f"local_snr_db_{o}" for o in cfg["ops"]]
    frames = bool(pts) and "frame_psnr_db" in pts[0]
    fields += ["frame_psnr_db", "frame_ssim"] if frames else []
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(fields)
    for i, p in enumerate(pts):
        w.writerow([_fmt(p["theta1"], 3), _fmt(p["theta2"], 3), _fmt(p["compute"], 5), _fmt(p["partial"], 5),
                    _fmt(p["reuse"], 5), _fmt(p["mac_saved"], 5), _fmt(p["latent_psnr_db"], 3),
                    _fmt(p["latent_ssim"], 5), _fmt(p["velocity_snr_db"], 3), _fmt(p["update_snr_db"], 3),
                    int(i in front)]
                   + [_fmt(p["snr_db"][o], 3) for o in ops] + [_fmt(p["local_snr_db"][o], 3) for o in cfg["ops"]]
                   + ([_fmt(p["frame_psnr_db"], 3), _fmt(p["frame_ssim"], 5)] if frames else []))
    written.append(atomic_write_bytes(out / "quality_sweep.csv", buf.getvalue().encode()))
    written.append(atomic_write_bytes(out / "quality_sweep.json",
                                      (json.dumps(to_jsonable({k: v for k, v in res.items() if k != "files"}),
                                                  indent=2) + "\n").encode()))

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    fin = [i for i, p in enumerate(pts) if math.isfinite(p["latent_psnr_db"])]
    inf_pts = [p for p in pts if not math.isfinite(p["latent_psnr_db"])]
    for ax, key, ylabel in ((axes[0], "latent_psnr_db", "PSNR of final latents vs exact int8 run (dB)"),
                            (axes[1], "latent_ssim", "SSIM of final latents vs exact int8 run (1 = equal)"),
                            (axes[2], "velocity_snr_db", "SNR of model output v vs exact int8 run (dB)")):
        xs = [100 * pts[i]["mac_saved"] for i in fin]
        ys = [pts[i][key] for i in fin]
        ax.plot(xs, ys, "o", color="tab:blue", label="sweep point (label: θ1,θ2)")
        for i in fin:
            ax.annotate(f"{pts[i]['theta1']:g},{pts[i]['theta2']:g}", (100 * pts[i]["mac_saved"], pts[i][key]),
                        textcoords="offset points", xytext=(4, 3), fontsize=7)
        fr = [i for i in res["pareto"] if i in fin]
        if key == "latent_psnr_db" and fr:
            ax.plot([100 * pts[i]["mac_saved"] for i in fr], [pts[i][key] for i in fr], "-", color="tab:red",
                    label="Pareto front (max PSNR per reuse)")
        ivf_key = {"latent_psnr_db": "psnr_db", "velocity_snr_db": "velocity_snr_db"}.get(key)
        ivf = (res.get("int8_vs_float") or {}).get(ivf_key) if ivf_key else None
        if ivf is not None and math.isfinite(ivf):
            ax.axhline(ivf, ls="--", color="gray", label=f"int8 vs fp32, no reuse ({ivf:.1f} dB)")
        if inf_pts:
            ax.plot([], [], " ", label="not plotted (identical, PSNR ∞): θ = "
                    + "; ".join(f"{p['theta1']:g},{p['theta2']:g}" for p in inf_pts))
        ax.set_xlabel("work saved: REUSE + ½ PARTIAL (% of enabled ops' MACs)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Kaleido reuse: output quality vs reuse fraction")
    fig.text(0.5, 0.01, caption(cfg), ha="center", va="bottom", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    for ext, kw in (("png", {"dpi": 150}), ("pdf", {})):
        b = io.BytesIO()
        meta = {"Software": None} if ext == "png" else {"CreationDate": None, "Producer": None, "Creator": None}
        fig.savefig(b, format=ext, metadata=meta, **kw)
        written.append(atomic_write_bytes(out / f"quality_sweep.{ext}", b.getvalue()))
    plt.close(fig)
    return written
