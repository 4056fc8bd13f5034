"Tables of the score-factor runs: correct answers and the needle's tokens kept, per layer for Gemma-3's full-attention layers."
import sys
from pathlib import Path
from jacap_nb.report import load_runs, summarize, side_by_side, paired_comparison, markdown_table

NAMES = {"jacap": "default", "jacap:prior_weight=1,score=attention": "prior, no values",
         "jacap:prior_weight=1": "prior + values", "jacap:score=attention": "mixture, no values",
         "jacap:prior_weight=0": "band + values", "jacap:prior_weight=0.75": "prior share 0.75",
         "jacap:prior_weight=0.9": "prior share 0.9", "jacap:score=union": "rank union",
         "jacap:score=cooccurrence": "co-occurrence",
         "jacap:score=cooccurrence,lookup_breadth=1": "co-occurrence c=1", "jacap:score=cooccurrence,lookup_breadth=4": "co-occurrence c=4",
         "full": "full"}
here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
for d in sorted(p for p in here.iterdir() if p.is_dir()):
    also = [here.parent / "defaults_seed0" / "smollm2_passkey"] if d.name == "smollm2_passkey" else []   # its default's rows
    rows = [dict(r, method=NAMES[r["method"]]) for r in load_runs(*also, d) if r["method"] in NAMES]
    summ = summarize(rows); order = [m for m in NAMES.values() if any(s["method"] == m for s in summ)]
    print(f"\n## {d.name}: correct\n\n" + side_by_side(summ, order))
    print(f"\n## {d.name}: needle kept (mean over layers)\n\n" + side_by_side(summ, [m for m in order if m != "full"], metric="needle_kept"))
    per_layer = [r for r in rows if r.get("needle_kept_per_layer")]
    if per_layer and len(per_layer[0]["needle_kept_per_layer"]) <= 4:
        tab = []
        for m in order[:-1] if order[-1] == "full" else order:
            for ratio in (0.75, 0.9):
                rs = [r for r in per_layer if r["method"] == m and r["ratio"] == ratio]
                if rs: tab.append(dict(method=m, ratio=ratio, correct=f'{sum(r["correct"] for r in rs)}/{len(rs)}',
                                       **{f"layer {i}": round(sum(r["needle_kept_per_layer"][i] for r in rs) / len(rs), 2)
                                          for i in range(len(rs[0]["needle_kept_per_layer"]))}))
        print(f"\n## {d.name}: needle kept per compressed layer (both formats)\n\n" + markdown_table(tab, cols=list(tab[0])))
    pc = [dict(c, vs=c["b"]) for b in order if b not in ("default", "full") for c in paired_comparison(rows, "default", b)]
    print(f"\n## {d.name}: the default against each variant, paired\n\n"
          + markdown_table(pc, cols=("vs", "format", "ratio", "n", "a_correct", "b_correct", "wins", "losses", "p")))
