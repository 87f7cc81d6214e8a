// Layernorm backward pass 1 on vec4 rows (C % 4 == 0): layernorm-backward.wgsl, dinp += .
struct Params { N: u32, C: u32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> dinp: array<vec4f>;   // (N, C)
@group(0) @binding(1) var<storage, read_write> dout: array<vec4f>;   // (N, C)
@group(0) @binding(2) var<storage, read_write> inp: array<vec4f>;    // (N, C)
@group(0) @binding(3) var<storage, read_write> weight: array<vec4f>; // (C)
@group(0) @binding(4) var<storage, read_write> mean: array<f32>;     // (N)
@group(0) @binding(5) var<storage, read_write> rstd: array<f32>;     // (N)
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_index) li: u32) {
  let row = (wg.x + wg.y * nwg.x) * 64u + li;
  if (row >= p.N) { return; }
  let C4 = p.C / 4u;
  let base = row * C4;
  let m = mean[row];
  let r = rstd[row];
  var sd = vec4f(0.0);
  var sdn = vec4f(0.0);
  for (var c = 0u; c < C4; c++) {
    let dn = weight[c] * dout[base + c];
    sd += dn;
    sdn += dn * (inp[base + c] - m) * r;
  }
  let md = (sd.x + sd.y + sd.z + sd.w) / f32(p.C);
  let mdn = (sdn.x + sdn.y + sdn.z + sdn.w) / f32(p.C);
  for (var c = 0u; c < C4; c++) {
    let dn = weight[c] * dout[base + c];
    let nrm = (inp[base + c] - m) * r;
    dinp[base + c] = dinp[base + c] + (dn - md - nrm * mdn) * r;
  }
}
