"""MEM014 load-without-map-location."""

from __future__ import annotations

import libcst as cst

from memlint.diagnostics import FixSafety
from memlint.edits import append_arg, has_keyword, has_star_args, keyword_arg, positional_count
from memlint.rules.base import Fix, Invalid, Rule, Valid


class LoadWithoutMapLocation(Rule):
    """
    ## What it does
    Flags `torch.load(...)` calls that do not say where the loaded tensors should go
    (`map_location`, as a keyword or the second positional argument).

    ## Why is this bad?
    Without `map_location`, every tensor goes back to the device it was saved from. A
    checkpoint written on `cuda:0` lands on `cuda:0` in every process of a multi-GPU job,
    so rank 0's GPU holds one copy per process, and loading fails outright on a machine
    with fewer (or no) GPUs. Loading first to the CPU and letting `load_state_dict` copy
    into the already-placed model avoids both.

    ## Example
    ```python
    state = torch.load("last.pt")
    model.load_state_dict(state["model"])
    ```

    Use instead:
    ```python
    state = torch.load("last.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    ```

    ## How to fix
    Pass `map_location="cpu"` (or the process's own device) to `torch.load`.

    ## Fix safety
    The fix adds `map_location="cpu"` and is unsafe: code that uses the loaded tensors
    directly, expecting them on the GPU they were saved from, gets CPU tensors instead.

    This rule is off by default; enable it with `select`.
    """

    code = "MEM014"
    name = "load-without-map-location"
    message = (
        "`torch.load` without `map_location` restores tensors onto the device they were saved from"
    )
    default_enabled = False
    # `torch.load(...)` and `from torch import load` spell one of these; an aliased module
    # (`import torch as th; th.load(...)`) is left out to keep `json.load`-heavy files cheap.
    triggers = ("torch.load", "import load")
    # And a `load(...)` call with neither `map_location` nor `**` among its top-level
    # arguments (parentheses nested up to four deep), so files that always pass a location
    # are not parsed for this rule.
    trigger_pattern = (
        rb"load\((?:(?!map_location|\*\*)(?:[^()]|"
        rb"\((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*\)))*\)"
    )
    fix_safety = FixSafety.UNSAFE
    valid = (
        Valid(
            """
            import torch
            state = torch.load(path, map_location="cpu", weights_only=True)
            other = torch.load(path, device)
            """
        ),
        Valid(
            """
            import torch, json
            cfg = json.load(handle)
            state = torch.load(path, **load_kwargs)
            """
        ),
    )
    invalid = (
        Invalid(
            """
            import torch
            state = torch.load(path)
            """,
            lines=(3,),
            fixed="""
            import torch
            state = torch.load(path, map_location="cpu")
            """,
        ),
        Invalid(
            """
            from torch import load
            state = load(
                os.path.join(run_dir, "last.pt"),
                weights_only=True,
            )
            """,
            lines=(3,),
            fixed="""
            from torch import load
            state = load(
                os.path.join(run_dir, "last.pt"),
                weights_only=True,
                map_location="cpu",
            )
            """,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.analysis.imports.qualified_name(node.func) != "torch.load":
            return
        if has_star_args(node) or has_keyword(node, "map_location") or positional_count(node) >= 2:
            return
        fixed = append_arg(node, keyword_arg("map_location", cst.SimpleString('"cpu"')))
        self.report(node, fix=Fix(FixSafety.UNSAFE, {node: fixed}))
