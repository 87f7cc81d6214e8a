#!/usr/bin/env bash
# One-time setup on a fresh Debian machine (as root): Debian chromium (its SwiftShader Vulkan
# driver is the WebGPU adapter of GPU-less machines, and it drives the browser tests), the
# Vulkan loader, and the npm dependencies from the lockfile. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1' || need+=(libvulkan1)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${need[*]} from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: please install ${need[*]} (sudo apt-get install ${need[*]}); continuing without" >&2
  fi
fi
# The Electron binary cannot be downloaded on every machine; web mode works without it.
export ELECTRON_SKIP_BINARY_DOWNLOAD=1
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=warn
fi
npm run --silent build
