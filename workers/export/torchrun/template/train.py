#!/usr/bin/env python3
"""Continue a Shardwise training run in plain PyTorch.

This file is the same for every export; what differs lives next to it:
  job.json                   the run's model, hyperparameters, data position and layout (in PyTorch's terms)
  data/text.txt, vocab.json  the dataset's text and the character vocabulary
  start/model.safetensors    the weights to start from, Hugging Face GPT-2 layout (Conv1D weights are (in, out))
  start/optimizer.safetensors  AdamW's moments for those weights (exp_avg.NAME, exp_avg_sq.NAME), same layout

Run it with launch.sh (torchrun, or the same environment variables set by hand). Every rank
runs this file; rank 0 writes a Shardwise run folder into run/ (config.json, state.json,
metrics.jsonl, summary.json) so `shardwise serve` lists it and `shardwise report run` reads it,
and Hugging Face GPT-2 folders of the weights into run/hf/step-NNNNNN/ (the last one is what
`shardwise train --init-from` starts from).

What keeps it step-for-step equal to Shardwise:
  - the model: pre-layernorm GPT-2 (eps 1e-5), GELU with the tanh approximation, causal softmax
    attention scaled by 1/sqrt(head size), LM head tied to the token embedding, no dropout;
  - the batches: the same splitmix32 sampler as Shardwise, so the batch of step s is a pure
    function of (seed, s); rank r of W takes rows [r*B/W, (r+1)*B/W) of the global batch;
  - the loss: the mean over every token of the global batch, summed from the ranks' shares;
  - AdamW (decoupled weight decay on matrices and embeddings only), clipping by global norm,
    linear warm-up then cosine decay of the learning rate.
"""
import contextlib
import datetime
import faulthandler
import json
import math
import os
import signal
import socket
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
U32 = 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# safetensors: an 8-byte little-endian header length, a JSON header, then the raw tensors.
# Read and written here by hand so the job needs nothing beyond PyTorch.
# ---------------------------------------------------------------------------------------------
ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        dtype = ST_DTYPES[info["dtype"]]
        buf = bytearray(raw[base + lo : base + hi])
        out[name] = torch.frombuffer(buf, dtype=dtype).reshape(info["shape"]).clone() if hi > lo else torch.zeros(info["shape"], dtype=dtype)
    return out


def write_atomic(path, data):
    """Write to a temporary file, then rename: a reader never sees half a file."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the tensors start 8-byte aligned
    write_atomic(path, struct.pack("<Q", len(text)) + text + b"".join(chunks))


def write_json(path, obj):
    write_atomic(path, (json.dumps(obj, indent=2) + "\n").encode())


# ---------------------------------------------------------------------------------------------
# The model: GPT-2 in Hugging Face's layout, so its state_dict is a GPT2LMHeadModel's.
# ---------------------------------------------------------------------------------------------
class Conv1D(nn.Module):
    """GPT-2's linear layer: the weight is stored (in, out) and applied as x @ W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg["n_head"]
        self.c_attn = Conv1D(cfg["d_model"], 3 * cfg["d_model"])
        self.c_proj = Conv1D(cfg["d_model"], cfg["d_model"])

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        # causal: position t attends to positions <= t (built here, not a buffer DDP would broadcast)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Conv1D(cfg["d_model"], 4 * cfg["d_model"])
        self.c_proj = Conv1D(4 * cfg["d_model"], cfg["d_model"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg["d_model"], eps=1e-5)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg["d_model"], eps=1e-5)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg, checkpointing=False):
        super().__init__()
        self.checkpointing = checkpointing
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(cfg["vocab_size"], cfg["d_model"]),
                wpe=nn.Embedding(cfg["block_size"], cfg["d_model"]),
                h=nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"])),
                ln_f=nn.LayerNorm(cfg["d_model"], eps=1e-5),
            )
        )

    def forward(self, idx, targets):
        """Per-token cross-entropy (B*T,): the caller decides how the tokens are averaged."""
        tr = self.transformer
        T = idx.shape[1]
        x = tr.wte(idx) + tr.wpe(torch.arange(T, device=idx.device))
        for block in tr.h:
            if self.checkpointing and self.training:
                # activation checkpointing: keep each block's input, recompute its inside in backward
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = tr.ln_f(x) @ tr.wte.weight.t()  # the LM head is the token embedding, tied
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1), reduction="none")


def decays(name):
    """Shardwise (like nanoGPT) decays the matrices and embeddings, not biases or layernorm."""
    return name.endswith(".weight") and ".ln_" not in name and not name.startswith("transformer.ln_f")


# ---------------------------------------------------------------------------------------------
# Data: Shardwise's character tokenizer and its deterministic sampler, bit for bit.
# ---------------------------------------------------------------------------------------------
def mix32(x):
    x = (x ^ (x >> 16)) & U32
    x = (x * 0x7FEB352D) & U32
    x = (x ^ (x >> 15)) & U32
    x = (x * 0x846CA68B) & U32
    return (x ^ (x >> 16)) & U32


def hash_seed(*parts):
    h = 0x9E3779B9
    for p in parts:
        lo, hi = p & U32, (p >> 32) & U32
        h = mix32(h ^ lo)
        h = mix32((h + ((hi * 0x85EBCA6B) & U32) + 0x632BE5AB) & U32)
    return h


class SplitMix32:
    def __init__(self, seed):
        self.state = seed & U32

    def next_u32(self):
        self.state = (self.state + 0x9E3779B9) & U32
        return mix32(self.state)

    def next_float(self):  # 53 random bits in [0, 1)
        hi = self.next_u32() >> 5
        lo = self.next_u32() >> 6
        return (hi * 67108864 + lo) / 9007199254740992

    def next_int(self, n):
        return math.floor(self.next_float() * n)


STREAM_TRAIN, STREAM_VAL = 0, 1


class Sampler:
    """The global batch of step s (0-based): B windows of T+1 tokens at offsets drawn from (seed, stream, s)."""

    def __init__(self, tokens, batch_size, T, seed, stream):
        self.tokens, self.B, self.T, self.seed, self.stream = tokens, batch_size, T, seed, stream

    def offsets(self, step):
        r = SplitMix32(hash_seed(self.seed, self.stream, step))
        windows = len(self.tokens) - self.T
        return [r.next_int(windows) for _ in range(self.B)]

    def rows(self, offsets):
        x = torch.stack([self.tokens[o : o + self.T] for o in offsets])
        y = torch.stack([self.tokens[o + 1 : o + self.T + 1] for o in offsets])
        return x, y

    def micro_batch(self, step, rank, world, micro, n_micro):
        per_rank = self.B // world
        per_micro = per_rank // n_micro
        lo = rank * per_rank + micro * per_micro
        return self.rows(self.offsets(step)[lo : lo + per_micro])


def load_tokens(chars):
    with open(os.path.join(HERE, "data", "text.txt"), encoding="utf-8") as f:
        text = f.read()
    vocab = {c: i for i, c in enumerate(chars)}
    tokens = torch.tensor([vocab[c] for c in text], dtype=torch.long)  # one token per code point
    n = len(tokens)
    cut = n - (-(-n // 10))  # validation: the last ceil(n/10) tokens
    return tokens[:cut], tokens[cut:]


def learning_rate(step, t):
    """Linear warm-up to lr, then cosine decay to min_lr at the last step (step is 1-based)."""
    if t["warmup_steps"] > 0 and step <= t["warmup_steps"]:
        return t["lr"] * step / t["warmup_steps"]
    ratio = min(1.0, max(0.0, (step - t["warmup_steps"]) / max(1, t["steps"] - t["warmup_steps"])))
    return t["min_lr"] + 0.5 * (1 + math.cos(math.pi * ratio)) * (t["lr"] - t["min_lr"])


# ---------------------------------------------------------------------------------------------
# The strategy, in PyTorch's own terms (job.json "plan", written by the exporter).
# ---------------------------------------------------------------------------------------------
def wrap_model(model, plan, device):
    """DDP (optionally with a communication hook) or FSDP around the model; nothing for one rank."""
    kind = plan["wrapper"]
    if kind == "none":
        return model
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=plan["bucket_cap_mb"],
            # Shardwise syncs the same parameters every step: no graph search needed
            find_unused_parameters=False,
        )
        hook = plan.get("comm_hook")
        if hook and hook["name"] == "powerSGD":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD

            state = powerSGD.PowerSGDState(
                process_group=None,
                matrix_approximation_rank=hook["matrix_approximation_rank"],
                start_powerSGD_iter=hook["start_powerSGD_iter"],
                min_compression_rate=hook["min_compression_rate"],
                use_error_feedback=hook["use_error_feedback"],
                warm_start=hook["warm_start"],
                random_seed=hook.get("random_seed", 0),
            )
            # a run resumed past its uncompressed steps compresses from its first step here too
            state.iter = hook["iter"]
            ddp.register_comm_hook(state, powerSGD.powerSGD_hook)
        elif hook and hook["name"] in ("fp16_compress", "bf16_compress"):
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            ddp.register_comm_hook(None, getattr(default_hooks, hook["name"] + "_hook"))
        return ddp
    if kind == "fsdp":
        # PyTorch >= 2.0 (1.13's FSDP module fails to import on Python 3.11)
        try:
            from torch.distributed.fsdp import CPUOffload, FullyShardedDataParallel as FSDP, ShardingStrategy
        except Exception as e:
            raise SystemExit(
                f"train.py: this layout runs FullyShardedDataParallel, which needs PyTorch >= 2.0; PyTorch {torch.__version__} "
                f"on Python {sys.version.split()[0]} cannot import it ({type(e).__name__}: {e}). Install PyTorch 2, or export a ddp or zero1 layout."
            )

        return FSDP(
            model,
            sharding_strategy=getattr(ShardingStrategy, plan["sharding_strategy"]),
            cpu_offload=CPUOffload(offload_params=plan["cpu_offload"]),
            device_id=device if device.type == "cuda" else None,
            use_orig_params=True,  # keeps the parameter names, so decay groups and the HF layout still apply
        )
    raise SystemExit(f"train.py: unknown wrapper {kind!r} in job.json")


def make_optimizer(named, t, plan):
    groups = [
        {"params": [p for n, p in named if decays(n)], "weight_decay": t["weight_decay"]},
        {"params": [p for n, p in named if not decays(n)], "weight_decay": 0.0},
    ]
    kw = dict(lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"])
    if plan["optimizer"] == "zero":
        # ZeRO-1: every rank keeps AdamW's state for its own shard of the parameters only
        from torch.distributed.optim import ZeroRedundancyOptimizer

        zero = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, **kw)
        return zero, zero.optim
    opt = torch.optim.AdamW(groups, **kw)
    return opt, opt


def load_optimizer_state(local_opt, names, moments, step):
    """AdamW's moments and step count from the checkpoint, for the parameters this rank updates."""
    for group in local_opt.param_groups:
        for p in group["params"]:
            n = names[p]
            if f"exp_avg.{n}" not in moments:
                raise SystemExit(f"train.py: start/optimizer.safetensors lacks exp_avg.{n}")
            local_opt.state[p] = {
                "step": torch.tensor(float(step)),
                "exp_avg": moments[f"exp_avg.{n}"].to(p.device, torch.float32).reshape(p.shape).clone(),
                "exp_avg_sq": moments[f"exp_avg_sq.{n}"].to(p.device, torch.float32).reshape(p.shape).clone(),
            }


def load_fsdp_optimizer_state(fsdp_model, local_opt, named, moments, step):
    """FSDP holds each rank's shard of the parameters: PyTorch shards the whole optimizer state
    (keyed by parameter name) to match. PyTorch >= 2.0 (keyword arguments: 2.0 and 2.1+ order them differently)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    clean = lambda n: n.replace("_fsdp_wrapped_module.", "")
    full = {
        "state": {
            clean(n): {
                "step": torch.tensor(float(step)),
                "exp_avg": moments[f"exp_avg.{clean(n)}"].float(),
                "exp_avg_sq": moments[f"exp_avg_sq.{clean(n)}"].float(),
            }
            for n, _ in named
        },
        "param_groups": [
            {**{k: v for k, v in g.items() if k != "params"}, "params": [clean(n) for n, p in named if any(p is q for q in g["params"])]}
            for g in local_opt.param_groups
        ],
    }
    local_opt.load_state_dict(FSDP.optim_state_dict_to_load(model=fsdp_model, optim=local_opt, optim_state_dict=full))


# ---------------------------------------------------------------------------------------------
# The run folder, in Shardwise's format (rank 0 writes it).
# ---------------------------------------------------------------------------------------------
def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def memory_by_category(model, local_opt, device):
    """Bytes by Shardwise's categories, as far as PyTorch reports them."""
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)
    params = list(model.parameters())
    # AdamW's moments (its one-element step counters are left out, as Shardwise counts K = 8 bytes a parameter)
    opt_state = [v for s in local_opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    mem = {"params": nbytes(params), "grads": nbytes(p.grad for p in params if p.grad is not None), "optimizer": nbytes(opt_state)}
    if device.type == "cuda":
        mem["reserved"] = torch.cuda.memory_reserved(device)
        mem["allocated"] = torch.cuda.memory_allocated(device)
    return mem


class RunFolder:
    def __init__(self, path, job, start_step):
        self.path = path
        self.job = job
        os.makedirs(os.path.join(path, "hf"), exist_ok=True)
        self.metrics = os.path.join(path, "metrics.jsonl")
        fresh = not os.path.exists(os.path.join(path, "state.json"))
        if fresh or start_step == job["start"]["step"]:
            # a new run (or this export started again from its own beginning): start the rows over
            write_json(os.path.join(path, "config.json"), job["run_config"])
            write_atomic(self.metrics, b"")
            self.created = now_iso()
        else:
            with open(os.path.join(path, "state.json")) as f:
                self.created = json.load(f).get("created_at", now_iso())
        self.state(status="running", step=start_step)

    def state(self, **kw):
        s = {
            "created_at": self.created,
            "updated_at": now_iso(),
            "steps": self.job["train"]["steps"],
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "params": self.job["params"],
            "vocab_size": self.job["model"]["vocab_size"],
            **kw,
        }
        write_json(os.path.join(self.path, "state.json"), s)

    def append(self, row):
        with open(self.metrics, "a") as f:
            f.write(json.dumps(row) + "\n")


def save_hf(path, model_sd, job, step):
    """A Hugging Face GPT-2 folder (what `shardwise train --init-from` reads)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    save_safetensors(os.path.join(tmp, "model.safetensors"), {k: v.float() for k, v in model_sd.items()})
    with open(os.path.join(HERE, "start", "config.json")) as f:
        hf_config = json.load(f)
    write_json(os.path.join(tmp, "config.json"), {**hf_config, "torch_dtype": "float32"})
    write_json(os.path.join(tmp, "vocab.json"), {c: i for i, c in enumerate(job["tokenizer"]["chars"])})
    write_json(os.path.join(tmp, "trainer_state.json"), {"global_step": step, "source": "shardwise torchrun export"})
    if os.path.exists(path):
        import shutil

        shutil.rmtree(path)
    os.replace(tmp, path)


def full_state_dict(model):
    """The whole model's weights by HF name (FSDP gathers its shards)."""
    inner = getattr(model, "module", model)
    if type(model).__name__ == "FullyShardedDataParallel":
        from torch.distributed.fsdp import FullStateDictConfig, FullyShardedDataParallel as FSDP, StateDictType

        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
            return model.state_dict()
    return inner.state_dict()


# ---------------------------------------------------------------------------------------------
def loss_at(job, step, weights_dir):
    """`python train.py --loss-at STEP [--weights HF_DIR]`: the mean loss of step STEP's global
    batch (1-based, as the run logs it) under a Hugging Face folder's weights (default: start/),
    one process, fp32. A Shardwise run started with --init-from HF_DIR logs the same first loss."""
    model = GPT(job["model"])
    sd = load_safetensors(os.path.join(weights_dir, "model.safetensors"))
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    model.eval()
    train_tokens, _ = load_tokens(job["tokenizer"]["chars"])
    t = job["train"]
    sampler = Sampler(train_tokens, t["batch_size"], job["seq_len"], t["seed"], STREAM_TRAIN)
    with torch.no_grad():
        loss = model(*sampler.rows(sampler.offsets(step - 1))).mean().item()
    print(json.dumps({"step": step, "loss": loss, "weights": weights_dir}))


def main():
    with open(os.path.join(HERE, "job.json")) as f:
        job = json.load(f)
    if "--loss-at" in sys.argv:
        i = sys.argv.index("--loss-at")
        weights = sys.argv[sys.argv.index("--weights") + 1] if "--weights" in sys.argv else os.path.join(HERE, "start")
        return loss_at(job, int(sys.argv[i + 1]), weights)
    cfg, t, plan = job["model"], job["train"], job["plan"]
    # launch.sh asks a rank it is about to stop where it is (SIGUSR1): its threads' stacks go to stderr,
    # so a rank left waiting in a collective says which one
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world != plan["world"]:
        raise SystemExit(f"train.py: the layout has {plan['world']} ranks but WORLD_SIZE is {world}: run launch.sh, or set NPROC/NNODES to match")
    cuda = torch.cuda.is_available() and os.environ.get("SHARDWISE_TORCH_DEVICE", "") != "cpu"
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))

    # the model at the checkpoint's weights, then the strategy around it
    model = GPT(cfg, checkpointing=plan["activation_checkpointing"]).to(device)
    start = load_safetensors(os.path.join(HERE, "start", "model.safetensors"))
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in start.items()}, strict=False)
    if missing or unexpected:
        raise SystemExit(f"train.py: start/model.safetensors does not match the model (missing {missing}, unexpected {unexpected})")
    names = {p: n for n, p in model.named_parameters()}
    wrapped = wrap_model(model, plan, device)
    named = list(wrapped.named_parameters()) if plan["wrapper"] == "fsdp" else list(model.named_parameters())
    optimizer, local_opt = make_optimizer(named, t, plan)
    start_step = job["start"]["step"]
    if job["start"]["optimizer"]:
        moments = load_safetensors(os.path.join(HERE, "start", "optimizer.safetensors"))
        if plan["wrapper"] == "fsdp":
            load_fsdp_optimizer_state(wrapped, local_opt, named, moments, job["start"]["optimizer_step"])
        else:
            load_optimizer_state(local_opt, names, moments, job["start"]["optimizer_step"])

    # mixed precision: autocast computes in 16 bits, the weights and AdamW stay fp32 (the master)
    amp = plan["autocast"]
    autocast = (lambda: torch.autocast(device.type, dtype=getattr(torch, amp))) if amp else contextlib.nullcontext
    scaler = None
    if plan.get("grad_scaler"):
        s = plan["grad_scaler"]
        scaler = torch.cuda.amp.GradScaler(
            init_scale=s["init_scale"], growth_factor=2.0, backoff_factor=0.5, growth_interval=s["growth_interval"], enabled=cuda
        )

    train_tokens, val_tokens = load_tokens(job["tokenizer"]["chars"])
    T, B, m = job["seq_len"], t["batch_size"], plan["micro_batches"]
    train = Sampler(train_tokens, B, T, t["seed"], STREAM_TRAIN)
    val = Sampler(val_tokens, B // world // m, T, t["seed"], STREAM_VAL)
    tokens = B * T

    # the run folder: job.json's run_dir (run/ here, or where the export put it: the dashboard's exports
    # write it beside the original in the runs folder), or --run-dir PATH; relative to this folder
    run_dir = os.path.join(HERE, sys.argv[sys.argv.index("--run-dir") + 1] if "--run-dir" in sys.argv else job.get("run_dir", "run"))
    folder = RunFolder(run_dir, job, start_step) if rank == 0 else None
    peak = {}
    last_loss, val_loss, t_start, timed_steps = float("nan"), None, time.perf_counter(), 0
    for step in range(start_step + 1, t["steps"] + 1):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=device)
        for k in range(m):
            x, y = (a.to(device) for a in train.micro_batch(step - 1, rank, world, k, m))
            # DDP all-reduces on the last micro-batch only (gradient accumulation)
            sync = contextlib.nullcontext() if k == m - 1 or world == 1 or plan["wrapper"] != "ddp" else wrapped.no_sync()
            with sync:
                with autocast():
                    per_token = wrapped(x, y)
                # each token counts 1/(tokens of the global batch); DDP averages over the ranks, so scale back by world
                loss = per_token.sum() / tokens
                (scaler.scale(loss * world) if scaler else loss * world).backward()
            loss_sum += loss.detach()
        lr = learning_rate(step, t)
        for g in optimizer.param_groups:
            g["lr"] = lr
        if scaler:
            scaler.unscale_(local_opt if plan["optimizer"] != "zero" else optimizer)
        clip = t["grad_clip"] if t["grad_clip"] > 0 else float("inf")
        grad_norm = (wrapped.clip_grad_norm_(clip) if plan["wrapper"] == "fsdp" else torch.nn.utils.clip_grad_norm_(model.parameters(), clip)).item()
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if world > 1:
            dist.all_reduce(loss_sum)  # the ranks' shares sum to the global mean
        last_loss = loss_sum.item()
        step_ms = (time.perf_counter() - t0) * 1000
        timed_steps += 1
        mem = memory_by_category(model, local_opt, device)
        mems = [None] * world
        if world > 1:
            dist.all_gather_object(mems, mem)
        else:
            mems = [mem]
        for r, mr in enumerate(mems):
            peak[str(r)] = {k: max(v, peak.get(str(r), {}).get(k, 0)) for k, v in mr.items()}
        if folder:
            row = {
                "type": "step",
                "step": step,
                "loss": last_loss,
                "lr": lr,
                "grad_norm": grad_norm,
                "tokens_per_s": tokens * 1000 / step_ms,
                "step_ms": step_ms,
                "memory": {str(r): mr for r, mr in enumerate(mems)},
            }
            if scaler:
                row["loss_scale"] = scaler.get_scale()
            folder.append(row)
        if t["eval_interval"] > 0 and (step % t["eval_interval"] == 0 or step == t["steps"]) and rank == 0:
            model.eval()
            with torch.no_grad(), autocast():
                losses = [model(*(a.to(device) for a in val.rows(val.offsets(i)))).float().mean().item() for i in range(t["eval_batches"])]
            model.train()
            val_loss = sum(losses) / len(losses)
            folder.append({"type": "eval", "step": step, "val_loss": val_loss})
        if folder:
            folder.state(status="running", step=step)
        if (t["checkpoint_interval"] > 0 and step % t["checkpoint_interval"] == 0) or step == t["steps"]:
            sd = full_state_dict(wrapped)
            if rank == 0:
                save_hf(os.path.join(run_dir, "hf", f"step-{step:06d}"), sd, job, step)
                folder.append({"type": "checkpoint", "step": step, "path": f"hf/step-{step:06d}"})
        if rank == 0:
            print(f"step {step}/{t['steps']} loss {last_loss:.6f} lr {lr:.3e} grad_norm {grad_norm:.4f} ({step_ms:.0f} ms)", flush=True)

    if folder:
        elapsed = time.perf_counter() - t_start
        summary = {
            "type": "summary",
            "run_dir": ".",
            "steps": t["steps"],
            "final_loss": last_loss,
            "val_loss": val_loss,
            "strategy": job["run_config"]["parallel"]["strategy"],
            "world": world,
            "precision": job["run_config"].get("precision", "fp32"),
            "params": job["params"],
            "tokens_per_s": tokens * timed_steps / elapsed if elapsed > 0 else 0,
            "peak_bytes": {
                r: {**p, **({"allocated": torch.cuda.max_memory_allocated(device)} if cuda and r == "0" else {})} for r, p in peak.items()
            },
            "engine": f"pytorch {torch.__version__}",
            "exported_from": {"checkpoint": os.path.basename(job["source"]["checkpoint"] or "") or None, "step": job["source"]["step"]},
        }
        write_json(os.path.join(run_dir, "summary.json"), summary)
        folder.state(status="completed", step=t["steps"])
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
