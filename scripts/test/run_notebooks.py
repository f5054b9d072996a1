#!/usr/bin/env python3
"""Executes notebooks top to bottom (nbclient, kernel python3 of this interpreter, cwd notebooks/)
and checks that the committed files carry no outputs. Exit 1 naming the notebook and cell on the
failure; the notebooks on disk are never modified. --jobs N runs N notebooks at a time, each in
a process of its own with its own kernel (the notebooks share no files: each writes only to its
own tempfile folders); the report lists them in the order given.

    .venv/bin/python scripts/test/run_notebooks.py [--jobs N] notebooks/*.ipynb
"""

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def stale_outputs(nb):
    """Indices of code cells that carry outputs or an execution count."""
    return [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)
    ]


def run_one(path):
    """Executes one notebook; returns (ok, message)."""
    p = Path(path)
    try:
        nb = nbformat.read(p, as_version=4)
    except Exception as e:  # unreadable JSON, missing file
        return False, f"{p}: cannot read notebook: {e}"
    stale = stale_outputs(nb)
    if stale:
        return False, (
            f"{p}: committed with outputs in cell(s) {', '.join(map(str, stale))}; clear them "
            f"(jupyter nbconvert --clear-output --inplace {p})"
        )
    t0 = time.time()
    client = NotebookClient(
        nb, kernel_name="python3", timeout=900, resources={"metadata": {"path": str(p.resolve().parent)}}
    )
    try:
        client.execute()
    except CellExecutionError as e:
        cell = next(
            (
                i
                for i, c in enumerate(nb.cells)
                if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.get("outputs", []))
            ),
            "?",
        )
        return False, f"{p}: cell {cell} failed:\n{e}"
    figures = sum(
        1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    )
    return True, f"{p}: ok ({len(nb.cells)} cells, {figures} figures, {time.time() - t0:.1f} s)"


def main(argv):
    jobs = 1
    if argv[:1] == ["--jobs"] and len(argv) >= 2:
        try:
            jobs = max(1, int(argv[1]))
        except ValueError:
            print(f"run_notebooks.py: --jobs takes a whole number, not '{argv[1]}'", file=sys.stderr)
            return 2
        argv = argv[2:]
    paths = argv
    if not paths:
        print("usage: run_notebooks.py [--jobs N] NOTEBOOK.ipynb...", file=sys.stderr)
        return 2
    failed = []

    def report(results):  # in the order given, each as soon as it and those before it are done
        for p, (ok, message) in zip(paths, results):
            print(message, file=sys.stdout if ok else sys.stderr, flush=True)
            if not ok:
                failed.append(str(p))

    if jobs == 1:
        report(map(run_one, paths))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            report(pool.map(run_one, paths))
    if failed:
        print(f"notebooks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
