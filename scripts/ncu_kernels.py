"""Summarize an ncu --csv --page raw log of samebits' gpu_llm example (gpu__time_duration.sum per kernel): split the kernel
sequence into forward calls (each starts with the embedding gather) and print, for the calls
chosen (default all; `--last N` the last N), the total GPU time and the kernels by total time
(count, mean us, grids)."""
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
last = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == '--last' else None
h = next(i for i, r in enumerate(rows) if 'Kernel Name' in r)
head = rows[h]
kn, gs = head.index('Kernel Name'), head.index('Grid Size')
mt = next(i for i, c in enumerate(head) if c.startswith('gpu__time_duration'))
ks = []
for r in rows[h + 1:]:
    if len(r) <= mt:
        continue
    try:
        t = float(r[mt].replace(',', ''))
    except ValueError:
        continue
    ks.append((r[kn].split('(')[0], t, r[gs]))
calls, cur = [], []
for k in ks:
    if k[0].startswith('sb_gguf_gather') and cur:
        calls.append(cur)
        cur = []
    cur.append(k)
calls.append(cur)
first = 0 if last is None else max(0, len(calls) - last)
for n, c in list(enumerate(calls))[first:]:
    tot = sum(k[1] for k in c)
    print(f'## call {n}: {len(c)} kernels, {tot / 1e3:.1f} us of GPU time')
    agg = collections.OrderedDict()
    for name, t, g in c:
        a = agg.setdefault((name, g), [0, 0.0])
        a[0] += 1
        a[1] += t
    for (name, g), (cnt, t) in sorted(agg.items(), key=lambda x: -x[1][1])[:14]:
        print(f'  {name:34s} {g:14s} n={cnt:4d} total={t / 1e3:8.1f} us mean={t / cnt / 1e3:6.2f} us')
