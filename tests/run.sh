#!/usr/bin/env bash
# The README's test command: install everything the tests need on a fresh machine of this kind
# (system packages where apt-get and root are available, the MCP Inspector and Claude Code CLIs
# from npm, the Python test extra), then run the whole suite. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
need_apt=()
{ command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; } || need_apt+=(openssh-server)  # tests/collectors/test_ssh.py runs a real sshd
command -v ssh >/dev/null 2>&1 || need_apt+=(openssh-client)
command -v rg >/dev/null 2>&1 || need_apt+=(ripgrep)          # tests/bench compares with ripgrep
command -v npx >/dev/null 2>&1 || need_apt+=(nodejs npm)      # the MCP Inspector CLI (tests/mcp/test_inspector.py)
command -v mount >/dev/null 2>&1 || need_apt+=(mount)         # tests/lab mounts a tiny tmpfs / read-only bind (as root)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    timeout 600 apt-get update -qq >/dev/null 2>&1 || true
    # one at a time: a package the distribution cannot install (e.g. npm beside a node from elsewhere) must not block the rest
    for p in "${need_apt[@]}"; do
      timeout 900 apt-get install -y -qq "$p" >/dev/null 2>&1 || echo "warning: could not install $p (the tests that need it will say so)"
    done
  else
    echo "warning: missing ${need_apt[*]}; install them (as root: apt-get install ${need_apt[*]}) for the tests that need them"
  fi
fi

python3 -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# The MCP Inspector CLI, a client nobody here wrote, fetched from npm once so the tests run it from the cache.
if command -v npx >/dev/null 2>&1; then
  timeout 600 npx -y @modelcontextprotocol/inspector@0.15.0 --help >/dev/null 2>&1 || echo "warning: could not fetch the MCP Inspector CLI"
fi
# Claude Code's own plugin validator (pinned: older releases lack --profile); runs offline.
cc_dir="${HOME}/.cache/ml-skills-ci/claude-code"
if [ ! -x "$cc_dir/node_modules/.bin/claude" ] && command -v npm >/dev/null 2>&1; then
  mkdir -p "$cc_dir"
  (cd "$cc_dir" && timeout 900 npm install --no-audit --no-fund --silent @anthropic-ai/claude-code@2.1.328 >/dev/null 2>&1) \
    || echo "warning: could not install the Claude Code CLI"
fi
[ -x "$cc_dir/node_modules/.bin/claude" ] && export ML_SKILLS_CLAUDE="$cc_dir/node_modules/.bin/claude"

python3 -m pip install -q -e '.[test]'
python3 -m pytest -q --durations=40 "$@"  # the slowest tests listed: the suite must stay well inside CI's 90 minutes
