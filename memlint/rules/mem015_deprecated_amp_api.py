"""MEM015 deprecated-amp-api."""

from __future__ import annotations

import re

import libcst as cst

from memlint.diagnostics import FixSafety
from memlint.edits import has_star_args, prepend_arg
from memlint.rules.base import Fix, Invalid, Rule, Valid

# Deprecated name -> (device string, new attribute under ``torch.amp``).
DEPRECATED = {
    "torch.cuda.amp.autocast": ("cuda", "autocast"),
    "torch.cuda.amp.GradScaler": ("cuda", "GradScaler"),
    "torch.cpu.amp.autocast": ("cpu", "autocast"),
    "torch.cpu.amp.GradScaler": ("cpu", "GradScaler"),
    # The same classes under the submodules that define them
    # (`from torch.cuda.amp.grad_scaler import GradScaler`).
    "torch.cuda.amp.autocast_mode.autocast": ("cuda", "autocast"),
    "torch.cuda.amp.grad_scaler.GradScaler": ("cuda", "GradScaler"),
    "torch.cpu.amp.autocast_mode.autocast": ("cpu", "autocast"),
    "torch.cpu.amp.grad_scaler.GradScaler": ("cpu", "GradScaler"),
}
# The old autocast took (enabled, dtype, cache_enabled) positionally; the new one takes
# (device_type, dtype, enabled, cache_enabled), so positional arguments become keywords.
OLD_AUTOCAST_POSITIONS = ("enabled", "dtype", "cache_enabled")
# `if is_torch_version(">=", "2.3"):` / `if _TORCH_GREATER_EQUAL_2_4:`: a branch that only
# old PyTorch releases take. `hasattr(torch.amp, "GradScaler")` is one too, but only about a
# torch module: `hasattr(self, "use_amp")` is a feature switch (see `_probes_torch`).
_VERSION_TEST = re.compile(r"version|at_?least|torch_\d|greater", re.IGNORECASE)
_NEW_API = frozenset({"torch.amp.autocast", "torch.amp.GradScaler"})


def module_torch_alias(module: cst.Module) -> str | None:
    """The name a top-level ``import torch`` / ``import torch as t`` binds, if any.

    Only module-level imports count: a name bound inside some function is not in scope
    at every call site.
    """
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not isinstance(small, cst.Import):
                continue
            for alias in small.names:
                if not (isinstance(alias.name, cst.Name) and alias.name.value == "torch"):
                    continue
                if alias.asname is None:
                    return "torch"
                if isinstance(alias.asname.name, cst.Name):
                    return alias.asname.name.value
    return None


def _torch_head(func: cst.BaseExpression) -> cst.Name | None:
    """The ``torch`` name at the head of ``torch.cuda.amp.X`` as written, else None."""
    node = func
    depth = 0
    while isinstance(node, cst.Attribute):
        node = node.value
        depth += 1
    return node if isinstance(node, cst.Name) and depth == 3 else None


def _ends_in_exit(block: cst.BaseSuite) -> bool:
    body = block.body
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, (cst.Return, cst.Raise))


class DeprecatedAmpApi(Rule):
    """
    ## What it does
    Flags calls to `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler` and their
    `torch.cpu.amp` twins, however they were imported, also when the old callable is first
    bound to a name that the file then calls (`autocast = torch.cuda.amp.autocast if fp16
    else nullcontext`, then `with autocast():`; reported at the binding, without a fix) or
    returned for the caller to call (`def get_autocast(precision): return
    torch.cuda.amp.autocast`; reported at the return, without a fix). The classes count
    under the submodules that define them too
    (`from torch.cuda.amp.grad_scaler import GradScaler`).

    ## Why is this bad?
    These device-specific entry points are deprecated: every call emits a `FutureWarning`
    and they will be removed. The device-generic `torch.amp` API takes the device as its
    first argument and behaves the same.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        loss = model(x)
    ```

    Use instead:
    ```python
    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    ```

    ## How to fix
    Call `torch.amp.autocast("cuda", ...)` and `torch.amp.GradScaler("cuda", ...)`.
    Fallbacks kept for old PyTorch releases are not reported: an import or a call in an
    `except` block, and a call in a branch of a version check (`version`, `at_least` in the
    condition, or `hasattr` on a torch module: `hasattr(torch.amp, "GradScaler")`, not
    `hasattr(self, "use_amp")`) or after one that returns early, and the arm of an inline
    conditional whose other arm uses the new API
    (`torch.amp.GradScaler("cuda") if new_torch else torch.cuda.amp.GradScaler()`).

    ## Fix safety
    The fix is safe: it is the migration PyTorch's own deprecation warning prescribes, and
    the old classes are thin wrappers that forward to the new ones. Positional autocast
    arguments are turned into keywords because the new signature orders them differently.
    For names imported with `from torch.cuda.amp import ...`, the fix needs a module-level
    `import torch` to refer to `torch.amp`; without one no fix is offered. A call that
    passes `*args` is left alone.
    """

    code = "MEM015"
    name = "deprecated-amp-api"
    message = "`{old}` is deprecated; use `torch.amp.{new}(\"{device}\", ...)`"
    triggers = ("cuda.amp", "cpu.amp", "import amp", "amp.autocast", "amp.GradScaler")
    fix_safety = FixSafety.SAFE
    valid = (
        # Bound as the old-release fallback of the new API, or never called (a type alias).
        Valid(
            """
            import torch
            autocast = torch.cuda.amp.autocast if old_torch else torch.amp.autocast
            with autocast("cuda"):
                pass
            ScalerType = torch.cuda.amp.GradScaler
            def step(scaler: ScalerType) -> None:
                scaler.update()
            """
        ),
        Valid(
            """
            import torch
            scaler = torch.amp.GradScaler("cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                pass
            """
        ),
        Valid(
            """
            from contextlib import nullcontext as autocast
            with autocast():
                pass
            """
        ),
        Valid(
            """
            import apex.amp as amp
            model, opt = amp.initialize(model, opt)
            """
        ),
        Valid(
            """
            import torch
            try:
                from torch.amp import GradScaler
            except ImportError:
                from torch.cuda.amp import GradScaler
            scaler = GradScaler("cuda")

            def make_scaler():
                if is_torch_version(">=", "2.3"):
                    return torch.amp.GradScaler("cuda")
                return torch.cuda.amp.GradScaler()
            """
        ),
        Valid(
            """
            import torch
            scaler = (
                torch.amp.GradScaler("cuda") if _TORCH_GREATER_EQUAL_2_4
                else torch.cuda.amp.GradScaler()
            )
            ctx = torch.cuda.amp.autocast() if old_release else torch.amp.autocast("cuda")
            """
        ),
        Valid(
            # A probe of the installed PyTorch: the old API only where the new one is missing.
            """
            import torch
            def make_scaler():
                if not hasattr(torch.amp, "GradScaler"):
                    return torch.cuda.amp.GradScaler()
                return torch.amp.GradScaler("cuda")

            def autocast_class():
                if not hasattr(torch.amp, "autocast"):
                    return torch.cuda.amp.autocast
                return torch.amp.autocast
            """
        ),
    )
    invalid = (
        Invalid(
            # `hasattr` on the trainer is a feature switch, not a probe of the PyTorch release:
            # new PyTorch runs this branch whenever mixed precision is on.
            """
            import torch
            def training_step(self, model, inputs):
                if hasattr(self, "use_amp") and self.use_amp:
                    with torch.cuda.amp.autocast():
                        return model(**inputs)
                return model(**inputs)
            """,
            lines=(5,),
            fixed="""
            import torch
            def training_step(self, model, inputs):
                if hasattr(self, "use_amp") and self.use_amp:
                    with torch.amp.autocast("cuda"):
                        return model(**inputs)
                return model(**inputs)
            """,
        ),
        Invalid(
            # The old autocast bound to a name, then entered through it every step.
            """
            import contextlib
            import torch
            autocast = torch.cuda.amp.autocast if use_fp16 else contextlib.nullcontext
            for x in loader:
                with autocast():
                    loss = model(x)
            """,
            lines=(4,),
        ),
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler(init_scale=1024)
            with torch.cuda.amp.autocast():  # mixed precision
                pass
            """,
            lines=(3, 4),
            fixed="""
            import torch
            scaler = torch.amp.GradScaler("cuda", init_scale=1024)
            with torch.amp.autocast("cuda"):  # mixed precision
                pass
            """,
        ),
        Invalid(
            """
            import torch as t
            with t.cuda.amp.autocast(True, t.bfloat16):
                pass
            """,
            lines=(3,),
            fixed="""
            import torch as t
            with t.amp.autocast("cuda", enabled=True, dtype=t.bfloat16):
                pass
            """,
        ),
        Invalid(
            """
            import torch
            from torch.cuda.amp import GradScaler, autocast

            scaler = GradScaler(
                growth_interval=100,
                enabled=use_amp,
            )

            @autocast()
            def forward(x):
                return x
            """,
            lines=(5, 10),
            fixed="""
            import torch
            from torch.cuda.amp import GradScaler, autocast

            scaler = torch.amp.GradScaler(
                "cuda",
                growth_interval=100,
                enabled=use_amp,
            )

            @torch.amp.autocast("cuda")
            def forward(x):
                return x
            """,
        ),
        Invalid(
            # Without a module-level `import torch` there is no name to rewrite to.
            """
            from torch.cuda.amp import autocast
            with autocast():
                pass
            """,
            lines=(3,),
        ),
        Invalid(
            """
            import torch
            with torch.cpu.amp.autocast(dtype=torch.bfloat16):
                pass
            """,
            lines=(3,),
            fixed="""
            import torch
            with torch.amp.autocast("cpu", dtype=torch.bfloat16):
                pass
            """,
        ),
        Invalid(
            # The classes imported from the submodules that define them; and the old
            # autocast returned for the caller to enter (open_clip's `get_autocast`).
            """
            import torch
            from torch.cuda.amp.grad_scaler import GradScaler
            scaler = GradScaler(enabled=use_amp)

            def get_autocast(precision):
                if precision == "amp":
                    return torch.cuda.amp.autocast
                return contextlib.suppress
            """,
            lines=(4, 8),
            fixed="""
            import torch
            from torch.cuda.amp.grad_scaler import GradScaler
            scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

            def get_autocast(precision):
                if precision == "amp":
                    return torch.cuda.amp.autocast
                return contextlib.suppress
            """,
        ),
        Invalid(
            # An inline conditional whose other arm is not the new API is no fallback.
            """
            import contextlib
            import torch
            ctx = torch.cuda.amp.autocast() if use_amp else contextlib.nullcontext()
            """,
            lines=(4,),
            fixed="""
            import contextlib
            import torch
            ctx = torch.amp.autocast("cuda") if use_amp else contextlib.nullcontext()
            """,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.analysis.imports.qualified_name(node.func)
        if qualified not in DEPRECATED:
            return
        if self._old_torch_fallback(node):
            return
        device, new = DEPRECATED[qualified]
        message = self.message.format(old=qualified, new=new, device=device)
        self.report(node, message, fix=self._fix(node, device, new))

    def visit_Assign(self, node: cst.Assign) -> None:
        """``autocast = torch.cuda.amp.autocast if fp16 else nullcontext``: the deprecated
        callable bound to a name, which a call in the file then runs."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        if not self.context.analysis.tree.calls_by_name.get(node.targets[0].target.value):
            return
        self._report_callable(node.value)

    def visit_Return(self, node: cst.Return) -> None:
        """``def get_autocast(precision): return torch.cuda.amp.autocast``: the deprecated
        callable handed to a caller, which has no other use for it than calling it."""
        if node.value is not None:
            self._report_callable(node.value)

    def _report_callable(self, value: cst.BaseExpression) -> None:
        """Report the deprecated callable ``value`` is (or an arm of it, if inline
        conditional), without a fix: the call is elsewhere."""
        arms = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,)
        imports = self.context.analysis.imports
        for arm in arms:
            if not isinstance(arm, (cst.Attribute, cst.Name)):
                continue
            qualified = imports.qualified_name(arm)
            if qualified not in DEPRECATED or self._old_torch_fallback(arm):
                continue
            device, new = DEPRECATED[qualified]
            self.report(arm, self.message.format(old=qualified, new=new, device=device))

    def _old_torch_fallback(self, node: cst.CSTNode) -> bool:
        """Compatibility code for releases without ``torch.amp``: an ``except`` block (the
        ``try`` used the new API) or a branch of a version check. New PyTorch never runs it."""
        child: cst.CSTNode = node
        for anc in self.context.analysis.tree.ancestors(node):
            if isinstance(anc, cst.ExceptHandler):
                return True
            if isinstance(anc, (cst.If, cst.IfExp)) and self._version_test(anc.test):
                return True
            if isinstance(anc, cst.IfExp) and child is not anc.test:
                # `new_api() if <cond> else old_api()`: the other arm picks the new API,
                # so this arm is the fallback whatever the condition is named.
                other = anc.orelse if child is anc.body else anc.body
                if self._uses_new_api(other):
                    return True
            if isinstance(anc, cst.IndentedBlock) and self._after_version_guard(anc, child):
                return True
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
                return False
            child = anc
        return False

    def _version_test(self, test: cst.BaseExpression) -> bool:
        """Whether an ``if`` condition tells old PyTorch releases from new ones: a version
        name or helper, or ``hasattr(<a torch module>, ...)``."""
        return bool(_VERSION_TEST.search(self.context.code_for(test))) or (
            self._probes_torch(test)
        )

    def _probes_torch(self, test: cst.BaseExpression) -> bool:
        """``hasattr(torch, "amp")`` / ``hasattr(torch.cuda.amp, "autocast")`` in ``test``:
        a probe of the installed PyTorch, unlike ``hasattr(self, "use_amp")``."""
        imports = self.context.analysis.imports
        stack: list[cst.CSTNode] = [test]
        while stack:
            node = stack.pop()
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Name)
                and node.func.value == "hasattr"
                and node.args
                and isinstance(node.args[0].value, (cst.Attribute, cst.Name))
            ):
                qualified = imports.qualified_name(node.args[0].value) or ""
                if qualified == "torch" or qualified.startswith("torch."):
                    return True
            stack.extend(node.children)
        return False

    def _uses_new_api(self, expr: cst.CSTNode) -> bool:
        """Whether ``expr`` refers to ``torch.amp.autocast`` / ``torch.amp.GradScaler``."""
        imports = self.context.analysis.imports
        stack: list[cst.CSTNode] = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, (cst.Attribute, cst.Name)) and imports.qualified_name(node) in (
                _NEW_API
            ):
                return True
            stack.extend(node.children)
        return False

    def _after_version_guard(self, block: cst.IndentedBlock, stmt: cst.CSTNode) -> bool:
        """``if hasattr(torch, "amp"): return <new API>`` earlier in the block: what follows
        runs only on old releases."""
        for earlier in block.body:
            if earlier is stmt:
                return False
            if (
                isinstance(earlier, cst.If)
                and self._version_test(earlier.test)
                and _ends_in_exit(earlier.body)
            ):
                return True
        return False

    def _fix(self, node: cst.Call, device: str, new: str) -> Fix | None:
        if has_star_args(node):
            return None
        head = _torch_head(node.func)
        torch_name = head.value if head is not None else module_torch_alias(self.context.module)
        if torch_name is None:
            return None
        func = cst.Attribute(
            value=cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("amp")),
            attr=cst.Name(new),
        )
        args = list(node.args)
        if new == "autocast":
            for i, arg in enumerate(args):
                if arg.keyword is None and i < len(OLD_AUTOCAST_POSITIONS):
                    args[i] = arg.with_changes(
                        keyword=cst.Name(OLD_AUTOCAST_POSITIONS[i]),
                        equal=cst.AssignEqual(
                            whitespace_before=cst.SimpleWhitespace(""),
                            whitespace_after=cst.SimpleWhitespace(""),
                        ),
                    )
        call = prepend_arg(
            node.with_changes(args=args),
            cst.Arg(value=cst.SimpleString(f'"{device}"')),
        )
        if isinstance(node.func, cst.Attribute | cst.Name):
            func = func.with_changes(lpar=node.func.lpar, rpar=node.func.rpar)
        replacement = call.with_changes(func=func)
        return Fix(FixSafety.SAFE, {node: replacement})
