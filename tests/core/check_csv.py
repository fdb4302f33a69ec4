"""Oracle for issue 9 acceptance 4 and issue 29: every CSV a tool writes loads with Python's csv module and with
numpy.genfromtxt(f, names=True, dtype=None, delimiter=',', comments=None, encoding='utf-8') -- the exact call
docs/conventions.md documents: one named field per header column (a name that numpy has to replace by
'f0', 'f1', ... is a failure), one record per row, numeric fields equal to the cells.

Usage: check_csv.py FILE.csv...   Each file must be ONE table: a header row, every row as wide as the
header, and every cell either a number that float() reads in full or a text label (a cell that
starts like a number must BE a number: no "66,048", "0.5372x", "swa *"); a column is either all
numbers (empty cells allowed: parts of a multi-part report) or all text. The numeric columns must
convert to a numpy float64 array (and equal numpy.genfromtxt's reading when no cell is quoted)."""
import csv
import re
import sys

import numpy as np

NUMBER_START = re.compile(r"^[-+]?(\d|\.\d)")


def is_number(cell):
    try:
        float(cell)
        return True
    except ValueError:
        return False


def check(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows, f"{path}: empty"
    header = rows[0]
    assert header and all(h.strip() for h in header), f"{path}: header row has empty names: {header}"
    assert not any(is_number(h) for h in header), f"{path}: first row is data, not a header: {header}"
    assert len(rows) > 1, f"{path}: no data rows"
    numeric_cols = []
    for c, name in enumerate(header):
        cells = [r[c] for r in rows[1:] if c < len(r)]
        for cell in cells:
            if NUMBER_START.match(cell) and not is_number(cell):
                raise AssertionError(f"{path}: column '{name}': cell '{cell}' looks like a number but is not one")
            assert "," not in cell or not NUMBER_START.match(cell), f"{path}: thousands separator in '{cell}'"
        filled = [x for x in cells if x != ""]
        numbers = [x for x in filled if is_number(x)]
        if numbers and len(numbers) != len(filled):
            text = [x for x in filled if not is_number(x)]
            raise AssertionError(f"{path}: column '{name}' mixes numbers and text {text[:3]}: it does not load as numbers")
        if filled and all(is_number(x) for x in filled):
            numeric_cols.append(c)
    for i, r in enumerate(rows[1:], start=2):
        assert len(r) == len(header), f"{path}: line {i} has {len(r)} cells, header has {len(header)}"
    assert numeric_cols, f"{path}: no numeric column"
    # numpy: the numeric columns as one float array (csv parses the quoting, numpy the numbers;
    # genfromtxt alone cannot read quoted text cells that contain commas)
    data = np.array([[r[c] if r[c] != "" else "nan" for c in numeric_cols] for r in rows[1:]]).astype(np.float64)
    assert data.shape == (len(rows) - 1, len(numeric_cols)), f"{path}: numpy shape {data.shape}"
    if not any(('"' in line) for line in open(path)):  # no quoted cells: genfromtxt reads it directly too
        direct = np.genfromtxt(path, delimiter=",", skip_header=1, usecols=numeric_cols, dtype=float, ndmin=2,
                               comments=None)
        assert np.array_equal(np.nan_to_num(direct, nan=-1.5), np.nan_to_num(data, nan=-1.5)), f"{path}: genfromtxt differs"
    # the documented call, verbatim
    with open(path, encoding="utf-8") as f:
        arr = np.genfromtxt(f, names=True, dtype=None, delimiter=',', comments=None, encoding='utf-8')
    arr = np.atleast_1d(arr)
    names = arr.dtype.names
    assert names is not None and len(names) == len(header), \
        f"{path}: genfromtxt reads {0 if names is None else len(names)} named fields, the header has {len(header)}"
    for h, nm in zip(header, names):
        assert not re.fullmatch(r"f\d+", nm) or re.fullmatch(r"f\d+", h), \
            f"{path}: header name '{h}' has no letters numpy keeps (it becomes '{nm}')"
    assert len(set(names)) == len(names), f"{path}: duplicate field names {names}"
    assert arr.shape == (len(rows) - 1,), f"{path}: genfromtxt reads {arr.shape[0]} records, the file has {len(rows) - 1}"
    for c in numeric_cols:
        got = np.asarray(arr[names[c]], dtype=np.float64)
        want = data[:, numeric_cols.index(c)]
        assert np.array_equal(np.nan_to_num(got, nan=-1.5), np.nan_to_num(want, nan=-1.5)), \
            f"{path}: genfromtxt field '{names[c]}' differs from the cells of column '{header[c]}'"
    print(f"ok: {path}: {len(rows) - 1} rows, {len(header)} columns ({len(numeric_cols)} numeric)")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        check(p)
