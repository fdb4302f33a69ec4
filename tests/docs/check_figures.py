"""Checks the figure gallery that scripts/figures.sh renders (issue 29).

Usage: check_figures.py OUT_DIR [GALLERY_MD]
Every row of OUT_DIR/manifest.tsv (file, expected title text, description, command) names a file that
must be non-empty and a well-formed SVG (xml.etree parses it, the root is <svg>) or a PNG (signature),
whose text holds the expected title words; and every plot kind of every tool is in the manifest (the
list below is the inventory of `--plot` in apps/ and lib/, kept by hand). With GALLERY_MD, every
manifest file must also appear in that page. Standard library only (no numpy needed)."""
import os
import sys
import xml.etree.ElementTree as ET

# tool -> plot kinds the gallery must show (file names in the manifest)
REQUIRED = {
    "train": ["train_loss.svg"],
    "capture": ["capture_alpha.svg"],
    "spectral": ["spectral_cascade.svg", "spectral_series.svg"],
    "spectral-surgery": ["surgery_sweep.svg"],
    "coverage": ["coverage_direct.svg", "coverage_compare.svg", "coverage_closure.svg"],
    "rollout": ["rollout_bloom.svg", "rollout_bloom_log.svg", "rollout_capture.svg", "rollout_agreement.svg",
                "rollout_sweep.svg", "rollout_dichotomy.svg", "rollout_jacobian.svg"],
    "influence": ["influence_profile.svg", "influence_series.svg"],
    "jacobian": ["jacobian_measured.svg", "jacobian_measured_bound.svg"],
    "probe": ["probe_boundary_copy.svg", "probe_passkey.svg", "probe_passkey_heatmap1.svg",
              "probe_passkey_heatmap2.svg", "probe_ranking.svg"],
}


def svg_text(path):
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg"), f"{path}: root element is <{root.tag}>, not <svg>"
    return " ".join(t for t in root.itertext())


def main():
    out = sys.argv[1]
    rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "manifest.tsv"), encoding="utf-8")]
    assert rows, "empty manifest"
    files = {r[0] for r in rows}
    for tool, kinds in REQUIRED.items():
        for k in kinds:
            assert k in files, f"the gallery lacks {k} ({tool})"
    for f, title, what, cmd in rows:
        p = os.path.join(out, f)
        assert os.path.getsize(p) > 0, f"{p}: empty"
        assert what.strip() and cmd.strip(), f"{f}: no description or command"
        if f.endswith(".png"):
            with open(p, "rb") as fh:
                assert fh.read(8) == b"\x89PNG\r\n\x1a\n", f"{p}: not a PNG"
            continue
        text = svg_text(p)
        assert title in text, f"{p}: the title text '{title}' is not in the figure"
        print(f"ok: {f}: {os.path.getsize(p)} bytes, holds '{title}'")
    if len(sys.argv) > 2:
        page = open(sys.argv[2], encoding="utf-8").read()
        for f in files:
            assert f in page, f"{sys.argv[2]} does not show {f}"
    print(f"ok: {len(rows)} figures")


if __name__ == "__main__":
    main()
