"""jacap_nb.report as grids: summaries with Wilson intervals, the side-by-side table, the slim CSV round trip, kept-set
comparisons and what the figures draw. 13_report checks one summary, one round trip, one table and the colours."""
import json, math, random
import pytest, torch
from jacap_nb.report import (summarize, write_summary, markdown_table, side_by_side, load_rows, compact_results, kept_overlap,
                             layer_retention, plot_niah, plot_accuracy_vs_ratio, plot_pareto, ROW_FIELDS, META_FIELDS)
from jacap_nb.tasks import wilson_interval


def _rows(method="a", ratio=0.5, fmt="blank", k=3, n=4, **extra):
    return [dict(task="passkey", uid=f"{method}-{fmt}-{i}", method=method, ratio=ratio, format=fmt, correct=i < k, **extra)
            for i in range(n)]


# --- summaries -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (3, 4), (19, 20), (20, 20), (7, 50)])
def test_summary_accuracy_and_wilson_interval(k, n):
    s, = summarize(_rows(k=k, n=n))
    assert (s["n"], s["correct"], s["accuracy"]) == (n, k, k / n)
    assert (s["ci_low"], s["ci_high"]) == wilson_interval(k, n)
    assert 0 <= s["ci_low"] <= s["accuracy"] <= s["ci_high"] <= 1
    assert (s["ci_low"] == 0) == (k == 0) and (s["ci_high"] == 1) == (k == n)


def test_summary_groups_by_method_ratio_format():
    rows = _rows("a", 0.5, "blank", 1, 2) + _rows("a", 0.75, "blank", 2, 2) + _rows("a", 0.5, "kvpress", 0, 3) + _rows("b", 0.5, "blank", 3, 3)
    for r in _rows("full", 0.0, None, 2, 2): r.pop("format"); rows.append(r)          # older rows without a format
    random.Random(0).shuffle(rows)
    summ = summarize(rows)
    got = {(s["method"], s["ratio"], s["format"]): (s["n"], s["correct"]) for s in summ}
    assert got == {("a", 0.5, "blank"): (2, 1), ("a", 0.75, "blank"): (2, 2), ("a", 0.5, "kvpress"): (3, 0),
                   ("b", 0.5, "blank"): (3, 3), ("full", 0.0, "blank"): (2, 2)}
    assert summ == summarize(sorted(rows, key=lambda r: r["uid"]))                    # the order of rows does not matter


def test_summary_by_meta_keys():
    rows = [dict(r, meta=dict(length=L, depth=d)) for L in (512, 1024) for d in (0.0, 1.0) for r in _rows(k=int(d * 2) + 1, n=3)]
    summ = summarize(rows, by=("length", "depth"))
    assert [(s["length"], s["depth"], s["correct"]) for s in summ] == [(1024, 0.0, 1), (1024, 1.0, 3), (512, 0.0, 1), (512, 1.0, 3)]


def test_summary_means_skip_missing_values():
    rows = [dict(task="fidelity", uid=str(i), method="m", ratio=0.5, format="blank", kl=kl, top1=t, needle_kept=nk,
                 cache_bytes=cb, compress_seconds=0.2, prefill_seconds=4.0, kept_tokens=kt)
            for i, (kl, t, nk, cb, kt) in enumerate([(0.1, 1.0, None, 2**20, 10), (0.3, 0.5, float("nan"), 3 * 2**20, 20),
                                                     (None, None, 0.5, None, 30)])]
    s, = summarize(rows)
    assert s["kl"] == pytest.approx(0.2) and s["top1"] == pytest.approx(0.75) and s["needle_kept"] == 0.5
    assert s["cache_mib"] == pytest.approx(2.0) and s["kept_tokens"] == 20 and s["prefills"] == pytest.approx(0.05)
    assert "accuracy" not in s and "context_tokens" not in s
    s2, = summarize([{k: v for k, v in r.items() if k != "needle_kept"} for r in rows])
    assert "needle_kept" not in s2


def test_write_summary(tmp_path):
    rows = _rows("a", k=1) + _rows("b", k=4)
    summ = write_summary(tmp_path, rows)
    assert json.loads((tmp_path / "summary.json").read_text()) == summ == summarize(rows)
    lines = (tmp_path / "summary.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[0].split(",")[:3] == ["method", "ratio", "format"]


# --- tables ------------------------------------------------------------------------------------------------------------

def _table(md):
    "A markdown table as (header, rows of cells)."
    lines = md.strip().splitlines()
    cells = lambda l: [c.strip() for c in l.strip().strip("|").split("|")]
    assert set(lines[1].replace("|", "")) == {"-"}
    return cells(lines[0]), [cells(l) for l in lines[2:]]


SBS_ROWS = (_rows("full", 0.0, "blank", 4, 4) + _rows("full", 0.0, "kvpress", 3, 4) + _rows("jacap", 0.5, "blank", 3, 4)
            + _rows("jacap", 0.75, "blank", 1, 4) + _rows("jacap", 0.5, "kvpress", 2, 4) + _rows("knorm", 0.5, "blank", 0, 4, needle_kept=0.25))


@pytest.mark.parametrize("metric,cell", [("correct", lambda s: f"{s['correct']}/{s['n']}"), ("accuracy", lambda s: f"{s['accuracy']:.2f}"),
                                         ("needle_kept", lambda s: "" if s.get("needle_kept") is None else f"{s['needle_kept']:.2f}")])
@pytest.mark.parametrize("order", [None, ["knorm", "full", "jacap"]])
def test_side_by_side(metric, cell, order):
    summ = summarize(SBS_ROWS)
    head, body = _table(side_by_side(summ, order, metric))
    assert head == ["method", "blank 0.5", "blank 0.75", "kvpress 0.5"]
    names = [r[0] for r in body]
    assert names == [{"full": "full cache"}.get(m, m) for m in (order or ["full", "jacap", "knorm"])]
    by = {(s["method"], s["format"], s["ratio"]): s for s in summ}
    for r in body:
        m = "full" if r[0] == "full cache" else r[0]
        for col, val in zip(head[1:], r[1:]):
            fmt, ratio = col.split(); ratio = float(ratio)
            s = by.get((m, fmt, 0.0 if m == "full" else ratio))
            assert val == ("–" if s is None else cell(s)), (m, col)


def test_markdown_table_shows_the_columns_present():
    summ = summarize(SBS_ROWS)
    head, body = _table(markdown_table(summ))
    assert head == ["method", "format", "ratio", "n", "correct", "accuracy", "ci_low", "ci_high", "needle_kept"]
    assert len(body) == len(summ) and [r[0] for r in body] == [s["method"] for s in summ]
    assert body[0][head.index("accuracy")] == f"{summ[0]['accuracy']:.2f}"


# --- the slim CSV ----------------------------------------------------------------------------------------------------

ROUND_TRIP = [
    pytest.param(dict(prediction=" 71432. Remember it.", answer="71432"), id="plain"),
    pytest.param(dict(prediction="007", answer="00042", uid="0012"), id="leading zeros and digits-only text"),
    pytest.param(dict(prediction='He said "no, never", then left', answer="12345"), id="quotes and commas"),
    pytest.param(dict(prediction="12345.\nThe pass key", answer="12345"), id="newline"),
    pytest.param(dict(prediction="True", answer="False"), id="looks like a bool"),
    pytest.param(dict(prediction="", answer="12345"), id="empty prediction"),
    pytest.param(dict(prediction="12345.\r\nNext", answer="12345"), id="carriage return"),
]


@pytest.mark.parametrize("fields", ROUND_TRIP)
def test_compact_results_round_trip(fields, tmp_path):
    rows = [dict(task="passkey", uid=fields.get("uid", f"u{i}"), method=m, ratio=r, format=f, correct=bool(i % 2),
                 prediction=fields["prediction"], answer=fields["answer"], needle_kept=None if i == 0 else 0.123456789,
                 kept_tokens=256.0, context_tokens=1031, cache_bytes=3 * 2**20, compress_seconds=0.0123456, prefill_seconds=1.5,
                 needle_kept_per_layer=[0.5, 1.0], meta=dict(length=1024, depth=0.25 * i, filler="pydoc", context_id=f"c{i // 2}"))
            for i, (m, r, f) in enumerate([("full", 0.0, "blank"), ("jacap:halo=32", 0.75, "kvpress"), ("kvpress:TOVA", 0.5, "blank")])]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "run" / "config.json").write_text('{"protocol": "x"}')
    write_summary(tmp_path / "run", rows)
    assert compact_results(tmp_path / "run", tmp_path / "slim") > 0
    assert (tmp_path / "slim" / "config.json").read_text() == '{"protocol": "x"}'
    back = load_rows(tmp_path / "slim")
    assert len(back) == len(rows)
    for a, b in zip(rows, back):
        for k in ROW_FIELDS:
            if k not in a: continue
            want = float(f"{a[k]:.4g}") if isinstance(a[k], float) else a[k]
            assert b[k] == want and type(b[k]) is type(want), (k, a[k], b[k])
        assert {k: b["meta"][k] for k in a["meta"]} == a["meta"]
    rounded = [{k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in r.items()} for r in rows]
    assert summarize(back) == summarize(rounded)                       # the slim copy summarises like the full rows


def test_load_rows_prefers_jsonl(tmp_path):
    assert load_rows(tmp_path) == [] and load_rows(tmp_path / "rows.jsonl") == []
    rows = _rows(k=1, n=2)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    compact_results(tmp_path, tmp_path / "slim")
    (tmp_path / "rows.csv").write_text((tmp_path / "slim" / "rows.csv").read_text())
    assert load_rows(tmp_path) == rows == load_rows(tmp_path / "rows.jsonl")
    assert [r["uid"] for r in load_rows(tmp_path / "rows.csv")] == [r["uid"] for r in rows]


# --- kept sets -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("hkv,k,n", [(2, 5, 20), (3, 16, 16), (1, 1, 9)])
def test_kept_overlap(seed, hkv, k, n):
    g = torch.Generator().manual_seed(seed)
    pick = lambda: {l: torch.stack([torch.randperm(n, generator=g)[:k].sort().values for _ in range(hkv)])[None] for l in range(3)}
    a, b = pick(), pick()
    ov = kept_overlap(a, b)
    assert ov.shape == (3, hkv)
    for l in range(3):
        for h in range(hkv):
            assert ov[l, h].item() == pytest.approx(len(set(a[l][0, h].tolist()) & set(b[l][0, h].tolist())) / k)
    assert (kept_overlap(a, a) == 1).all()


def test_layer_retention_averages_per_layer():
    rows = [dict(method="m", ratio=0.5, format="blank", needle_kept_per_layer=[0.0, 1.0]),
            dict(method="m", ratio=0.5, format="blank", needle_kept_per_layer=[0.5, 0.5]),
            dict(method="m", ratio=0.5, format="kvpress", needle_kept_per_layer=[1.0]),
            dict(method="full", ratio=0.0, format="blank", needle_kept_per_layer=None)]
    assert layer_retention(rows) == [dict(method="m", ratio=0.5, format="blank", layer=0, needle_kept=0.25, n=2),
                                     dict(method="m", ratio=0.5, format="blank", layer=1, needle_kept=0.75, n=2),
                                     dict(method="m", ratio=0.5, format="kvpress", layer=0, needle_kept=1.0, n=1)]


# --- what the figures draw ------------------------------------------------------------------------------------------------

def _niah_rows():
    rows = []
    for m, acc in (("full", lambda L, d: 1.0), ("jacap", lambda L, d: d), ("knorm", lambda L, d: 0.5 if L == 512 else 0.0)):
        for L in (512, 1024):
            for d in (0.0, 0.5, 1.0):
                for i in range(4):
                    rows.append(dict(task="passkey", uid=f"{L}-{d}-{i}", method=m, ratio=0.0 if m == "full" else 0.75,
                                     format="blank", correct=i < round(4 * acc(L, d)), meta=dict(length=L, depth=d)))
    return rows


def test_plot_niah_cells_are_the_accuracies():
    import matplotlib.pyplot as plt
    fig = plot_niah(_niah_rows(), 0.75)
    axes = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in axes] == ["full", "jacap", "knorm"]
    want = {"full": [[1, 1], [1, 1], [1, 1]], "jacap": [[0, 0], [0.5, 0.5], [1, 1]], "knorm": [[0.5, 0], [0.5, 0], [0.5, 0]]}
    for ax in axes: assert ax.images[0].get_array().tolist() == want[ax.get_title()], ax.get_title()
    plt.close(fig)


def test_plot_accuracy_vs_ratio_and_pareto():
    import matplotlib.pyplot as plt
    rows = [dict(r, cache_bytes=2**20 * (1 if r["method"] == "full" else 0.25)) for r in _niah_rows()]
    rows += [dict(r, ratio=0.5, uid=r["uid"] + "b") for r in rows if r["method"] != "full"]
    summ = summarize(rows)
    fig = plot_accuracy_vs_ratio(summ)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["full cache (n=24)", "jacap", "knorm"]
    for m in ("jacap", "knorm"):
        line = next(c for c in ax.containers if c.get_label() == m).lines[0]
        assert line.get_xdata().tolist() == [0.5, 0.75]
        assert line.get_ydata().tolist() == [s["accuracy"] for s in summ if s["method"] == m]
    plt.close(fig)
    fig = plot_pareto(summ)
    lines = {l.get_label(): l for l in fig.axes[0].get_lines()}
    assert set(lines) == {"full", "jacap", "knorm"} and lines["full"].get_xdata().tolist() == [1.0]
    plt.close(fig)
