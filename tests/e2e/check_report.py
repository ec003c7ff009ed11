#!/usr/bin/env python3
"""Structural checks of dtplan reports (standard library only).

  check_report.py html FILE report|whatif|execute [MAX_BYTES]
      self-contained HTML: every chart of the kind present as an inline <svg> inside its figure;
      no script but the one <script type="application/json" id="dtplan-source"> (which must
      parse as JSON); no event-handler attribute, no javascript: URL, no external resource;
      size under MAX_BYTES (default 2,000,000).
  check_report.py md FILE
      GitHub-flavoured Markdown without raw HTML: no '<' opening a tag anywhere; every pipe
      table has a delimiter row and the same number of cells in each row.
Exit 0 when every check passes; otherwise prints what failed and exits 1.
"""
import html.parser
import json
import re
import sys

CHARTS = {
    "report": ["chart-memory-stages", "chart-memory-top", "chart-step-breakdown", "chart-pareto",
               "chart-heatmap", "chart-timeline", "chart-alternatives"],
    "whatif": ["chart-whatif-step", "chart-whatif-memory", "chart-whatif-throughput"],
    "execute": [],  # dtplan execute --out: tables only
}


class Scan(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems, self.stack, self.figures = [], [], {}
        self.scripts, self.json_text, self.in_json = 0, "", False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name, value in attrs:
            if name.lower().startswith("on"):
                self.problems.append("event-handler attribute %s on <%s>" % (name, tag))
            if value and re.match(r"\s*javascript:", value, re.I):
                self.problems.append("javascript: URL in <%s %s>" % (tag, name))
            if name in ("src", "href") and value and re.match(r"\s*(https?:)?//", value):
                self.problems.append("external resource %s=%s" % (name, value))
        if tag == "script":
            self.scripts += 1
            if a.get("type") != "application/json" or a.get("id") != "dtplan-source":
                self.problems.append("executable <script> %s" % attrs)
            self.in_json = True
        if tag == "figure":
            self.stack.append([a.get("id", ""), 0])
        if tag == "svg" and self.stack:
            self.stack[-1][1] += 1
        if tag in ("iframe", "object", "embed", "img", "link"):
            self.problems.append("<%s> element (not self-contained)" % tag)

    def handle_endtag(self, tag):
        if tag == "script":
            self.in_json = False
        if tag == "figure" and self.stack:
            fid, svgs = self.stack.pop()
            self.figures[fid] = svgs

    def handle_data(self, data):
        if self.in_json:
            self.json_text += data


def check_html(path, kind, max_bytes):
    text = open(path, encoding="utf-8").read()
    problems = []
    size = len(text.encode("utf-8"))
    if size >= max_bytes:
        problems.append("%d bytes, limit %d" % (size, max_bytes))
    s = Scan()
    s.feed(text)
    problems += s.problems
    for chart in CHARTS[kind]:
        if s.figures.get(chart, 0) < 1:
            problems.append("chart %s has no inline <svg>" % chart)
    if s.scripts != 1:
        problems.append("%d <script> elements, expected exactly the JSON one" % s.scripts)
    try:
        json.loads(s.json_text)
    except ValueError as e:
        problems.append("embedded JSON does not parse: %s" % e)
    if "</script" in s.json_text.lower() or "<" in s.json_text:
        problems.append("embedded JSON has an unescaped '<'")
    print("%s: %d bytes, %d charts with SVG, %d script (JSON)" %
          (path, size, sum(1 for c in CHARTS[kind] if s.figures.get(c, 0)), s.scripts))
    return problems


def cells(row):
    # Split on pipes not escaped with a backslash; drop the leading and trailing empties.
    parts = re.split(r"(?<!\\)\|", row.strip())
    return parts[1:-1]


def check_md(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    problems = []
    for i, line in enumerate(lines, 1):
        m = re.search(r"<[A-Za-z/!?]", line)
        if m:
            problems.append("line %d: raw HTML '%s'" % (i, line[m.start():m.start() + 20]))
    fenced, tables, i = False, 0, 0
    while i < len(lines):
        if lines[i].startswith("```"):
            fenced = not fenced
            i += 1
            continue
        if not fenced and lines[i].startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append((i + 1, lines[i]))
                i += 1
            tables += 1
            n = len(cells(block[0][1]))
            if len(block) < 2 or not re.fullmatch(r"\|( :?-{3,}:? \|)+", block[1][1].strip()):
                problems.append("line %d: table without a delimiter row" % block[0][0])
            for no, row in block:
                if len(cells(row)) != n:
                    problems.append("line %d: %d cells, header has %d" % (no, len(cells(row)), n))
            continue
        i += 1
    if fenced:
        problems.append("unclosed code fence")
    if tables == 0:
        problems.append("no table")
    print("%s: %d lines, %d tables" % (path, len(lines), tables))
    return problems


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "html":
        problems = check_html(path, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 2000000)
    else:
        problems = check_md(path)
    for p in problems:
        print("FAIL: %s: %s" % (path, p))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
