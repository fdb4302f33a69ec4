"""The ten-line Python example of README.md ("## Python") runs unchanged and prints what it says."""
import os
import re
import subprocess
import sys

ROOT = os.environ.get("CF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def readme_example():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text[text.index("## Python"):]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "README.md has no ```python block under '## Python'"
    return m.group(1)


def test_readme_example_is_ten_lines_and_runs(tmp_path):
    code = readme_example()
    assert len(code.strip().splitlines()) == 10
    script = tmp_path / "example.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    import causalflow
    assert out[0] == f"causalflow {causalflow.__version__}"
    assert out[1].startswith("(257, 128)")
    assert "'attention_only'" in out[2] and "'residual_content'" in out[2]
    assert out[3].startswith("argmin 61 ")  # the published BLOOM minimum (Position bias, Fig. bloom)
    assert "Last row" in out[4]


def test_version_from_the_documented_environment():
    r = subprocess.run(["/usr/bin/python3", "-c", "import causalflow; print(causalflow.__version__)"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\n", r.stdout), r.stderr


def test_help_documents_arguments_shapes_and_paper():
    from causalflow import rollout
    import pydoc
    text = pydoc.render_doc(rollout.rollout, renderer=pydoc.plaintext)
    for needle in ("model", "alpha", "shape (n,)", "Position bias (Herasimchyk et al.)", "Eqs. 1-3"):
        assert needle in text, needle
    stub = open(os.path.join(ROOT, "python", "causalflow", "rollout.pyi"), encoding="utf-8").read()
    assert "def rollout(" in stub and "Position bias (Herasimchyk et al.)" in stub and "(n,)" in stub


def test_every_binding_has_a_stub():
    import ast
    import causalflow
    for sub in ("graph", "rollout", "spectral", "model", "influence", "probe", "train"):
        stub = ast.parse(open(os.path.join(ROOT, "python", "causalflow", f"{sub}.pyi"), encoding="utf-8").read())
        declared = {n.name for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        public = set(getattr(causalflow, sub).__all__)
        assert public <= declared, (sub, sorted(public - declared))


def _binding_params(f):
    """Parameter names from the signature line pybind11 writes first in a docstring."""
    first = f.__doc__.splitlines()[0]
    inner = first[first.index("(") + 1:first.rindex(") ->")]
    names, depth, cur, quote = [], 0, "", None
    for ch in inner + ",":
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0 and not quote:
            if cur.strip():
                names.append(cur.split(":")[0].split("=")[0].strip())
            cur = ""
        else:
            cur += ch
    return names


def test_stub_signatures_match_the_bindings():
    import ast
    import causalflow
    for sub in ("graph", "rollout", "spectral", "model", "influence", "probe", "train"):
        stub = ast.parse(open(os.path.join(ROOT, "python", "causalflow", f"{sub}.pyi"), encoding="utf-8").read())
        mod = getattr(causalflow, sub)
        for node in stub.body:
            if isinstance(node, ast.FunctionDef) and node.name in mod.__all__:
                declared = [a.arg for a in node.args.args + node.args.kwonlyargs]
                assert node.args.kwarg is None, f"{sub}.{node.name}: the stub hides arguments behind **"
                assert declared == _binding_params(getattr(mod, node.name)), f"{sub}.{node.name}"
