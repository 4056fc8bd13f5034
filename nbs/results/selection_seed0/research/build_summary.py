"""`python build_summary.py OUT.csv RUNS_DIR`: seed-0 selection (research harness rh.py, passkey seed 0, 20 prompts) -> nbs/results/selection_seed0/summary.csv.
One row per (variant, format, ratio): prompts run, correct, mean needle kept. Duplicated (uid, variant, format, ratio) rows
from repeated runs are counted once."""
import json, glob, csv, collections, re, sys
DESC = [  # (regex on the research label, step of the search, description)
 (r"^full$", "reference", "full cache"),
 (r"^kv:(\w+)Press$", "kvpress", r"kvpress \1Press, replayed on the same captured layers"),
 (r"^keylev\('pre'\)$", "1 prior", "key leverage alone (centred pre-RoPE keys) = the whitened-prior limit"),
 (r"^keylev\('pre'\)@window=4$", "1 prior", "key leverage alone, last 4 context tokens always kept"),
 (r"^keylev\('post'\)$", "1 prior", "key leverage alone on post-RoPE keys"),
 (r"^wprior\(1.0\)$", "1 prior", "whitened prior E[alpha] (c=1) + centred-value leverage (no context queries)"),
 (r"^wprior\(1.0\)@window=4$", "1 prior", "whitened prior (c=1) + value leverage, last 4 tokens always kept"),
 (r"^wprior\(4.0\)$", "1 prior", "whitened prior (c=4) + value leverage"),
 (r"^prodlev\(\)$", "1 prior", "leverage in the key x value product space (random features)"),
 (r"^ctx\('max',1\)$", "2 context", "context queries only (64 spread, non-causal), max attention"),
 (r"^ctx\('mean',1\)$", "2 context", "context queries only (64 spread, non-causal), mean attention"),
 (r"^ctx\('mean',1,structure=True\)$", "2 context", "context queries only, mean attention + value leverage"),
 (r"^ctx\('mean',2\)$", "2 context", "context queries only, mean of attention squared"),
 (r"^zblend", "2 context", "Compactor-style z-score blend of key leverage and pooled context attention"),
 (r"^mix\(1.0,0.5\)$", "3 mixture", "prior + all context queries (non-causal, mean of alpha^2), pi=0.5, value leverage"),
 (r"^mix\(4.0,0.5\)$", "3 mixture", "as above with c=4"),
 (r"^mix\(1.0,0.5,structure=False\)$", "3 mixture", "non-causal mean mixture, no value leverage"),
 (r"^mix\((\S+?),(\S+?),'max',1\)$", "3 mixture", r"prior (c=\1) + worst case over all context queries (non-causal), pi=\2"),
 (r"^mix\(1.0,0.5,'max',1\)@alloc=layer$", "3 mixture", "non-causal worst-case mixture, one budget shared by all layers"),
 (r"^mix\(1.0,0.5,'max',1\)@window=4$", "3 mixture", "non-causal worst-case mixture, last 4 tokens always kept"),
 (r"^mix\(1.0,0.5,'max',1,structure=False\)$", "3 mixture", "non-causal worst-case mixture, no value leverage"),
 (r"^mix\((\S+?),(\S+?),'max',1,causal=True\)$", "4 causal", r"prior (c=\1) + exact causal worst case, mean over query heads, unnormalised, pi=\2"),
 (r"^mix\(1.0,0.5,'max',1,causal=True,structure=False\)$", "4 causal", "causal worst-case mixture without value leverage"),
 (r"^mixb\(1.0,0.5,(\d+),(\d+)\)(@window=4)?$", "5 cheaper", r"non-causal band: blocks of \1 queries see keys within \2 (+ sinks)\3"),
 (r"^mixc\(1.0,(\S+?),(\d+),'(\w+)'(.*)\)$", "5 cheaper", r"context queries see only their own chunk of \2 (\3, pi=\1\4)"),
 (r"^mixu\(1.0,0.5,(\d+)\)$", "5 cheaper", r"chunks of \1, context term unnormalised"),
 (r"^mixs\(1.0,(\S+?),(\d+)\)(@window=4)?$", "5 cheaper", r"chunks of \2 + 4 sink keys, pi=\1\3"),
 (r"^mixcb\(1.0,0.5,64,(\d+)\)$", "5 cheaper", r"causal band: blocks of 64 queries see sinks + the \1 keys before them (option block=64,halo=\1)"),
 (r"^mixo\(1.0,0.5\)$", "6 refinements", "output-aware values (leverage of W_O v)"),
 (r"^mixp\(1.0,0.5,(\d),'(\w+)'\)$", "6 refinements", r"causal term max-pooled along the sequence (\2, width \1)"),
 (r"^mixf\(1.0,0.5\)$", "6 refinements", "context queries relocated after the context (position N)"),
 (r"^mixf\(1.0,0.5,True\)$", "6 refinements", "relocated queries, union with the causal term"),
 (r"^mixn\(1.0,0.5,'(\w+)'\)$", "6 refinements", r"normalised, max over heads; context term \1"),
 (r"^mixg\(1.0,0.5,'max',True\)$", "default", "DEFAULT: pi=0.5, c=1, exact causal worst case, max over query heads, both terms normalised"),
 (r"^mixg\(1.0,(\S+?),'max',True\)$", "7 final", r"the default with pi=\1"),
 (r"^mixg\(1.0,0.5,'(\w+)'\)$", "7 final", r"worst case over heads by \1, unnormalised mixture"),
 (r"^mixg\(1.0,0.5,'mean',True\)$", "7 final", "normalised mixture, mean over query heads"),
]
def describe(label):
    for pat, step, d in DESC:
        m = re.match(pat, label)
        if m: return step, m.expand(d)
    raise KeyError(label)
rows = [json.loads(l) for f in sorted(glob.glob(sys.argv[2] + "/r*_pk_s0_*.jsonl")) for l in open(f)]
seen, acc = set(), collections.defaultdict(list)
for r in rows:
    k = (r["uid"], r["method"], r["fmt"], r["ratio"])
    if k in seen: continue
    seen.add(k); acc[(r["method"], "kvpress" if r["fmt"] == "glued" else "blank", r["ratio"])].append(r)
out = []
for (m, f, q), rs in sorted(acc.items(), key=lambda kv: (describe(kv[0][0])[0], kv[0])):
    step, d = describe(m); d = d.replace("@window=4", ", last 4 tokens always kept")
    out.append(dict(variant=m, step=step, description=d, format=f, ratio=q, n=len(rs), correct=sum(r["correct"] for r in rs),
                    needle_kept=round(sum(r["needle_kept"] for r in rs) / len(rs), 3)))
dst = sys.argv[1]
with open(dst, "w", newline="") as fh:
    w = csv.DictWriter(fh, list(out[0])); w.writeheader(); w.writerows(out)
print(len(out), "rows ->", dst)
