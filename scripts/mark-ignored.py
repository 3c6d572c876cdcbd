#!/usr/bin/env python3
"""Marks every test that needs a program outside cargo (the real control
plane, containerd, systemd-analyze, promtool, kubectl) with
#[ignore = reason], so that a plain `cargo test` shows it as ignored, never
as passed; scripts/test.sh runs them all (--include-ignored). Idempotent:
run it after adding such a test (tests/architecture.rs checks that none is
left unmarked). Usage: python3 scripts/mark-ignored.py [REPO]"""
import re, sys, pathlib
args = [a for a in sys.argv[1:] if a != '--check']
check = '--check' in sys.argv[1:]
repo = pathlib.Path(args[0] if args else '.')
R = {
 'cp': 'needs the real control plane (Go builds it): scripts/test.sh runs it',
 'ctr': 'needs containerd, a registry and root: scripts/test.sh runs it',
 'sd': 'needs systemd-analyze: scripts/test.sh runs it',
 'prom': 'needs promtool: scripts/test.sh runs it',
 'kc': 'needs kubectl: scripts/test.sh runs it',
 'ne': 'needs prometheus-node-exporter: scripts/test.sh runs it',
}
PAT = [
 ('cp', re.compile(r'Backend::Real\b|ControlPlane::start|ControlPlane::start_bare|real_control_plane\(|Bench::real|TestApi::real')),
 ('ctr', re.compile(r'containerd_or|unavailable\(\)|Containerd::start')),
 ('sd', re.compile(r'systemd_analyze_or_say_why')),
 ('prom', re.compile(r'\bpromtool\(')),
 ('kc', re.compile(r'\brender\("(deploy|tests/fixtures/deploy)')),
 ('ne', re.compile(r'\bnode_exporter_or_say_why\(')),
]
attr = re.compile(r'^(\s*)#\[(tokio::)?test\b')
changed = 0
for path in sorted((repo / 'tests').glob('*.rs')):
    lines = path.read_text().split('\n')
    whole_file = None
    if path.name.startswith('real_cluster_'):
        whole_file = 'cp'
    elif path.name == 'real_containerd.rs':
        whole_file = 'ctr'
    out = []
    i = 0
    while i < len(lines):
        m = attr.match(lines[i])
        if not m:
            out.append(lines[i]); i += 1; continue
        # the attribute block and the fn
        j = i
        while j < len(lines) and not re.match(r'^\s*(pub\s+)?(async\s+)?fn\s', lines[j]):
            j += 1
        block = lines[i:j]
        prev = out[-1] if out else ''
        already = any('#[ignore' in l for l in block) or '#[ignore' in prev
        # body: up to the next line that is exactly '}'
        k = j
        while k < len(lines) and lines[k] != '}':
            k += 1
        body = '\n'.join(lines[j:k + 1])
        name = re.search(r'fn\s+(\w+)', lines[j]).group(1) if j < len(lines) else ''
        kind = None
        if name != 'fake_kubelet_process':
            if whole_file and 'in_memory' not in name:
                kind = whole_file
            else:
                for k_, p in PAT:
                    if p.search(body):
                        kind = k_; break
        if kind and not already:
            out.append(f'{m.group(1)}#[ignore = "{R[kind]}"]')
            changed += 1
            print(f'{path.name}: {name} ({kind})')
        out.extend(lines[i:j])
        i = j
    if not check:
        path.write_text('\n'.join(out))
if check and changed:
    print(f'{changed} test(s) need a program outside cargo and are not #[ignore]d: run python3 scripts/mark-ignored.py', file=sys.stderr)
    sys.exit(1)
print(f"{changed} marked", file=sys.stderr)
