"""MEM006 oom-retry-in-except: an out-of-memory handler that runs the model again inside it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import libcst as cst

from memlint.analysis.calls import is_backward_call, is_optimizer_step, is_zero_grad, last_name
from memlint.analysis.imports import dotted_name
from memlint.rules.base import Invalid, Rule, Valid
from memlint.vocabulary import BROAD_ERROR_TYPES, OOM_TEXT, OOM_TYPE

# Calls that recover or report, never recompute.
_HOUSEKEEPING = re.compile(
    r"^(?:empty_cache|collect|synchronize|reset_peak_memory_stats|reset_max_memory_allocated"
    r"|memory_summary|memory_allocated|memory_reserved|max_memory_allocated|print|str|repr"
    r"|format|len|isinstance|warn|warning|info|debug|error|exception|critical|log|append|add"
    r"|extend|clear|pop|remove|update|cpu|to|cuda|zero_grad|sleep|time|exit|format_exc"
    r"|print_exc|set_postfix|write|flush|close|del)$",
    re.IGNORECASE,
)
# Callees that recompute: a forward, a step, a generation, a training or evaluation routine.
_RECOMPUTE = re.compile(
    r"forward|step|generate|predict|infer|^run|train|^fit|evaluate|encode|decode|sample"
    r"|model|_net$|^net",
    re.IGNORECASE,
)
# Report, or rebuild state for a retry made after the handler (`self._build_train_pipeline()`
# with a halved batch size): named after training, but no forward runs.
_NOT_RECOMPUTE = re.compile(
    r"^_*(?:log|print|save|load|get|set|record|report|build|rebuild|create|make|init|setup"
    r"|prepare|reset|clear|free|release|close|shrink|reduce|halve)",
    re.IGNORECASE,
)


def _handler_types(kind: cst.BaseExpression | None) -> list[str]:
    if kind is None:
        return []
    items = [e.value for e in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    names: list[str] = []
    for item in items:
        name = dotted_name(item)
        if name is not None:
            names.append(name.rsplit(".", 1)[-1])
    return names


def _is_exception_class(name: str) -> bool:
    """``RuntimeError(...)`` in ``raise RuntimeError(...) from e`` builds an error, not a retry."""
    return name[:1].isupper() and name.endswith(("Error", "Exception", "Warning"))


def _strings_and_comments(root: cst.CSTNode) -> Iterator[str]:
    todo: list[cst.CSTNode] = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, (cst.SimpleString, cst.FormattedStringText, cst.Comment)):
            yield node.value
        todo.extend(node.children)


class OomRetryInExcept(Rule):
    """
    ## What it does
    Flags an out-of-memory handler (``except torch.OutOfMemoryError``,
    ``except torch.cuda.OutOfMemoryError``, or an ``except RuntimeError`` that checks for
    "out of memory") that calls the model, a training step or the failing function again from
    inside the ``except`` block.

    ## Why is this bad?
    While the handler runs, the exception and its traceback are alive, and the traceback holds
    every frame of the failed attempt with all the tensors those frames reference. The retry
    therefore runs with the memory of the failed attempt still allocated and often runs out of
    memory again. The PyTorch FAQ calls this out: move the recovery code outside the ``except``
    clause.

    ## Example
    ```python
    try:
        out = model(batch)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        out = model(batch[: len(batch) // 2])
    ```

    ## How to fix
    Only record the failure in the handler and retry after it:
    ```python
    oom = False
    try:
        out = model(batch)
    except torch.OutOfMemoryError:
        oom = True
    if oom:
        torch.cuda.empty_cache()
        out = model(batch[: len(batch) // 2])
    ```
    Handlers that only log, re-raise, set a flag or shrink a batch size for the next loop
    iteration are not reported.
    """

    reads_comments = True

    code = "MEM006"
    name = "oom-retry-in-except"
    message = (
        "out-of-memory handler calls `{callee}` again inside `except`; the failed attempt's "
        "tensors stay alive until the handler exits: set a flag and retry after it"
    )
    triggers = ("OutOfMemory", "of memory", "OOM", "oom")
    # ... as a word, in any case, as the gate reads the handlers (`oom` alone is in `bloom` and
    # `zoom`). Searched only in files that hold a trigger.
    trigger_pattern = b"(?i)" + OOM_TEXT.pattern.encode()
    # Findings are retries in an `except` clause.
    # An OOM handler in the code (a handler's strings and comments read from its lines).
    code_gate = ("fact:oom-handler",)

    valid = (
        Valid("""
            import torch
            def fit(self):
                for epoch in range(self.epochs):
                    try:
                        self._train_one_epoch()
                    except torch.OutOfMemoryError:
                        self.batch_size //= 2
                        self._clear_memory()
                        self._build_train_pipeline()  # state only; the loop retries after
        """),
        Valid("""
            import torch
            oom = False
            try:
                out = model(batch)
            except torch.OutOfMemoryError:
                oom = True
            if oom:
                out = model(batch[:8])
        """),
        Valid("""
            import torch
            while True:
                try:
                    out = run_model(batch_size)
                    break
                except torch.cuda.OutOfMemoryError:
                    logger.warning("OOM at batch size %d", batch_size)
                    torch.cuda.empty_cache()
                    batch_size //= 2
        """),
        Valid("""
            try:
                out = model(x)
            except RuntimeError:
                out = model(x.float())
        """),
        Valid("""
            try:
                loss = train_step(batch)
            except RuntimeError as e:
                if "out of memory" in str(e):
                    optimizer.zero_grad(set_to_none=True)
                    torch.cuda.empty_cache()
                    skipped += 1
                else:
                    raise
        """),
    )
    invalid = (
        Invalid(
            """
            try:
                run_model(batch_size)
            except RuntimeError:  # Out of memory
                for _ in range(batch_size):
                    run_model(1)
            """,
            lines=(6,),
        ),
        Invalid(
            """
            import torch

            def embed(texts, bs):
                try:
                    return encoder(texts, batch_size=bs)
                except torch.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    return embed(texts, bs // 2)
            """,
            lines=(9,),
        ),
        Invalid(
            """
            try:
                logits = self.model(**inputs)
            except RuntimeError as err:
                if "CUDA out of memory" not in str(err):
                    raise
                self.model.cpu()
                logits = self.model(**{k: v.cpu() for k, v in inputs.items()})
            """,
            lines=(8,),
        ),
    )

    def visit_Try(self, node: cst.Try) -> None:
        self._check(node, node.body, node.handlers)

    def visit_TryStar(self, node: cst.TryStar) -> None:
        self._check(node, node.body, node.handlers)

    def _check(
        self,
        node: cst.Try | cst.TryStar,
        body: cst.BaseSuite,
        handlers: Sequence[cst.ExceptHandler | cst.ExceptStarHandler],
    ) -> None:
        tried: set[str] | None = None
        for handler in handlers:
            if not self._is_oom_handler(handler):
                continue
            if tried is None:
                tried = {
                    n
                    for c in self.context.analysis.tree.walk(body)
                    if isinstance(c, cst.Call) and (n := dotted_name(c.func)) is not None
                }
            retry = self._retry_call(node, handler, tried)
            if retry is not None:
                callee = dotted_name(retry.func) or "the model"
                self.report(retry, self.message.format(callee=callee))

    def _is_oom_handler(self, handler: cst.ExceptHandler | cst.ExceptStarHandler) -> bool:
        types = _handler_types(handler.type)
        if OOM_TYPE in types:
            return True
        if not any(t in BROAD_ERROR_TYPES for t in types):
            return False
        # String checks (`"out of memory" in str(e)`) and comments, the `except` line's included.
        return any(OOM_TEXT.search(text) for text in _strings_and_comments(handler.body))

    def _retry_call(
        self,
        node: cst.Try | cst.TryStar,
        handler: cst.ExceptHandler | cst.ExceptStarHandler,
        tried: set[str],
    ) -> cst.Call | None:
        """The first call in the handler that recomputes, if any."""
        function = self.context.analysis.tree.enclosing_function(node)
        own_name = function.name.value if function is not None else None
        classifier = self.context.analysis.calls
        tree = self.context.analysis.tree
        for call in tree.walk(handler.body):
            if not isinstance(call, cst.Call):
                continue
            name = dotted_name(call.func)
            last = last_name(call.func)
            if name is None or last is None or _is_exception_class(last):
                continue
            if is_zero_grad(call) or _HOUSEKEEPING.match(last) or _NOT_RECOMPUTE.match(last):
                continue
            if (
                name in tried
                or last == own_name
                or is_backward_call(call)
                or is_optimizer_step(call)
                or classifier.is_model_forward(call, include_generate=True)
                or _RECOMPUTE.search(last)
            ):
                return call
        return None
