"""Oracle for issue 9 acceptance 4: every CSV a tool writes loads with Python's csv module and numpy.

Usage: check_csv.py FILE.csv...   Each file must be ONE table: a header row, every row as wide as the
header, and every cell either a number that float() reads in full or a text label (a cell that
starts like a number must BE a number: no "66,048", "0.5372x", "swa *"). Numeric columns (every
non-empty cell a number) must load with numpy.genfromtxt as floats."""
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
        if filled and all(is_number(x) for x in filled):
            numeric_cols.append(c)
    for i, r in enumerate(rows[1:], start=2):
        assert len(r) == len(header), f"{path}: line {i} has {len(r)} cells, header has {len(header)}"
    assert numeric_cols, f"{path}: no numeric column"
    data = np.genfromtxt(path, delimiter=",", skip_header=1, usecols=numeric_cols, dtype=float, ndmin=2)
    assert data.shape[0] == len(rows) - 1, f"{path}: numpy read {data.shape[0]} rows, csv {len(rows) - 1}"
    print(f"ok: {path}: {len(rows) - 1} rows, {len(header)} columns ({len(numeric_cols)} numeric)")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        check(p)
