#!/usr/bin/env bash
# One-time setup on a fresh Debian machine (as root): Debian chromium (its SwiftShader Vulkan
# driver is the WebGPU adapter of GPU-less machines, and it drives the browser tests), the
# Vulkan loader, poppler-utils (the PDF layout test), the npm dependencies from the lockfile, and PyTorch (python3-torch) for exported
# PyTorch jobs. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' || need+=(libvulkan1)
# poppler's pdftotext and pdftoppm: the layout test reads the PDF report's word boxes and pages
command -v pdftotext >/dev/null || need+=(poppler-utils)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${need[*]} from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: please install ${need[*]} (sudo apt-get install ${need[*]}); continuing without" >&2
  fi
fi
# npm ci never downloads the Electron binary (offline, its postinstall would fail the whole
# install); the installer runs on its own below, where a failure costs one line, not the setup.
caller_skip="${ELECTRON_SKIP_BINARY_DOWNLOAD:-}"
export ELECTRON_SKIP_BINARY_DOWNLOAD=1
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=warn
fi

# The Electron binary, where the network allows: Electron's own installer (node_modules/electron/
# install.js, which honours ELECTRON_MIRROR and electron_config_cache), bounded by a timeout.
# Without the binary `npm start` opens web mode in the browser, so a failure is one line and
# setup goes on. A caller that set ELECTRON_SKIP_BINARY_DOWNLOAD (CI) skips the attempt.
install_electron() {
  local limit="${SHARDWISE_ELECTRON_INSTALL_TIMEOUT:-180}" log code reason
  if [ -n "$caller_skip" ] && [ "$caller_skip" != 0 ] && [ "$caller_skip" != false ]; then
    echo "setup: ELECTRON_SKIP_BINARY_DOWNLOAD is set, so the Electron binary is not installed; npm start opens web mode in the browser"
    return 0
  fi
  if node -e "process.exit(require('fs').existsSync(require('electron')) ? 0 : 1)" 2>/dev/null; then
    return 0 # already installed
  fi
  log="$(mktemp)"
  code=0
  env -u ELECTRON_SKIP_BINARY_DOWNLOAD timeout "$limit" node node_modules/electron/install.js >"$log" 2>&1 || code=$?
  if [ "$code" = 0 ] && node -e "process.exit(require('fs').existsSync(require('electron')) ? 0 : 1)" 2>/dev/null; then
    echo "setup: installed the Electron binary; npm start opens the desktop app"
  else
    if [ "$code" = 124 ]; then
      reason="no answer within ${limit} s (SHARDWISE_ELECTRON_INSTALL_TIMEOUT=SECONDS allows longer)"
    else
      reason="$(grep -m1 -E '[A-Za-z]*Error' "$log" | sed -E 's/^[[:space:]]+//' | cut -c1-160)"
      reason="${reason:-its installer exited with code $code}"
    fi
    echo "setup: could not install the Electron binary ($reason); npm start opens web mode in the browser instead"
  fi
  rm -f "$log"
}
install_electron

# PyTorch, for the exported PyTorch jobs (shardwise export --format torchrun) and their tests:
# Debian's python3-torch, into /usr/bin/python3, bounded by a timeout; a failure is one line.
if ! { [ -n "${SHARDWISE_PYTHON:-}" ] && "$SHARDWISE_PYTHON" -c 'import torch' 2>/dev/null; } &&
  ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    limit="${SHARDWISE_TORCH_INSTALL_TIMEOUT:-900}"
    if DEBIAN_FRONTEND=noninteractive timeout "$limit" sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-torch' >/dev/null 2>&1 &&
      /usr/bin/python3 -c 'import torch' 2>/dev/null; then
      echo "setup: installed python3-torch (PyTorch for exported jobs)"
    else
      echo "setup: could not install python3-torch within ${limit} s; the PyTorch export's tests are skipped (saying why)"
    fi
  else
    echo "setup: no Python with torch (apt-get install python3-torch as root, or set SHARDWISE_PYTHON); the PyTorch export's tests are skipped" >&2
  fi
fi

npm run --silent build
