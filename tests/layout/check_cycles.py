#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No call cycles between the files of one room (docs/architecture.md).

A room is one source directory. Each object file of the build tree is a
node; an undefined symbol of one object that another object of the same
room defines is an arrow from the caller's file to the callee's. A cycle
of arrows (a strongly connected component of more than one file) means a
file calls back into its caller's file, which the rule "events go back up
through callbacks" forbids, unless the back-call is the design: then
cycles_allow.txt names it, and the called file's header says why.

Allowlist lines (ROOM is the directory, FROM and TO file names without .c):
  edge ROOM FROM TO  reason...   the arrow FROM -> TO is a designed back-call
  room ROOM  reason...           every cycle inside ROOM is tolerated
Arrows listed are removed before cycles are looked for; an entry that no
longer matches an arrow (or a room with no cycle) is reported as stale, so
the list cannot outlive what it excuses.

Usage: check_cycles.py BUILD_DIR ALLOWLIST [--edges]
       check_cycles.py --self-test
Exit 0: no cycle outside the list; 1: each cycle printed with its arrows
and the symbols behind them; 2: usage or I/O error.
"""
import collections
import os
import subprocess
import sys


def room_of(build, obj):
    """(room, file key) of build/<dir>/CMakeFiles/<t>.dir/<sub>/<f>.c.o."""
    parts = os.path.relpath(obj, build).split(os.sep)
    i = parts.index('CMakeFiles')
    room = '/'.join(parts[:i])
    name = parts[-1]
    for ext in ('.c.o', '.o'):
        if name.endswith(ext):
            name = name[:-len(ext)]
            break
    sub = '/'.join(parts[i + 2:-1])
    return room, (sub + '/' if sub else '') + name


def built_objects(build):
    """The objects build.ninja still names (None without Ninja): a file
    deleted from the tree leaves its old object behind, whose arrows are
    no longer true."""
    try:
        with open(os.path.join(build, 'build.ninja')) as fp:
            text = fp.read()
    except OSError:
        return None
    out = set()
    for line in text.splitlines():
        if line.startswith('build ') and ':' in line:
            target = line[6:].split(':', 1)[0].split(' ')[0]
            if target.endswith('.o'):
                out.add(os.path.normpath(os.path.join(build, target)))
    return out


def objects(build):
    known = built_objects(build)
    for top, dirs, names in os.walk(build):
        rel = os.path.relpath(top, build).split(os.sep)
        if rel[0] == 'tests':
            dirs[:] = []
            continue
        if 'CMakeFiles' not in rel:
            continue
        for n in names:
            path = os.path.join(top, n)
            if n.endswith('.o') and (known is None or
                                     os.path.normpath(path) in known):
                yield path


def symbols(objs, batch=200):
    """(object, symbol, kind) of every symbol of |objs|: one nm per
    |batch| objects (-A names each line's file), not one per object,
    whose start cost most of the check's time (a minute and more on a
    loaded machine, for a few hundred objects)."""
    for i in range(0, len(objs), batch):
        chunk = objs[i:i + batch]
        out = subprocess.run(['nm', '-P', '-A'] + chunk, capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            obj, sep, rest = line.partition(': ')
            p = rest.split()
            if not sep or len(p) < 2:
                continue
            yield obj, p[0], p[1]


def graph(build):
    """{room: {file: {callee: set(symbols)}}} from nm -P of every object."""
    defs = collections.defaultdict(set)   # (room, symbol) -> files
    undefs = collections.defaultdict(set)  # (room, file) -> symbols
    nodes = collections.defaultdict(set)
    objs = list(objects(build))
    where = {obj: room_of(build, obj) for obj in objs}
    for room, f in where.values():
        nodes[room].add(f)
    for obj, sym, kind in symbols(objs):
        room, f = where[obj]
        if kind in 'TDBRCVW':
            defs[(room, sym)].add(f)
        elif kind == 'U':
            undefs[(room, f)].add(sym)
    g = {room: {f: collections.defaultdict(set) for f in fs}
         for room, fs in nodes.items()}
    for (room, f), syms in undefs.items():
        for s in syms:
            for callee in defs.get((room, s), ()):
                if callee != f:
                    g[room][f][callee].add(s)
    return g


def sccs(edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        # Iterative: a room may hold hundreds of files.
        work = [(v, iter(sorted(edges.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def parse_allow(lines):
    edges, rooms, errors = {}, {}, []
    for n, raw in enumerate(lines, 1):
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        p = line.split()
        if p[0] == 'edge' and len(p) >= 5:
            edges[(p[1], p[2], p[3])] = n
        elif p[0] == 'room' and len(p) >= 3:
            rooms[p[1]] = n
        else:
            errors.append('%d: want "edge ROOM FROM TO reason" or '
                          '"room ROOM reason"' % n)
    return edges, rooms, errors


def check(g, allow_edges, allow_rooms, show_edges):
    """Returns (report lines, number of problems)."""
    report, problems = [], 0
    for key, n in sorted(allow_edges.items(), key=lambda kv: kv[1]):
        room, a, b = key
        if b not in g.get(room, {}).get(a, {}):
            report.append('stale allowlist line %d: no arrow %s: %s -> %s'
                          % (n, room, a, b))
            problems += 1
    for room in sorted(g):
        edges = {f: {c for c in cs if (room, f, c) not in allow_edges}
                 for f, cs in g[room].items()}
        comps = sccs(edges)
        if room in allow_rooms:
            if not comps:
                report.append('stale allowlist line %d: room %s has no cycle'
                              % (allow_rooms[room], room))
                problems += 1
            continue
        for comp in comps:
            problems += 1
            report.append('cycle in %s: %s' % (room, ' '.join(comp)))
            if show_edges:
                for a in comp:
                    for b in sorted(edges[a] & set(comp)):
                        report.append('  %s -> %s: %s' % (
                            a, b, ' '.join(sorted(g[room][a][b]))))
    return report, problems


def self_test():
    g = {'r': {'a': {'b': {'x'}}, 'b': {'a': {'y'}, 'c': {'z'}},
               'c': {}},
         'q': {'m': {'n': {'s'}}, 'n': {'m': {'t'}}}}
    for f in ('a', 'b', 'c'):
        g['r'][f] = collections.defaultdict(set, g['r'][f])
    for f in ('m', 'n'):
        g['q'][f] = collections.defaultdict(set, g['q'][f])
    rep, n = check(g, {}, {}, True)
    assert n == 2 and 'cycle in r: a b' in rep and 'cycle in q: m n' in rep, rep
    rep, n = check(g, {('r', 'b', 'a'): 1}, {'q': 2}, False)
    assert n == 0, rep
    rep, n = check(g, {('r', 'c', 'a'): 1}, {'q': 2}, False)
    assert n == 2 and rep[0].startswith('stale allowlist line 1'), rep
    e, r, err = parse_allow(['edge r b a why', 'room q why', 'bogus'])
    assert ('r', 'b', 'a') in e and 'q' in r and len(err) == 1
    big = {str(i): {str(i + 1)} for i in range(5000)}
    big['5000'] = {'0'}
    assert len(sccs(big)) == 1 and len(sccs(big)[0]) == 5001
    print('check_cycles: self-test ok')
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    args = [a for a in argv[1:] if a != '--edges']
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    build, allow_path = args
    try:
        with open(allow_path) as fp:
            allow_edges, allow_rooms, errors = parse_allow(fp)
    except OSError as e:
        print('check_cycles: %s: %s' % (allow_path, e.strerror))
        return 2
    if errors:
        for e in errors:
            print('check_cycles: %s:%s' % (allow_path, e))
        return 2
    g = graph(build)
    if not g:
        print('check_cycles: no object files under %s' % build)
        return 2
    report, problems = check(g, allow_edges, allow_rooms, True)
    if '--edges' in argv:
        for room in sorted(g):
            for comp in sccs(g[room]):
                print('%d %s %s' % (len(comp), room, ' '.join(comp)))
    for line in report:
        print(line)
    if problems:
        print('check_cycles: FAILED: %d problem(s); break the cycle with a '
              'callback, a lower helper file or a moved function, or name '
              'a designed back-call in %s' % (problems, allow_path))
        return 1
    print('check_cycles: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
