// Known GPUs: memory and dense peak throughput, from the vendors' datasheets. Data, not code: the
// advisor's what-if plans for one of these, and a run's MFU divides by the peak of the class its
// adapter's name matches. Dense figures (the "with sparsity" ones are 2x and no training kernel
// reaches them); half = fp16/bf16 on tensor cores with fp32 accumulation, which is what training
// uses. Memory is the datasheet's GB taken as GiB (2^30 bytes), which is what the cards report
// (an "80GB" H100 shows 81559 MiB in nvidia-smi, within 0.5%).
const GiB = 2 ** 30;

export interface DeviceClass {
  /** the name `--device-class` and what-if requests use */
  id: string;
  /** what the vendor calls it */
  label: string;
  /** case-insensitive patterns matched against an adapter's or system GPU's name */
  match: string[];
  memory_bytes: number;
  /** dense fp32 (non-tensor) TFLOP/s */
  fp32_tflops: number;
  /** dense fp16/bf16 tensor TFLOP/s with fp32 accumulation */
  half_tflops: number;
  /** where the figures come from */
  source: string;
}

export const DEVICE_CLASSES: readonly DeviceClass[] = [
  {
    id: 'h200',
    label: 'NVIDIA H200 SXM 141GB',
    match: ['h200'],
    memory_bytes: 141 * GiB,
    fp32_tflops: 67,
    half_tflops: 989.5,
    source: 'NVIDIA H200 Tensor Core GPU datasheet (2024): FP32 67 TFLOPS, BF16/FP16 1979 TFLOPS with sparsity',
  },
  {
    id: 'h100',
    label: 'NVIDIA H100 SXM5 80GB',
    match: ['h100'],
    memory_bytes: 80 * GiB,
    fp32_tflops: 67,
    half_tflops: 989.5,
    source: 'NVIDIA H100 Tensor Core GPU datasheet (SXM): FP32 67 TFLOPS, BF16/FP16 1979 TFLOPS with sparsity',
  },
  {
    id: 'a100-80gb',
    label: 'NVIDIA A100 80GB',
    match: ['a100.*80', 'a100-sxm4-80', 'a100 80'],
    memory_bytes: 80 * GiB,
    fp32_tflops: 19.5,
    half_tflops: 312,
    source: 'NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TFLOPS, BF16/FP16 Tensor 312 TFLOPS (624 with sparsity)',
  },
  {
    id: 'a100-40gb',
    label: 'NVIDIA A100 40GB',
    match: ['a100'],
    memory_bytes: 40 * GiB,
    fp32_tflops: 19.5,
    half_tflops: 312,
    source: 'NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TFLOPS, BF16/FP16 Tensor 312 TFLOPS (624 with sparsity)',
  },
  {
    id: 'rtx-4090',
    label: 'NVIDIA GeForce RTX 4090',
    match: ['rtx 4090', 'rtx4090'],
    memory_bytes: 24 * GiB,
    fp32_tflops: 82.6,
    half_tflops: 165.2,
    source: 'NVIDIA Ada Lovelace architecture whitepaper, appendix table: FP32 82.6, FP16 tensor with FP32 accumulate 165.2 TFLOPS',
  },
  {
    id: 'rtx-3090',
    label: 'NVIDIA GeForce RTX 3090',
    match: ['rtx 3090', 'rtx3090'],
    memory_bytes: 24 * GiB,
    fp32_tflops: 35.6,
    half_tflops: 71,
    source: 'NVIDIA Ampere GA102 GPU architecture whitepaper: FP32 35.6, FP16 tensor with FP32 accumulate 71 TFLOPS',
  },
  {
    id: 't4',
    label: 'NVIDIA T4',
    match: ['tesla t4', '\\bt4\\b'],
    memory_bytes: 16 * GiB,
    fp32_tflops: 8.1,
    half_tflops: 65,
    source: 'NVIDIA T4 Tensor Core GPU datasheet: FP32 8.1 TFLOPS, mixed precision FP16/FP32 65 TFLOPS',
  },
  {
    id: 'apple-m2',
    label: 'Apple M2 (10-core GPU, 16GB unified memory)',
    match: ['apple m2(?!\\s*(pro|max|ultra))'],
    memory_bytes: 16 * GiB,
    fp32_tflops: 3.6,
    // Apple GPUs run fp16 at the fp32 rate (no separate tensor units)
    half_tflops: 3.6,
    source: 'Apple M2 press release (June 2022): 10-core GPU, 3.6 TFLOPS; unified memory 8, 16 or 24 GB (16 here, shared with the system)',
  },
];

export const DEVICE_CLASS_IDS: readonly string[] = DEVICE_CLASSES.map((d) => d.id);

/** the class with this id, or undefined */
export function deviceClassById(id: string): DeviceClass | undefined {
  return DEVICE_CLASSES.find((d) => d.id === id.toLowerCase());
}

/** the first class whose pattern matches an adapter's or GPU's name (the table lists the more specific first), or undefined */
export function deviceClassForName(name: string): DeviceClass | undefined {
  const n = name.toLowerCase();
  return DEVICE_CLASSES.find((d) => d.match.some((p) => new RegExp(p).test(n)));
}

/** the peak TFLOP/s a run at this precision can reach on the class */
export function peakTflops(d: DeviceClass, precision: 'fp32' | 'fp16' | 'bf16' = 'fp32'): number {
  return precision === 'fp32' ? d.fp32_tflops : d.half_tflops;
}
