#!/usr/bin/env bash
# Fetch a remote training log's tail and its run directory's companion files in one ssh call.
#
#   fetch-remote-log.sh [-n LINES] [-o OUTDIR] [-t SECONDS] user@host:/abs/path/to/train.log
#
# Writes OUTDIR/<log name> (the last LINES lines, at most 4 MiB) and the companion files
# (train_args.*, config.*, *_config.*, deepspeed_config.*, *.err, stderr*, error.json; 64 KiB
# each: the head of configs, the tail of error streams), then prints the command that diagnoses
# them. Read-only on the host. ssh never prompts (BatchMode), checks host keys strictly, and is
# killed after SECONDS (default 60). ML_SKILLS_SSH_CONFIG, if set, is passed as `ssh -F`.
# Exit: 0 fetched, 1 the remote log is missing or unreadable, 2 bad arguments, 3 ssh failed.
set -euo pipefail

lines=5000 outdir="" deadline=60
while getopts "n:o:t:h" opt; do
  case "$opt" in
    n) lines=$OPTARG ;;
    o) outdir=$OPTARG ;;
    t) deadline=$OPTARG ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
die() { echo "fetch-remote-log: $1" >&2; exit "${2:-2}"; }
[ $# -eq 1 ] || die "give exactly one target: user@host:/abs/path/to/train.log"
[[ $lines =~ ^[1-9][0-9]{0,6}$ ]] || die "-n must be a whole number of lines"
[[ $deadline =~ ^[1-9][0-9]{0,4}$ ]] || die "-t must be a whole number of seconds"

target=$1
[[ $target == *@*:* ]] || die "not a remote target: expected user@host:/absolute/path/to/train.log"
user=${target%%@*} rest=${target#*@}
if [[ $rest == \[* ]]; then host=${rest%%]*}]; path=${rest#*]:}; else host=${rest%%:*}; path=${rest#*:}; fi
[[ $user != -* && $host != -* ]] || die "refusing $target: a user or host starting with '-' would be read as an ssh option"
[[ $user =~ ^[A-Za-z_][A-Za-z0-9_.-]{0,63}$ ]] || die "invalid remote user '$user'"
[[ $host =~ ^([A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])$ ]] || die "invalid remote host '$host'"
[[ $path == /* ]] || die "invalid remote path '$path': give an absolute path"
[[ $path != *[[:cntrl:]]* ]] || die "invalid remote path: control characters"
host=${host#[}; host=${host%]}
outdir=${outdir:-./remote-logs/$host}

token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
mark="==ML-SKILLS-$token"
qpath="'${path//\'/\'\\\'\'}'"
script="p=$qpath; d=\$(dirname -- \"\$p\"); n=0; seen=
if [ ! -e \"\$p\" ]; then echo \"$mark LOG missing\"
elif [ ! -f \"\$p\" ]; then echo \"$mark LOG not-regular\"
elif [ ! -r \"\$p\" ]; then echo \"$mark LOG unreadable\"
else echo \"$mark LOG ok\"; tail -c 4194304 -- \"\$p\" | tail -n $lines; echo; fi
for f in \"\$d\"/train_args.* \"\$d\"/config.* \"\$d\"/*_config.* \"\$d\"/deepspeed_config.* \"\$d\"/*.err \"\$d\"/stderr* \"\$d\"/*stderr* \"\$d\"/error.json \"\$d\"/*error*.json; do
  [ -f \"\$f\" ] && [ -r \"\$f\" ] && [ \"\$f\" != \"\$p\" ] || continue
  case \" \$seen \" in *\" \$f \"*) continue;; esac; seen=\"\$seen \$f\"
  n=\$((n+1)); [ \$n -le 16 ] || break
  echo \"$mark FILE \$(basename -- \"\$f\")\"
  case \"\$f\" in *.err|*/stderr*|*stderr*) tail -c 65536 -- \"\$f\";; *) head -c 65536 -- \"\$f\";; esac; echo
done
echo \"$mark END\""

ssh_opts=(-T -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 -o ServerAliveInterval=5
          -o ServerAliveCountMax=3 -o ForwardAgent=no -o ForwardX11=no -o ClearAllForwardings=yes
          -o PermitLocalCommand=no -o LogLevel=ERROR)
[ -n "${ML_SKILLS_SSH_CONFIG:-}" ] && ssh_opts=(-F "$ML_SKILLS_SSH_CONFIG" "${ssh_opts[@]}")

tmp=$(mktemp)
err=$(mktemp)
trap 'rm -f "$tmp" "$err"' EXIT
rc=0
# the script goes on stdin to `sh -s`: the login shell (even csh) never parses it
printf '%s\n' "$script" | timeout -k 2 "$deadline" ssh "${ssh_opts[@]}" -- "$user@$host" "sh -s" >"$tmp" 2>"$err" || rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  [ -s "$tmp" ] || die "ssh to $host: no answer within the ${deadline} s deadline" 3
  echo "fetch-remote-log: cut off at the ${deadline} s deadline: what arrived is partial" >&2
elif [ $rc -eq 255 ] && ! grep -q "^$mark LOG" "$tmp"; then
  die "ssh to $host failed: $(tail -n 1 "$err")" 3
fi

mkdir -p -- "$outdir"
state=$(awk -v m="$mark" -v out="$outdir" -v logname="$(basename -- "$path")" '
  function name(s) { gsub(/[^A-Za-z0-9._-]/, "_", s); sub(/^\.+/, "_", s); return s }
  index($0, m " ") == 1 {
    if (f != "") close(f)
    split(substr($0, length(m) + 2), w, " ")
    if (w[1] == "LOG") { state = w[2]; f = (state == "ok") ? out "/" name(logname) : ""; if (f != "") printf "" > f }
    else if (w[1] == "FILE") { f = out "/" name(substr($0, length(m) + 7)); printf "" > f; }
    else f = ""
    first = 1; next
  }
  f != "" { if (!first) printf "\n" >> f; printf "%s", $0 >> f; first = 0 }
  END { print state }
' "$tmp")
case "$state" in
  ok) echo "fetched: $outdir/$(basename -- "$path")" ;;
  missing) echo "fetch-remote-log: $path: no such file on $host" >&2 ;;
  *) echo "fetch-remote-log: $path: ${state:-not received} on $host" >&2 ;;
esac
for f in "$outdir"/*; do [ -f "$f" ] && [ "$(basename -- "$f")" != "$(basename -- "$path")" ] && echo "companion: $f"; done
echo "next: ml-skills check-failed-run $outdir"
[ "$state" = ok ] || exit 1
