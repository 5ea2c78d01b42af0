#!/usr/bin/env bash
# Installs the Debian packages Vortex builds and tests with (only the missing
# ones; needs root or sudo). Safe to run repeatedly.
set -euo pipefail
pkgs=(build-essential pkg-config clang libpcre2-dev libcjson-dev libmicrohttpd-dev
      libutf8proc-dev zlib1g-dev libsimde-dev libopenmpi-dev openmpi-bin
      sentencepiece) # spm_train / spm_encode: test_ugm's reference tokenizer
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm run the server's end-to-end suite with the official openai client
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
