#!/usr/bin/env bash
# The Debian packages mbb needs, installed when missing (apt-get, once: a second call finds them
# and does nothing). Called by `make run`, `make test`, `make local-llm-install` and .ci/run.
#   scripts/system-packages.sh run        python3-venv (the venv itself)
#   scripts/system-packages.sh test       + bubblewrap (the sandbox), libseccomp2 (its syscall
#                                           filter, loaded with ctypes), bsdextrautils and
#                                           util-linux (reference programs, prlimit, setarch),
#                                           gcc (C submissions),
#                                           chromium (browser tests of the offline pages)
#   scripts/system-packages.sh local-llm  + g++ (compiles llama-cpp-python)
# Not root, or no apt-get: one line naming what to install, exit 1.
set -euo pipefail
what=${1:-test}
need=()
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
if [ "$what" = test ] || [ "$what" = local-llm ]; then
  command -v bwrap >/dev/null || need+=(bubblewrap)
  # libseccomp2: mbb.resource.seccomp compiles the sandbox's filter with it (ctypes)
  compgen -G '/usr/lib/*/libseccomp.so.2' >/dev/null || compgen -G '/lib/*/libseccomp.so.2' \
    >/dev/null || compgen -G '/usr/lib/libseccomp.so.2' >/dev/null || need+=(libseccomp2)
  command -v column >/dev/null || need+=(bsdextrautils)
  command -v prlimit >/dev/null || need+=(util-linux)
  command -v gcc >/dev/null || need+=(gcc)
  command -v chromium >/dev/null || need+=(chromium)
fi
if [ "$what" = local-llm ]; then
  command -v g++ >/dev/null || need+=(g++)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "mbb needs these Debian packages: ${need[*]} — install them (sudo apt-get install -y ${need[*]}) or run this as root" >&2
  exit 1
fi
echo "installing Debian packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
