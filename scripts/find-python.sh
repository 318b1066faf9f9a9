#!/usr/bin/env sh
# Print the path of a Python >= 3.12 interpreter, or explain and fail.
# Order: $PYTHON, python3.13, python3.12, python3, then pyenv's installed versions
# (pyenv shims for versions that are not selected fail when run, so each is tried).
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
for candidate in "${PYTHON:-}" python3.13 python3.12 python3; do
  [ -n "$candidate" ] || continue
  path=$(command -v "$candidate" 2>/dev/null) || continue
  if ok "$path"; then
    "$path" -c 'import sys; print(sys.executable)'
    exit 0
  fi
done
if command -v pyenv >/dev/null 2>&1; then
  for path in $(ls -d "$(pyenv root)"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do
    if ok "$path"; then echo "$path"; exit 0; fi
  done
fi
echo "TrainPlan needs Python 3.12 or newer: none found (tried \$PYTHON, python3.13, python3.12, python3, pyenv)." >&2
echo "Install one (https://www.python.org/downloads/) or run: make PYTHON=/path/to/python3.12 ..." >&2
exit 1
