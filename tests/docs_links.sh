#!/usr/bin/env bash
# tests/docs_links.sh — every relative link in README.md and docs/*.md points
# at a file that exists, and a link's #anchor at a heading of that page
# (GitHub's slugs). Links inside code (fenced or `inline`) are not links.
set -u
cd "$(dirname "$0")/.."
exec /usr/bin/python3 - README.md docs/*.md <<'PY'
import os, re, sys

def strip_code(text):
    out, fence = [], False
    for line in text.split('\n'):
        if line.startswith('```'):
            fence = not fence
            out.append('')
            continue
        out.append('' if fence else re.sub(r'`[^`]*`', '', line))
    return out

def slugs(path):
    s = set()
    fence = False
    for line in open(path).read().split('\n'):
        if line.startswith('```'):
            fence = not fence
        if fence:
            continue
        m = re.match(r'#+ (.*)', line)
        if m:
            t = m.group(1).strip().lower()
            t = re.sub(r'[^\w\- ]', '', t)
            s.add(t.replace(' ', '-'))
    return s

bad = links = 0
for page in sys.argv[1:]:
    for n, line in enumerate(strip_code(open(page).read()), 1):
        for target in re.findall(r'\]\(([^)\s]+)\)', line):
            if re.match(r'[a-z]+:', target):
                continue
            links += 1
            path, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                print('%s:%d: %s: no such file' % (page, n, target)); bad += 1
            elif anchor and dest.endswith('.md') and anchor not in slugs(dest):
                print('%s:%d: %s: no such heading' % (page, n, target)); bad += 1
print('docs_links: %d links in %d pages, %d broken' % (links, len(sys.argv) - 1, bad))
sys.exit(1 if bad else 0)
PY
