"""cuBLAS reference for examples/gpu_check.rs: plain FP32 SGEMM (TF32 off) at gpu_check's
shapes and a device-to-device copy through PyTorch, medians of CUDA-event timed runs."""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def median_ms(fn, warmup=3, runs=21):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[runs // 2]


for m, n, k in [(4096, 4096, 4096), (1024, 4096, 4096), (512, 1536, 576)]:
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    ms = median_ms(lambda: a @ b)
    print(f"| cuBLAS SGEMM {m}x{n}x{k} (PyTorch {torch.__version__}, TF32 off) | {ms:.3} | {2 * m * n * k / ms / 1e6:.0f} GFLOP/s | - |")
src = torch.ones(64 << 20, device="cuda")
dst = torch.empty_like(src)
ms = median_ms(lambda: dst.copy_(src))
print(f"| PyTorch copy 256 MiB | {ms:.3} | {2 * src.numel() * 4 / ms / 1e6:.0f} GB/s (read + write) | - |")
