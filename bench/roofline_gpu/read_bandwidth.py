"""Plain HBM read bandwidth on the device (torch): what a perfect decode kernel could reach.

    python3 bench/roofline_gpu/read_bandwidth.py [GB]   -> one JSON line

Sums a GB-sized bf16 tensor (reads every byte once), timed with CUDA events, 3 warm-ups,
median of 10; prints {"read_gbs_median", "read_gbs_samples", "gbytes", "torch", "device"}.
"""
import json
import statistics
import sys

import torch

gbytes = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
x = torch.ones(int(gbytes * 1e9 / 2), dtype=torch.bfloat16, device="cuda")
samples = []
for i in range(13):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    x.sum(dtype=torch.float32)
    end.record()
    end.synchronize()
    if i >= 3:
        samples.append(x.numel() * 2 / (start.elapsed_time(end) / 1e3) / 1e9)
print(json.dumps({"read_gbs_median": round(statistics.median(samples), 1),
                  "read_gbs_samples": [round(s, 1) for s in samples], "gbytes": gbytes,
                  "torch": torch.__version__, "device": torch.cuda.get_device_name()}))
