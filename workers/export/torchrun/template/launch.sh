#!/usr/bin/env bash
# Start train.py on this machine's share of the layout: torchrun where it works, else the same
# processes with the environment torchrun would give them (RANK, WORLD_SIZE, LOCAL_RANK,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
#
# One machine: bash launch.sh
# Several:     NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 bash launch.sh   (then NODE_RANK=1 on the other)
# Settings (environment): NPROC (ranks on this machine), NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT,
#   SHARDWISE_PYTHON (the interpreter that has torch), LAUNCHER=torchrun|processes (force one way).
set -euo pipefail
cd "$(dirname "$0")"

WORLD=__WORLD__
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
NPROC=${NPROC:-$((WORLD / NNODES))}
if (( NPROC * NNODES != WORLD )); then
  echo "launch.sh: the layout has $WORLD ranks, but NNODES=$NNODES x NPROC=$NPROC gives $((NPROC * NNODES))" >&2
  exit 2
fi

# The first interpreter that imports torch: SHARDWISE_PYTHON, then the system's (Debian's python3-torch
# installs into /usr/bin/python3, which a pyenv or venv python3 earlier on PATH would not see), then PATH's.
PY=""
for cand in "${SHARDWISE_PYTHON:-}" /usr/bin/python3 python3 python; do
  [[ -n "$cand" ]] || continue
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import torch' >/dev/null 2>&1; then PY=$cand; break; fi
done
if [[ -z "$PY" ]]; then
  echo "launch.sh: no Python with PyTorch found (tried \$SHARDWISE_PYTHON, /usr/bin/python3, python3, python): install torch or set SHARDWISE_PYTHON" >&2
  exit 2
fi

# torchrun's elastic agent fails on Python 3.11 with PyTorch below 2.0: start the ranks directly there.
LAUNCHER=${LAUNCHER:-$("$PY" -c 'import sys, torch; v = tuple(int(x) for x in torch.__version__.split(".")[:2]); print("processes" if v < (2, 0) and sys.version_info >= (3, 11) else "torchrun")')}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
if [[ -z "${MASTER_PORT:-}" ]]; then
  if (( NNODES == 1 )); then
    MASTER_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  else
    MASTER_PORT=29500
  fi
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

if [[ "$LAUNCHER" == "torchrun" ]]; then
  if (( NNODES == 1 )); then
    exec "$PY" -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node="$NPROC" train.py "$@"
  fi
  exec "$PY" -m torch.distributed.run --nnodes="$NNODES" --node_rank="$NODE_RANK" --nproc_per_node="$NPROC" \
    --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT" train.py "$@"
fi

echo "launch.sh: starting $NPROC rank process(es) with torchrun's environment ourselves (torchrun fails with PyTorch $("$PY" -c 'import torch; print(torch.__version__)') on Python 3.11)"
pids=()
# stop the ranks; `where`: each first prints its threads' stacks (train.py answers SIGUSR1), so a
# rank left waiting in a collective says which one
stop() {
  if [[ "${1:-}" == where ]]; then
    for p in "${pids[@]}"; do kill -USR1 "$p" 2>/dev/null || true; done
    sleep 1
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
stopping=0
trap 'stopping=1; stop' INT
trap 'stopping=1; echo "launch.sh: stopped (SIGTERM); where each rank was follows" >&2; stop where' TERM
for ((lr = 0; lr < NPROC; lr++)); do
  RANK=$((NODE_RANK * NPROC + lr)) WORLD_SIZE=$WORLD LOCAL_RANK=$lr LOCAL_WORLD_SIZE=$NPROC \
    GROUP_RANK=$NODE_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT "$PY" train.py "$@" &
  pids+=($!)
done
status=0
for _ in "${pids[@]}"; do
  # whichever rank ends next: one that failed would leave the others waiting for it forever
  if ! wait -n; then
    if ((status == 0 && !stopping)); then
      echo "launch.sh: a rank failed; stopping the others (where each was follows)" >&2
      stop where
    fi
    status=1
  fi
done
exit $status
