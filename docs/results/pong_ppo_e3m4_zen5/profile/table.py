"""The profile table of this folder's README from the bench profile records (*.json)."""
import json
import os

print("| run | rollout: env / acting | update: forward / backward / rest | cycle (s) | frames/s |")
print("| --- | --- | --- | --- | --- |")
here = os.path.dirname(os.path.abspath(__file__))
for prec in ("avx2_fp32", "bf16"):
    for r in (1, 2):
        for e in (4, 3):
            f = os.path.join(here, f"{prec}-e{e}-r{r}.json")
            if not os.path.exists(f):
                continue
            s = json.load(open(f))["summary"]
            p = s["phases_s"]
            env = p["rollout/env send"] + p["rollout/env wait"]
            rest = p["update"] + p.get("update/optimizer", 0.0)
            print(f"| {prec}, {e} epochs, round {r} | {env:.2f} / {p['rollout/act']:.2f} | "
                  f"{p['update/forward']:.2f} / {p['update/backward']:.2f} / {rest:.2f} | "
                  f"{s['wall_s']:.2f} | {s['frames_per_second']:,.0f} |")
