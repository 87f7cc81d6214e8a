// Layernorm backward, pass 1: dinp (N, C) += per row, one invocation per row, rows read W
// elements at a time (prelude: source.ts; C % W == 0).
//   norm = (inp - mean) * rstd; dnorm = weight * dout
//   dinp += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd
struct Params { N: u32, C: u32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> dinp: array<S>;   // (N, C)
@group(0) @binding(1) var<storage, read_write> dout: array<S>;   // (N, C)
@group(0) @binding(2) var<storage, read_write> inp: array<S>;    // (N, C)
@group(0) @binding(3) var<storage, read_write> weight: array<S>; // (C)
@group(0) @binding(4) var<storage, read_write> mean: array<f32>; // (N)
@group(0) @binding(5) var<storage, read_write> rstd: array<f32>; // (N)
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let row = (wg.x + wg.y * nwg.x) * 64u + li;
  if (row >= p.N) { return; }
  let CW = p.C / W;
  let base = row * CW;
  let m = mean[row];
  let r = rstd[row];
  var sd = V(0.0);
  var sdn = V(0.0);
  for (var c = 0u; c < CW; c++) {
    let dn = ld(weight[c]) * ld(dout[base + c]);
    sd += dn;
    sdn += dn * (ld(inp[base + c]) - m) * r;
  }
  let md = hsum(sd) / f32(p.C);
  let mdn = hsum(sdn) / f32(p.C);
  for (var c = 0u; c < CW; c++) {
    let dn = ld(weight[c]) * ld(dout[base + c]);
    let nrm = (ld(inp[base + c]) - m) * r;
    dinp[base + c] = st(ld(dinp[base + c]) + (dn - md - nrm * mdn) * r);
  }
}
