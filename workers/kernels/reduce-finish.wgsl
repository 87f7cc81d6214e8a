// Deterministic reduction, pass 2 (one invocation): out[0] = [out[0] +] scale * sum of partial in order.
struct Params { P: u32, accumulate: u32, scale: f32, _pad: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<f32>;     // (1)
@group(0) @binding(1) var<storage, read_write> partial: array<f32>; // (P)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(1)
fn main() {
  var s = 0.0;
  for (var j = 0u; j < p.P; j++) { s += partial[j]; }
  s *= p.scale;
  if (p.accumulate != 0u) { s = out[0] + s; }
  out[0] = s;
}
