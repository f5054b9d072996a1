#!/usr/bin/env python3
"""Executes notebooks top to bottom (nbclient, kernel python3 of this interpreter, cwd notebooks/)
and checks that the committed files carry no outputs. Exit 1 naming the notebook and cell on the
first failure; the notebooks on disk are never modified.

    .venv/bin/python scripts/test/run_notebooks.py notebooks/*.ipynb
"""
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def stale_outputs(nb):
    """Indices of code cells that carry outputs or an execution count."""
    return [i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]


def main(paths):
    if not paths:
        print("usage: run_notebooks.py NOTEBOOK.ipynb...", file=sys.stderr)
        return 2
    failed = []
    for p in map(Path, paths):
        try:
            nb = nbformat.read(p, as_version=4)
        except Exception as e:  # unreadable JSON, missing file
            print(f"{p}: cannot read notebook: {e}", file=sys.stderr)
            failed.append(str(p))
            continue
        stale = stale_outputs(nb)
        if stale:
            print(f"{p}: committed with outputs in cell(s) {', '.join(map(str, stale))}; clear them "
                  f"(jupyter nbconvert --clear-output --inplace {p})", file=sys.stderr)
            failed.append(str(p))
            continue
        t0 = time.time()
        client = NotebookClient(nb, kernel_name="python3", timeout=900,
                                resources={"metadata": {"path": str(p.resolve().parent)}})
        try:
            client.execute()
        except CellExecutionError as e:
            cell = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(
                o.get("output_type") == "error" for o in c.get("outputs", []))), "?")
            print(f"{p}: cell {cell} failed:\n{e}", file=sys.stderr)
            failed.append(str(p))
            continue
        figures = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                      if "image/png" in o.get("data", {}))
        print(f"{p}: ok ({len(nb.cells)} cells, {figures} figures, {time.time() - t0:.1f} s)")
    if failed:
        print(f"notebooks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
