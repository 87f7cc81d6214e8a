#!/usr/bin/env bash
# One prepared check of the engine on a real GPU (the workplace's device machine: NVIDIA, no Node,
# no network). Expects, carried beside the working tree: .gl/ (Debian's libvulkan1 .deb: the
# Vulkan loader), .dev/node.tar.xz (this machine's /usr/bin/node), .dev/nm.tar.xz (node_modules
# without the dev-only giants and other platforms' dawn.node) and dist/ (npm run build).
# Writes JSON and logs under $OUT and prints a short table last.
set -u
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
step() { echo "== $1 ($(date +%T))"; }
# which checks to run (all by default): CHECKS="engine unit parallel comm telemetry"
CHECKS=${CHECKS:-engine unit parallel comm telemetry}
want() { [[ " $CHECKS " == *" $1 "* ]]; }

step setup
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /tmp/sw && tar -C /tmp/sw -xJf .dev/node.tar.xz && tar -xJf .dev/nm.tar.xz
export PATH=/tmp/sw/usr/bin:$PATH
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
node --version; nvidia-smi -L; nproc; ls /usr/local/nvidia/share/vulkan/icd.d/ 2>&1

step devices
timeout 40 node bin/shardwise.js devices --json >"$OUT/devices.json" 2>>"$OUT/log.txt" || { echo "no adapter: see log"; tail -5 "$OUT/log.txt"; exit 1; }

if want engine; then step engine
SHARDWISE_BENCH_MATMUL=256,512,1024,2048,4096 SHARDWISE_BENCH_TRAIN=tiny,tiny65,small,gpt2 \
  timeout 100 node dist/bench/engine.js >"$OUT/engine.json" 2>>"$OUT/log.txt"; echo "rc $?"
fi

if want unit; then step unit-tests
timeout 150 node node_modules/vitest/vitest.mjs run tests/unit/kernels tests/unit/model tests/unit/runtime.test.ts tests/unit/allocator.test.ts >"$OUT/unit.log" 2>&1; echo "rc $?"
fi

if want parallel; then step parallel
BENCH_STEPS=${BENCH_STEPS:-8} timeout ${PARALLEL_TIMEOUT:-90} node dist/bench/parallel.js >"$OUT/parallel.json" 2>>"$OUT/log.txt"; echo "rc $?"
fi

if want comm; then step comm
timeout ${COMM_TIMEOUT:-90} node dist/bench/comm.js --worlds 2,4 --ops allreduce --iters 10 ${COMM_ARGS:-} >"$OUT/comm.json" 2>>"$OUT/log.txt"; echo "rc $?"
fi

if want telemetry; then step telemetry
timeout ${TELEMETRY_TIMEOUT:-120} node dist/bench/telemetry-overhead.js >"$OUT/telemetry.json" 2>>"$OUT/log.txt"; echo "rc $?"
fi

step summary
node -e '
const fs = require("fs"); const o = process.argv[1];
const j = (f) => { try { return JSON.parse(fs.readFileSync(o + "/" + f, "utf8")); } catch (e) { return { error: String(e).slice(0, 200) }; } };
const d = j("devices.json");
for (const g of (d.system && d.system.controllers) || []) console.log("system gpu", JSON.stringify(g));
for (const a of d.adapters ?? []) console.log("adapter", a.index, a.description, a.isSoftware ? "software" : "hardware", JSON.stringify(a.systemGpu));
const e = j("engine.json");
console.log("adapter", JSON.stringify(e.adapter && { d: e.adapter.description, v: e.adapter.vendor, a: e.adapter.architecture, sw: e.adapter.isSoftware }));
for (const m of e.matmul ?? []) console.log("matmul", m.n, m.gflops.toFixed(1), "GFLOP/s");
for (const t of e.train ?? []) console.log("train", t.preset, t.tokens_per_s.toFixed(0), "tok/s", t.step_ms.toFixed(1), "ms/step");
const p = j("parallel.json");
for (const r of p.results ?? []) console.log("parallel", r.strategy, r.world, r.step_ms && r.step_ms.toFixed(1), "ms", r.error ?? "", r.bubble ? "bubble " + r.bubble.measured.map((x) => x.toFixed(3)).join("/") + " theory " + r.bubble.theory.toFixed(3) : "");
const t = j("telemetry.json");
if (!t.error) console.log("telemetry", JSON.stringify(t).slice(0, 600));
const c = j("comm.json");
console.log("tcp", c.tcp_gbps, c.tcp_duplex_gbps);
for (const r of c.results ?? []) if (r.bytes >= 1 << 20 || r.bytes <= 8) console.log("comm", r.op, r.recv ?? r.transport ?? "", r.world, r.bytes, (r.busbw_gbps ?? 0).toFixed(2), "GB/s", r.median_us);
' "$OUT"
[ -f "$OUT/unit.log" ] && grep -E "Test Files|Tests |FAIL|✗|×" "$OUT/unit.log" | head -20
