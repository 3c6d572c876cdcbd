#!/usr/bin/env python3
"""Regenerates tests/fixtures/powershell-reference/catalogue.json, the
reference catalogue tests/powershell_reference.rs checks every generated
PowerShell script against (issue 38; docs/powershell.md).

No PowerShell runs here, so what a cmdlet accepts is read from Microsoft's
own reference pages, as git mirrors (the `fetch` tool's bare git dirs, or
any clone):

  --powershell-docs  MicrosoftDocs/PowerShell-Docs: reference/5.1/<Module>/<Cmdlet>.md
                     (Windows PowerShell 5.1's own modules, on every Windows Server
                     from 2016) and reference/5.1/Microsoft.PowerShell.Core/About/
                     about_CommonParameters.md
  --windows-docs     MicrosoftDocs/windows-powershell-docs:
                     docset/winserver{2016,2019,2022,2025}-ps/<Module>/<Cmdlet>.md
  --pssa             PowerShell/PSScriptAnalyzer: docs/Rules/*.md (the rules the
                     check applies)
  --wmco             openshift/windows-machine-config-operator: pkg/internal/hns.psm1
                     (the module network-conf.ps1 imports; WMCO's copy of
                     microsoft/SDN's Kubernetes/windows/hns.psm1)
  --referencesource  microsoft/referencesource: .NET Framework 4.8's source (the
                     dotnet/dotnet-api-docs repository is over the 500 MiB a
                     snapshot may have here); a type is there when a file in its
                     namespace declares it public, a member when the type (or a
                     base class) declares it public

The commands catalogued are those already in the catalogue, plus --add NAME
(repeatable); the .NET types likewise, plus --add-type Full.Name[::Member].
A name no source has is kept under "not_found". Each entry
records facts only (module, versions, parameters, their types, aliases,
accepted values, positions and parameter sets), each with the repository, commit and path
it was read from; no prose is copied.

Usage:
  python3 scripts/powershell-catalogue.py --powershell-docs DIR --windows-docs DIR \\
      --pssa DIR --wmco DIR --referencesource DIR [--add Get-Foo] [--add-type System.X::Y]
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / 'tests/fixtures/powershell-reference/catalogue.json'
# Windows PowerShell 5.1 was "Released in Windows 10 Anniversary Update and
# Windows Server 2016" (PowerShell-Docs: reference/docs-conceptual/install/
# PowerShell-Support-Lifecycle.md) and is every later Windows Server's; the
# docsets name the versions of the Windows Server modules.
WS_DOCSETS = ['2016', '2019', '2022', '2025']
# The versions the scripts must run on (WMCO supports Windows Server 2019 and 2022).
TARGETS = ['2019', '2022']
PSSA_RULES = ['AvoidUsingCmdletAliases', 'AvoidUsingPositionalParameters']


def git(gitdir, *args):
    return subprocess.run(['git', '--git-dir', str(gitdir), *args], check=True,
                          capture_output=True).stdout.decode('utf-8', errors='replace').replace('\r\n', '\n')


class Mirror:
    def __init__(self, gitdir, repo):
        self.gitdir = gitdir
        self.repo = repo
        self.commit = git(gitdir, 'rev-parse', 'HEAD').strip()
        self.files = git(gitdir, 'ls-tree', '-r', '--name-only', 'HEAD').splitlines()
        self.cache = {}
        self.declared = {}

    def show(self, path):
        if path not in self.cache:
            self.cache[path] = git(self.gitdir, 'show', f'HEAD:{path}').lstrip('\ufeff')
        return self.cache[path]

    def declaring(self, names):
        """Files declaring a class, struct, enum or interface of one of
        `names`, by name (one grep for all)."""
        names = sorted(set(names) - set(self.declared))
        if names:
            for n in names:
                self.declared[n] = []
            pattern = r'(class|struct|enum|interface)\s+(' + '|'.join(map(re.escape, names)) + r')\b'
            r = subprocess.run(['git', '--git-dir', str(self.gitdir), 'grep', '-o', '-E', pattern, 'HEAD', '--', '*.cs'],
                               capture_output=True)
            for line in r.stdout.decode('utf-8', errors='replace').splitlines():
                _, path, match = line.split(':', 2)
                n = match.split()[-1]
                if n in self.declared and path not in self.declared[n]:
                    self.declared[n].append(path)
        return self.declared

    def source(self, path):
        return {'repo': self.repo, 'commit': self.commit, 'path': path}


def front_matter(text):
    m = re.match(r'---\n(.*?)\n---\n', text, re.S)
    fm = {'aliases': []}
    if not m:
        return fm
    key = None
    for line in m.group(1).splitlines():
        item = re.match(r'\s+-\s+(\S+)', line)
        if item and key == 'aliases':
            fm['aliases'].append(item.group(1))
            continue
        kv = re.match(r'([A-Za-z ]+):\s*(.*)', line)
        if kv:
            key = kv.group(1).strip().lower()
            if key != 'aliases':
                fm[key] = kv.group(2).strip()
    return fm


def section(text, title):
    m = re.search(r'^## ' + title + r'\s*$(.*?)(?=^## |\Z)', text, re.M | re.S)
    return m.group(1) if m else ''


def syntax_sets(text, command):
    """Each parameter set of the SYNTAX section: name -> {default, parameters:
    name -> {required, positional}}."""
    body = section(text, 'SYNTAX')
    sets = {}
    parts = re.split(r'^### (.+)$', body, flags=re.M)
    chunks = [('__AllParameterSets', parts[0])] if len(parts) == 1 else list(zip(parts[1::2], parts[2::2]))
    for heading, chunk in chunks:
        default = '(Default)' in heading
        # The pages of provider cmdlets show a set once per provider
        # (`Path (Default) - FileSystem provider`); PowerShell has one set,
        # with the provider's dynamic parameters added: the union.
        name = ' '.join(re.sub(r'\s-\s.*providers?\s*$', '', heading.replace('(Default)', '')).split())
        code = re.search(r'```\w*\n(.*?)```', chunk, re.S)
        if not code:
            continue
        line = ' '.join(code.group(1).split())
        if not line.lower().startswith(command.lower()):
            continue
        params = {}
        depth = 0
        i = 0
        while i < len(line):
            c = line[i]
            if c == '[':
                depth += 1
            elif c == ']':
                depth -= 1
            elif c == '-' and (i == 0 or line[i - 1] in ' ['):
                m = re.match(r'-([A-Za-z][A-Za-z0-9_]*)', line[i:])
                if m:
                    pname = m.group(1)
                    end = i + len(m.group(0))
                    # `[-Name] <T>` is a positional parameter; `[-Switch]` is not.
                    marker = line[i - 1:i] == '[' and line[end:end + 3] == '] <'
                    params[pname] = {'required': depth - (1 if marker else 0) == 0, 'positional': marker}
                    i = end
                    continue
            i += 1
        if name in sets:
            for pname, flags in params.items():
                sets[name]['parameters'].setdefault(pname, flags)
            sets[name]['default'] |= default
        else:
            sets[name] = {'default': default, 'parameters': params}
    return sets


def yaml_blocks(chunk):
    out = []
    for block in re.findall(r'```yaml\n(.*?)```', chunk, re.S):
        d = {}
        for line in block.splitlines():
            kv = re.match(r'([A-Za-z ]+):\s*(.*)', line)
            if kv:
                d[kv.group(1).strip()] = kv.group(2).strip()
        out.append(d)
    return out


def parameters(text):
    """PARAMETERS: name -> {type, aliases, blocks: [{sets, required, position, pipeline}]}."""
    body = section(text, 'PARAMETERS')
    params = {}
    parts = re.split(r'^### -(\S+)\s*$', body, flags=re.M)
    for pname, chunk in zip(parts[1::2], parts[2::2]):
        blocks = yaml_blocks(chunk)
        if not blocks:
            continue
        aliases = sorted({a.strip() for b in blocks for a in b.get('Aliases', '').split(',') if a.strip()})
        values = sorted({v.strip() for b in blocks for v in b.get('Accepted values', '').split(',') if v.strip()})
        params[pname] = {
            'type': blocks[0].get('Type', ''),
            'aliases': aliases,
            'values': values,
            'blocks': [{
                'sets': [s.strip() for s in b.get('Parameter Sets', '(All)').split(',') if s.strip()],
                'required': b.get('Required', 'False').lower().startswith('true'),
                'position': b.get('Position', 'Named'),
                'pipeline': b.get('Accept pipeline input', 'False').lower().startswith('true'),
            } for b in blocks],
        }
    return params


COMMON = {'CommonParameters'}


def page(text, command):
    """The facts of one reference page: its parameters and parameter sets."""
    fm = front_matter(text)
    sets = syntax_sets(text, command)
    params = parameters(text)
    out_params = {}
    for pname, p in params.items():
        out_params[pname] = {'type': p['type'], 'aliases': p['aliases']}
        if p['values']:
            out_params[pname]['values'] = p['values']
    out_sets = {}
    for sname, s in sets.items():
        members = {}
        for pname, flags in s['parameters'].items():
            if pname in COMMON:
                continue
            info = params.get(pname, {'blocks': []})
            block = next((b for b in info['blocks'] if sname in b['sets']), None) \
                or next((b for b in info['blocks'] if '(All)' in b['sets']), None) \
                or (info['blocks'][0] if info['blocks'] else None)
            position = block['position'] if block else 'Named'
            members[pname] = {
                'required': flags['required'],
                'position': int(position) if position.isdigit() else None,
                'pipeline': bool(block and block['pipeline']),
            }
            out_params.setdefault(pname, {'type': '', 'aliases': []})
        out_sets[sname] = {'default': s['default'], 'parameters': members}
    return {'module': fm.get('module name', ''), 'aliases': fm['aliases'],
            'parameters': out_params, 'sets': out_sets}


def find(mirror, prefix, command):
    want = f'/{command.lower()}.md'
    return [f for f in mirror.files if f.startswith(prefix) and f.lower().endswith(want)]


def catalogue_command(command, ps, ws):
    core = find(ps, 'reference/5.1/', command)
    if core:
        path = core[0]
        p = page(ps.show(path), command)
        p.update({'windows': WS_DOCSETS, 'source': ps.source(path)})
        return {'module': p['module'], 'windows': WS_DOCSETS, 'aliases': p.pop('aliases'), 'pages': [p]}
    pages = []
    versions = []
    for v in WS_DOCSETS:
        found = find(ws, f'docset/winserver{v}-ps/', command)
        if not found:
            continue
        versions.append(v)
        if v not in TARGETS:
            continue
        # A cmdlet documented in two modules of one docset (ServerManager and
        # its Migration module): the module's own page first.
        found.sort(key=lambda f: 'Migration' in f)
        p = page(ws.show(found[0]), command)
        p.pop('aliases')
        facts = {k: p[k] for k in ('module', 'parameters', 'sets')}
        same = next((q for q in pages if {k: q[k] for k in ('module', 'parameters', 'sets')} == facts), None)
        if same:
            same['windows'].append(v)
            same['also'].append(ws.source(found[0]))
        else:
            p.update({'windows': [v], 'source': ws.source(found[0]), 'also': []})
            pages.append(p)
    if not versions:
        return None
    for p in pages:
        if not p['also']:
            p.pop('also')
    if pages:
        module = pages[-1]['module']
    else:  # documented only for versions the scripts do not target
        newest = find(ws, f'docset/winserver{versions[-1]}-ps/', command)[0]
        module = front_matter(ws.show(newest)).get('module name', '')
    return {'module': module, 'windows': versions, 'aliases': [], 'pages': pages}


def common_parameters(ps):
    """about_CommonParameters' "Common parameters" section; its "Risk
    management parameters" (WhatIf, Confirm) are a cmdlet's own, listed on
    its page when it has them."""
    path = 'reference/5.1/Microsoft.PowerShell.Core/About/about_CommonParameters.md'
    text = section(ps.show(path), 'Common parameters')
    names = []
    for m in re.finditer(r'^### -(\w+)\s*$(.*?)(?=^### |\Z)', text, re.M | re.S):
        # ProgressAction is PowerShell 7.4's (its own section says so), not 5.1's.
        if re.search(r'added in\s+PowerShell 7', m.group(2)):
            continue
        names.append(m.group(1))
    return {'names': names, 'source': ps.source(path)}


def automatic_variables(ps):
    """The variables PowerShell sets: about_Automatic_Variables' headings and
    about_Preference_Variables' table."""
    auto = 'reference/5.1/Microsoft.PowerShell.Core/About/about_Automatic_Variables.md'
    pref = 'reference/5.1/Microsoft.PowerShell.Core/About/about_Preference_Variables.md'
    names = re.findall(r'^### `\$(\S+?)`\s*$', ps.show(auto), re.M)
    names += re.findall(r'^\| \[`\$(\w+)`\]', ps.show(pref), re.M)
    return {'names': names, 'sources': [ps.source(auto), ps.source(pref)]}


def accelerators(ps):
    path = 'reference/5.1/Microsoft.PowerShell.Core/About/about_Type_Accelerators.md'
    out = {}
    for m in re.finditer(r'^\|\s*(\w+)\s*\|\s*\[([\w.`\[\], ]+?)\]\(xref:', ps.show(path), re.M):
        out[m.group(1)] = m.group(2)
    return out, ps.source(path)


def pssa_rules(pssa):
    out = {}
    for rule in PSSA_RULES:
        path = f'docs/Rules/{rule}.md'
        pssa.show(path)  # it exists at this commit
        out[rule] = {'source': pssa.source(path)}
    return out


def module_functions(mirror, path):
    """The functions a script module exports (Export-ModuleMember
    -Function), with their parameter names, read from its text."""
    text = mirror.show(path)
    exported = {m.lower() for m in re.findall(r'Export-ModuleMember\s+-Function\s+([\w-]+)', text, re.I)}
    out = {}
    for m in re.finditer(r'^function\s+([\w-]+)\s*(\(\s*\))?\s*\{', text, re.M | re.I):
        if m.group(1).lower() not in exported:
            continue
        pm = re.match(r'\s*(?:\[CmdletBinding\([^)]*\)\]\s*)?param\s*\(', text[m.end():], re.I)
        params = []
        if pm:
            # The parameter block: up to its balanced closing parenthesis.
            start = m.end() + pm.end()
            depth, i = 1, start
            while depth and i < len(text):
                depth += {'(': 1, ')': -1}.get(text[i], 0)
                i += 1
            block = re.sub(r'\[[^\]]*\]', '', text[start:i - 1])
            params = re.findall(r'\$(\w+)', re.sub(r'=[^,\n]*', '', block))
        out[m.group(1)] = {'parameters': params}
    return {'source': mirror.source(path), 'functions': out}


def dotnet_type(rs, full, members):
    """Where .NET Framework 4.8's reference source declares the public
    type `full`, and which of `members` it (or a base class) declares."""
    ns, _, name = full.rpartition('.')
    decl = re.compile(r'^\s*public\s+(?:(?:static|sealed|abstract|unsafe|partial|new)\s+)*(?:class|struct|enum|interface)\s+'
                      + re.escape(name) + r'\b(.*)$', re.M)
    files = []
    base = None
    for f in rs.declaring([name])[name]:
        text = rs.show(f)
        d = decl.search(text)
        if not d or not re.search(r'^\s*namespace\s+' + re.escape(ns) + r'\s*($|\{)', text, re.M):
            continue
        files.append((f, text))
        b = re.match(r'\s*:\s*([\w.]+)', d.group(1))
        if b and base is None:
            base = b.group(1)
    if not files:
        return None
    found, missing = [], []
    for m in sorted(members):
        member = re.compile(r'^\s*public\b[^;=(){}]*\b' + re.escape(m) + r'\s*(\(|\{|=|;|<|$)', re.M | re.I)
        enum_member = re.compile(r'^\s*' + re.escape(m) + r'\s*(=|,|$)', re.M | re.I)
        if any(member.search(t) or ('enum ' + name in t and enum_member.search(t)) for _, t in files):
            found.append(m)
        else:
            missing.append(m)
    entry = {'source': rs.source(files[0][0]), 'members': found}
    if missing and base:
        full_base = base if '.' in base else f'{ns}.{base}'
        parent = dotnet_type(rs, full_base, missing) if full_base != full else None
        if parent:
            found += parent['members']
            missing = parent.get('missing', [])
            entry['base'] = full_base
    entry['members'] = sorted(found)
    if missing:
        entry['missing'] = missing
    return entry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--powershell-docs', required=True)
    ap.add_argument('--windows-docs', required=True)
    ap.add_argument('--pssa', required=True)
    ap.add_argument('--wmco', required=True, help="openshift/windows-machine-config-operator (its pkg/internal/hns.psm1)")
    ap.add_argument('--referencesource', required=True, help='microsoft/referencesource (.NET Framework 4.8)')
    ap.add_argument('--add', action='append', default=[], help='a cmdlet to catalogue')
    ap.add_argument('--add-type', action='append', default=[], help='a .NET type, or Type::Member')
    ap.add_argument('--out', default=str(OUT))
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    wanted = sorted(set(old.get('commands', {})) | set(old.get('not_found', [])) | set(a.add), key=str.lower)
    ps = Mirror(a.powershell_docs, 'MicrosoftDocs/PowerShell-Docs')
    ws = Mirror(a.windows_docs, 'MicrosoftDocs/windows-powershell-docs')
    pssa = Mirror(a.pssa, 'PowerShell/PSScriptAnalyzer')
    wmco = Mirror(a.wmco, 'openshift/windows-machine-config-operator')
    rs = Mirror(a.referencesource, 'microsoft/referencesource')
    commands, missing = {}, []
    for name in wanted:
        entry = catalogue_command(name, ps, ws)
        if entry is None:
            missing.append(name)
        else:
            commands[name] = entry
    old_dotnet = old.get('dotnet', {})
    types = {t: set(e.get('members', [])) | set(e.get('missing', [])) for t, e in old_dotnet.get('types', {}).items()}
    for t in old_dotnet.get('not_found', []):
        types.setdefault(t, set())
    for spec in a.add_type:
        t, _, m = spec.partition('::')
        types.setdefault(t, set())
        if m:
            types[t].add(m)
    dotnet_types, dotnet_missing = {}, []
    rs.declaring([t.rpartition('.')[2] for t in types])
    for t in sorted(types):
        entry = dotnet_type(rs, t, types[t])
        if entry is None:
            dotnet_missing.append(t)
        else:
            dotnet_types[t] = entry
    acc, acc_source = accelerators(ps)
    cat = {
        'generated_by': 'scripts/powershell-catalogue.py',
        'targets': TARGETS,
        'common_parameters': common_parameters(ps),
        'automatic_variables': automatic_variables(ps),
        'rules': pssa_rules(pssa),
        'commands': commands,
        'not_found': missing,
        'modules': {'hns.psm1': module_functions(wmco, 'pkg/internal/hns.psm1')},
        'dotnet': {'accelerators': acc, 'accelerators_source': acc_source,
                   'types': dotnet_types, 'not_found': dotnet_missing},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cat, indent=1, sort_keys=True) + '\n')
    print(f'{len(commands)} commands, {len(missing)} not found: {", ".join(missing) or "-"}; '
          f'{len(dotnet_types)} .NET types, {len(dotnet_missing)} not found: {", ".join(dotnet_missing) or "-"}',
          file=sys.stderr)


if __name__ == '__main__':
    main()
