#!/usr/bin/env bash
# Renders the example report (GPT-3 175B on 256 A100) and every examples/whatif study in headless
# Chromium: the page must produce a non-blank PNG (pixel variance, tests/e2e/png_not_blank.py),
# log no console message or error, and its DOM must hold the inline SVG charts. Skips (77) when
# Chromium is not installed (scripts/setup-debian.sh installs it).
set -euo pipefail
bin=$(realpath "$1")
root=$(realpath "$2")
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "SKIP: chromium not installed (apt-get install chromium)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$bin" report --out report.html 2> /dev/null
pages=(report.html)
for f in "$root"/examples/whatif/*.yaml; do
  name=$(basename "$f" .yaml)
  "$bin" whatif "$f" --out "whatif-$name.html" 2> /dev/null
  pages+=("whatif-$name.html")
done

passed=0
for page in "${pages[@]}"; do
  png="${page%.html}.png"
  # 1280x2000 CSS pixels drawn at half scale (keeps the stdlib PNG check quick).
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$work/profile" \
    --force-device-scale-factor=0.5 --enable-logging=stderr --v=0 --window-size=1280,2000 \
    --screenshot="$work/$png" "file://$work/$page" > "$page.log" 2>&1 || fail "$page: chromium exited $?"
  [[ -s "$png" ]] || fail "$page: no screenshot"
  python3 "$root/tests/e2e/png_not_blank.py" "$png" || fail "$page: blank screenshot"
  if grep -E ':CONSOLE|Uncaught|SyntaxError' "$page.log"; then fail "$page: the page logged the above"; fi
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$work/profile" \
    --dump-dom "file://$work/$page" > "$page.dom" 2> /dev/null || fail "$page: --dump-dom failed"
  svgs=$(grep -o '<svg ' "$page.dom" | wc -l)
  want=3
  [[ $page == report.html ]] && want=7
  [[ $svgs -ge $want ]] || fail "$page: the rendered DOM has $svgs <svg>, expected $want"
  echo "$page: rendered, $svgs SVG charts in the DOM"
  passed=$((passed + 1))
done
echo "$passed passed, 0 failed"
