"""What PyTorch CPU stores in 16 bits in its channel norms and pooling (docs/methodology.md §2.1).

For bf16 and fp16 inputs of shape 8x16x32x32 (mean 5, spread 3; torch.manual_seed(0)) it prints,
per op, the fraction of outputs that differ from the fp32 computation rounded once to the 16-bit
type, and for batch_norm / instance_norm (training statistics) the fraction that differs from the
fp32 computation with the mean and 1/sigma rounded to the 16-bit type first, and with the mean,
the variance and 1/sqrt(var + eps) (from the rounded variance) rounded to it.

Run: ``python benchmarks/torch_norm16.py``.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    for dt in (torch.bfloat16, torch.float16):
        x = (torch.randn(8, 16, 32, 32) * 3 + 5).to(dt)
        w, b = (1 + 0.1 * torch.randn(16)).to(dt), (0.1 * torch.randn(16)).to(dt)
        rm, rv = torch.randn(16).to(dt), (torch.rand(16) + 0.5).to(dt)
        ops = {
            "group_norm": lambda x, w, b, rm, rv: F.group_norm(x, 4, w, b, 1e-5),
            "instance_norm": lambda x, w, b, rm, rv: F.instance_norm(x, weight=w, bias=b, eps=1e-5),
            "batch_norm(training)": lambda x, w, b, rm, rv: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5),
            "batch_norm(eval)": lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5),
            "avg_pool2d": lambda x, w, b, rm, rv: F.avg_pool2d(x, 3, 2, 1),
        }
        for name, f in ops.items():
            y16 = f(x, w, b, rm, rv)
            y32 = f(x.float(), w.float(), b.float(), rm.float(), rv.float()).to(dt)
            line = f"{str(dt):15} {name:22} differs from fp32-rounded-once: {(y16 != y32).float().mean().item():.3f}"
            if name.startswith(("batch_norm(t", "instance")):
                dims = (0, 2, 3) if name.startswith("batch") else (2, 3)
                xf = x.float()
                m = xf.mean(dims, keepdim=True).to(dt).float()
                inv = torch.rsqrt(xf.var(dims, keepdim=True, unbiased=False) + 1e-5).to(dt).float()
                sh = (1, 16, 1, 1)
                ys = ((xf - m) * inv * w.float().view(sh) + b.float().view(sh)).to(dt)
                line += f"; from mean and 1/sigma stored in 16 bits: {(y16 != ys).float().mean().item():.3f}"
                var16 = xf.var(dims, keepdim=True, unbiased=False).to(dt).float()
                inv3 = torch.rsqrt(var16 + 1e-5).to(dt).float()
                y3 = ((xf - m) * inv3 * w.float().view(sh) + b.float().view(sh)).to(dt)
                line += f"; mean, var and 1/sigma stored: {(y16 != y3).float().mean().item():.3f}"
            print(line)


if __name__ == "__main__":
    main()
