// out (C, R) = transpose of inp (R, C), both row-major, R % 4 == 0 and C % 4 == 0: one
// invocation per 4x4 block, vec4 reads and writes (matmul uses it to turn a wide row-major b
// into b^T, whose rows it can stream).
struct Params { R: u32, C: u32, _a: u32, _b: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<vec4f>; // (C, R)
@group(0) @binding(1) var<storage, read_write> inp: array<vec4f>; // (R, C)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(16, 4)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let cq = wg.x * 16u + l.x; // column quad of inp
  let rq = wg.y * 4u + l.y;  // row quad of inp
  let C4 = p.C / 4u;
  let R4 = p.R / 4u;
  if (cq >= C4 || rq >= R4) { return; }
  let i = rq * 4u * C4 + cq;
  let m = transpose(mat4x4f(inp[i], inp[i + C4], inp[i + 2u * C4], inp[i + 3u * C4]));
  let o = cq * 4u * R4 + rq;
  out[o] = m[0];
  out[o + R4] = m[1];
  out[o + 2u * R4] = m[2];
  out[o + 3u * R4] = m[3];
}
