"""MEM014 load-without-map-location."""

from __future__ import annotations

import os
import re
from functools import cached_property

import libcst as cst

from memlint.analysis.branches import alternatives, guarding_tests, mentions
from memlint.analysis.calls import last_name, method_name, receiver
from memlint.analysis.imports import dotted_name
from memlint.diagnostics import FixSafety
from memlint.edits import append_arg, has_keyword, has_star_args, keyword_arg, positional_count
from memlint.rules.base import Fix, Invalid, Rule, Valid

# `training_args.bin`, `self.vocab_file`, f"{run}/config.pt", `label_map.pt`: files of
# arguments, vocabularies and bookkeeping that hold no tensors worth a device; and
# `train_tokens.pt`, `data.pt`, `shard_03.pt`, `self.get_chunk_path(i)`: data that a
# preprocessing job wrote.
ARTIFACT_NAME = re.compile(
    r"(?:^|[^a-z])(?:args|arguments|config|cfg|conf|vocab|tokeni[sz]er|hparams|hyper_?params"
    r"|meta|metadata|opts|options|settings|labels?|label_map|classes|splits?|index|indices"
    r"|stats|statistics|history|metrics|results?|rng|rng_?states?|random_?states?"
    r"|data|dataset|tokens|token_ids|input_ids|shards?|chunks?|samples|examples)(?:$|[^a-z])"
    r"|\.(?:json|ya?ml|txt|csv)$",
    re.IGNORECASE,
)
# A file name with an extension (`emb.pth`, `best_model.pt`), not a folder.
FILE_NAME = re.compile(r"[\w.-]+\.\w+")
# A learning-rate scheduler (`self.lr_scheduler`, `sched`): its state_dict holds numbers.
SCHEDULER_NAME = re.compile(r"sched", re.IGNORECASE)
# A test about the accelerator: `torch.cuda.is_available()`, `args.cuda`, `use_gpu`.
ACCELERATOR_TEST = re.compile(r"cuda|gpu|is_available|device", re.IGNORECASE)
# Any mention of an accelerator or of device placement in a function.
ACCELERATOR_WORD = re.compile(r"cuda|gpu|device|rank|accelerat|distributed|xla|mps", re.IGNORECASE)
# The loaded value placed right away: `torch.load(p).to(device)`, `.cuda()`, `.cpu()`.
PLACING_METHODS = frozenset({"to", "cuda", "cpu"})
# Host-side work on the loaded values: `.cpu()`, `.numpy()`, `.tolist()`.
HOST_METHODS = frozenset({"cpu", "numpy", "tolist"})
TEST_FILE = re.compile(r"^test_.*\.py$|_test\.py$|^conftest\.py$")
DATASET_NAME = re.compile(r"data_?set", re.IGNORECASE)
# A module in a package's data folder (`torch_points3d/datasets/registration/`,
# `neuralop/data/datasets/`): dataset classes and their preprocessing, whose tensor files
# the package wrote on the host. Only the nearest folders count, so that a checkout kept
# under `/data/` is not all data code.
DATA_FOLDER = frozenset({"data", "dataset", "datasets"})
_DATA_FOLDER_DEPTH = 3


class LoadWithoutMapLocation(Rule):
    """
    ## What it does
    Flags `torch.load(...)` calls that do not say where the loaded tensors should go
    (`map_location`, as a keyword or the second positional argument), also through an
    aliased module (`import torch as th; th.load(path)`).

    Where the saved device cannot matter, or the code already chose a placement, it stays
    silent:
    - the file wrote what it reads: a `torch.save` to the same path expression (a cache, a
      round trip) or to the same file name under another folder (`os.path.join(out,
      "emb.pth")` beside `os.path.join(prev_run, "emb.pth")`, unless the save is a
      checkpoint of live training objects) in the same function, or to
      the same path expression anywhere in the file unless the expression is
      made of parameters of the loading function only (`path`, `str(path)`: `save(model,
      path)` and `load(model, path)` helpers name different files with one word) or the
      save writes `state_dict()`s of live objects (`torch.save(opt.state_dict(), p)`, a
      dict of them: a checkpoint a training run wrote, on its devices; a learning-rate
      scheduler's holds no tensors), an `io.BytesIO`
      buffer when the file
      also saves into one, or a file
      whose every `torch.save` writes CPU tensors (`v.cpu()`, `.to("cpu")`, or
      `model.cpu()` before saving its `state_dict`);
    - the loaded value is placed at once: `torch.load(p).to(device)`, `.cuda()`, `.cpu()`;
    - the load sits under a test about the accelerator (`if torch.cuda.is_available():`) or
      in the branch beside one that loads the same file with `map_location`;
    - the function works on the host only: it converts to the CPU (`.cpu()`, `.numpy()`,
      `"cpu"`) and never names an accelerator or another device (the `map_location` that
      another load passes is that load's choice, not work on the host);
    - files of arguments, vocabularies and bookkeeping, and data files, by name
      (`training_args.bin`, `config.pt`, `self.vocab_file`, `label_map.pt`,
      `rng_state.pth`,
      `train_tokens.pt`, `shard_03.pt`), also a path a helper builds
      (`self.get_chunk_path(i)`);
    - dataset code (a `*Dataset` class, `__getitem__`, a `*dataset*` function, a module
      in a `data`/`datasets` folder of its package: data written on the CPU) and tests
      (`test_*.py`, `test*` functions: they must load on CPU-only CI).

    The rule cannot see where a file was written, so it stays opt-in: resuming training
    from a checkpoint that a GPU run saved is where it earns its keep, and loading a
    tensor file that a preprocessing script wrote on the CPU is where it is noise. Two of
    the silences above trade findings for quiet: a value placed at once and a host-only
    function still pass through the saved device, and fail on a CPU-only machine when the
    file came from a GPU.

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
    # `torch.load(...)`, `from torch import load` and an aliased module (`import torch as
    # th; th.load(...)`) spell one of these; a file that merely mentions `torch` and calls
    # `json.load` is not parsed for this rule.
    triggers = ("torch.load", "import load", "import torch as")
    # And a `load(...)` call with neither `map_location` nor `**` among its top-level
    # arguments (parentheses nested up to four deep), so files that always pass a location
    # are not parsed for this rule.
    trigger_pattern = (
        rb"load\((?:(?!map_location|\*\*)(?:[^()]|"
        rb"\((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*\)))*\)"
    )
    code_gate = ("fact:unplaced-load",)
    fix_safety = FixSafety.UNSAFE
    valid = (
        # A cache of tokenised data chunks, its path built by a helper named for them.
        Valid(
            """
            import os
            import torch
            class ChunkedCache:
                def load_chunk(self, i):
                    return torch.load(self.get_chunk_path(i))
                def get_chunk_path(self, i):
                    return os.path.join(self.folder, f"data_{i:05d}.chunk")
            """
        ),
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
        Valid(
            # Written by this file: a feature cache, a buffer, checkpoints saved from the CPU.
            """
            import io, os, torch

            def features(self):
                if os.path.exists(self.cache_file):
                    return torch.load(self.cache_file)
                feats = self.compute()
                torch.save(feats, self.cache_file)
                return feats

            def clone(obj):
                buffer = io.BytesIO()
                torch.save(obj, buffer)
                buffer.seek(0)
                return torch.load(buffer)
            """
        ),
        Valid(
            # Random generator states (host byte tensors, also the CUDA generators'): the
            # bookkeeping a trainer resumes, like its arguments.
            """
            import os, random, torch
            def restore_rng(checkpoint_path):
                rng_file = os.path.join(checkpoint_path, "rng_state.pth")
                states = torch.load(rng_file)
                random.setstate(states["python"])
                torch.cuda.random.set_rng_state_all(states["cuda"])
            """
        ),
        Valid(
            # The function writes the same file itself, under the run's output folder.
            """
            import os, torch
            def get_model(args, output_dir):
                model = build(args)
                if args.from_peft is not None:
                    model.set_input_embeddings(
                        torch.load(os.path.join(args.from_peft, "embedding", "emb.pth")))
                    torch.save(model.embed_tokens, os.path.join(output_dir, "embedding", "emb.pth"))
                return model.to(args.device)
            """
        ),
        Valid(
            # Every save in the file writes CPU tensors.
            """
            import torch

            def save_best(model, path):
                torch.save({k: v.cpu() for k, v in model.state_dict().items()}, path)

            def restore(model, path):
                model.load_state_dict(torch.load(path))
            """
        ),
        Valid(
            # Placement chosen by the code.
            """
            import torch
            emb = torch.load("embeddings.pt").to(device)
            if torch.cuda.is_available():
                state = torch.load(ckpt)
            else:
                state = torch.load(ckpt, map_location="cpu")
            """
        ),
        Valid(
            # Host-only work, artifacts without tensors, dataset files.
            """
            import os, torch
            from torch.utils.data import Dataset

            def export_npz(path, out):
                state = torch.load(path)
                np.savez(out, **{k: v.cpu().numpy() for k, v in state.items()})

            training_args = torch.load(os.path.join(run_dir, "training_args.bin"))

            def save_scheduler(lr_scheduler, root):
                torch.save(lr_scheduler.state_dict(), root / "lr_scheduler.pt")

            def load_scheduler(lr_scheduler, root):
                lr_scheduler.load_state_dict(torch.load(root / "lr_scheduler.pt"))

            class ShardDataset(Dataset):
                def __init__(self, root):
                    self.x, self.y = torch.load(os.path.join(root, "train.pt"))
            """
        ),
    )
    invalid = (
        # The checkpoint filled item by item with the modules' state dicts; another class's
        # round trip through its own local `path` names another file.
        Invalid(
            """
            import os
            import torch
            class Launcher:
                def save_checkpoint(self, epoch):
                    path = os.path.join(self.cfg.CHECKPOINT_PATH, "last.pt")
                    checkpoint = {"epoch": epoch}
                    for module in self.cfg.CHECKPOINT_MODULES:
                        checkpoint[module] = getattr(self, module).state_dict()
                    torch.save(checkpoint, path)
                def load_checkpoint(self):
                    path = os.path.join(self.cfg.CHECKPOINT_PATH, "last.pt")
                    checkpoint = torch.load(path, weights_only=True)
                    return checkpoint["epoch"]
            class GridSearch:
                def save_checkpoint(self, source):
                    path = os.path.join(self.cfg.CORE_PATH, "grid.pt")
                    torch.save({"source": source}, path)
                def load_checkpoint(self):
                    path = os.path.join(self.cfg.CORE_PATH, "grid.pt")
                    return torch.load(path, weights_only=True)["source"]
            """,
            lines=(13,),
            fixed="""
            import os
            import torch
            class Launcher:
                def save_checkpoint(self, epoch):
                    path = os.path.join(self.cfg.CHECKPOINT_PATH, "last.pt")
                    checkpoint = {"epoch": epoch}
                    for module in self.cfg.CHECKPOINT_MODULES:
                        checkpoint[module] = getattr(self, module).state_dict()
                    torch.save(checkpoint, path)
                def load_checkpoint(self):
                    path = os.path.join(self.cfg.CHECKPOINT_PATH, "last.pt")
                    checkpoint = torch.load(path, weights_only=True, map_location="cpu")
                    return checkpoint["epoch"]
            class GridSearch:
                def save_checkpoint(self, source):
                    path = os.path.join(self.cfg.CORE_PATH, "grid.pt")
                    torch.save({"source": source}, path)
                def load_checkpoint(self):
                    path = os.path.join(self.cfg.CORE_PATH, "grid.pt")
                    return torch.load(path, weights_only=True)["source"]
            """,
        ),
        # A checkpoint another method wrote from live objects' state dicts, resumed: the
        # same path expression is no round trip; nor is a path made of a parameter.
        Invalid(
            """
            import os
            import torch
            class Trainer:
                def save(self, folder):
                    opt_path = os.path.join(folder, "optimizer.pt")
                    torch.save(self.optimizer.state_dict(), opt_path)
                def resume(self, folder):
                    opt_path = os.path.join(folder, "optimizer.pt")
                    self.optimizer.load_state_dict(torch.load(opt_path))
                def save_all(self, path):
                    pkg = dict(model=self.model.state_dict(), step=self.step)
                    torch.save(pkg, str(path))
                def load_all(self, path):
                    pkg = torch.load(str(path))
                    self.model.load_state_dict(pkg["model"])
            """,
            lines=(10, 15),
            fixed="""
            import os
            import torch
            class Trainer:
                def save(self, folder):
                    opt_path = os.path.join(folder, "optimizer.pt")
                    torch.save(self.optimizer.state_dict(), opt_path)
                def resume(self, folder):
                    opt_path = os.path.join(folder, "optimizer.pt")
                    self.optimizer.load_state_dict(torch.load(opt_path, map_location="cpu"))
                def save_all(self, path):
                    pkg = dict(model=self.model.state_dict(), step=self.step)
                    torch.save(pkg, str(path))
                def load_all(self, path):
                    pkg = torch.load(str(path), map_location="cpu")
                    self.model.load_state_dict(pkg["model"])
            """,
        ),
        # A path a helper builds is judged by the helper's name: a checkpoint here.
        Invalid(
            """
            import torch
            def resume(trainer, epoch):
                state = torch.load(trainer.get_checkpoint_path(epoch))
                trainer.model.load_state_dict(state["model"])
            """,
            lines=(4,),
            fixed="""
            import torch
            def resume(trainer, epoch):
                state = torch.load(trainer.get_checkpoint_path(epoch), map_location="cpu")
                trainer.model.load_state_dict(state["model"])
            """,
        ),
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
            # The module under the alias many RL codebases use.
            """
            import torch as th
            net = th.load(str(path))
            """,
            lines=(3,),
            fixed="""
            import torch as th
            net = th.load(str(path), map_location="cpu")
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
        Invalid(
            # The file saves GPU tensors elsewhere and resumes from another path; the function
            # places the model on a device it does not know.
            """
            import torch

            def save(model, path):
                torch.save(model.state_dict(), path)

            def resume(model, resume_from, device):
                model.to(device)
                model.load_state_dict(torch.load(resume_from))
                return model.cpu()
            """,
            lines=(9,),
            fixed="""
            import torch

            def save(model, path):
                torch.save(model.state_dict(), path)

            def resume(model, resume_from, device):
                model.to(device)
                model.load_state_dict(torch.load(resume_from, map_location="cpu"))
                return model.cpu()
            """,
        ),
        Invalid(
            # The same file name saved later in the function, but as a checkpoint of the
            # training run's live objects: it holds their devices.
            """
            import torch
            def main(args):
                net = Net().cuda()
                if args.pretrained:
                    checkpoint = torch.load("./model_best.pth.tar")
                    net.load_state_dict(checkpoint["state_dict"])
                train(net)
                torch.save({"state_dict": net.state_dict()}, "./logs/model_best.pth.tar")
            """,
            lines=(6,),
            fixed="""
            import torch
            def main(args):
                net = Net().cuda()
                if args.pretrained:
                    checkpoint = torch.load("./model_best.pth.tar", map_location="cpu")
                    net.load_state_dict(checkpoint["state_dict"])
                train(net)
                torch.save({"state_dict": net.state_dict()}, "./logs/model_best.pth.tar")
            """,
        ),
        Invalid(
            # The other loads of the function choose the CPU; this one forgot to: a
            # `map_location="cpu"` is no sign that the function works on the host.
            """
            import torch
            def load_checkpoint(self, ckpt_dir):
                self.encoder.load_state_dict(
                    torch.load(ckpt_dir / "encoder.pth", map_location=torch.device("cpu")))
                state = torch.load(ckpt_dir / "decoder.pth")
                self.decoder.load_state_dict(state)
            """,
            lines=(6,),
            fixed="""
            import torch
            def load_checkpoint(self, ckpt_dir):
                self.encoder.load_state_dict(
                    torch.load(ckpt_dir / "encoder.pth", map_location=torch.device("cpu")))
                state = torch.load(ckpt_dir / "decoder.pth", map_location="cpu")
                self.decoder.load_state_dict(state)
            """,
        ),
        Invalid(
            # The fallback forgot the location its `try` passes: no device decision there.
            """
            import torch
            def load_weights(model, path, device):
                try:
                    model.load_state_dict(torch.load(path, map_location=device))
                except KeyError:
                    state = torch.load(path)
                    model.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
            """,
            lines=(7,),
            fixed="""
            import torch
            def load_weights(model, path, device):
                try:
                    model.load_state_dict(torch.load(path, map_location=device))
                except KeyError:
                    state = torch.load(path, map_location="cpu")
                    model.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
            """,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self._is_torch_call(node, "load") or self._locates(node):
            return
        if self._knowable_safe(node):
            return
        fixed = append_arg(node, keyword_arg("map_location", cst.SimpleString('"cpu"')))
        self.report(node, fix=Fix(FixSafety.UNSAFE, {node: fixed}))

    def _is_torch_call(self, call: cst.Call, name: str) -> bool:
        return self.context.analysis.imports.qualified_name(call.func) == f"torch.{name}"

    @staticmethod
    def _locates(call: cst.Call) -> bool:
        """`map_location` given (keyword, second positional), or maybe given (`**kwargs`)."""
        return has_star_args(call) or has_keyword(call, "map_location") or (
            positional_count(call) >= 2
        )

    def _knowable_safe(self, load: cst.Call) -> bool:
        """Where the rule can tell the saved device does not matter, or the code chose it."""
        return (
            self._in_test_or_dataset(load)
            or self._placed_at_once(load)
            or self._artifact(load)
            or self._round_trip(load)
            or self._device_branch(load)
            or self._host_only_scope(load)
        )

    # -- the loaded file -------------------------------------------------------------------

    @staticmethod
    def _argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
        """The argument at ``position`` or passed as ``keyword``."""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) > position:
            return positional[position].value
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
        return None

    def _loaded_file(self, load: cst.Call) -> cst.BaseExpression | None:
        return self._argument(load, 0, "f")

    def _artifact(self, load: cst.Call) -> bool:
        """A file of arguments, vocabulary, bookkeeping or preprocessed data, by its name."""
        path = self._loaded_file(load)
        if path is None:
            return False
        texts: list[str] = []
        if isinstance(path, cst.Name | cst.Attribute):
            texts.append(path.value if isinstance(path, cst.Name) else path.attr.value)
        elif isinstance(path, cst.Call) and isinstance(path.func, cst.Name | cst.Attribute):
            # a path a helper builds, by the helper's name: `self.get_chunk_path(i)`
            func = path.func
            texts.append(func.value if isinstance(func, cst.Name) else func.attr.value)
        for n in [path, *self.context.analysis.tree.walk(path)]:
            if isinstance(n, cst.SimpleString) and isinstance(n.evaluated_value, str):
                texts.append(os.path.basename(n.evaluated_value))
            elif isinstance(n, cst.FormattedStringText):
                texts.append(n.value.rsplit("/", 1)[-1])
        return any(ARTIFACT_NAME.search(t) for t in texts)

    @cached_property
    def _saves(self) -> list[cst.Call]:
        # Keyed by the last name: `torch.save(...)` and `save(...)` both sit under "save".
        calls = self.context.analysis.tree.calls_by_name.get("save", [])
        return [call for call in calls if self._is_torch_call(call, "save")]

    def _code(self, node: cst.CSTNode) -> str:
        return self.context.code_for(node).strip()

    @cached_property
    def _saved_paths(self) -> dict[str, list[cst.Call]]:
        """The saves of this file by the source text of their path expression."""
        paths: dict[str, list[cst.Call]] = {}
        for save in self._saves:
            path = self._argument(save, 1, "f")
            if path is not None:
                paths.setdefault(self._code(path), []).append(save)
        return paths

    def _round_trip(self, load: cst.Call) -> bool:
        """This file wrote what it reads: the same path expression (a cache, a test's round
        trip), an in-memory buffer, or a file whose every save holds CPU tensors."""
        path = self._loaded_file(load)
        if path is not None and self._saved_here(path, load):
            return True
        if path is not None and self._saves_to_buffer and self._is_buffer(path, load):
            return True  # bytes this file serialised (a deep copy, a message between ranks)
        return self._cpu_saves_only

    def _saved_here(self, path: cst.BaseExpression, load: cst.Call) -> bool:
        """A save to the same path expression: in the same function, or anywhere when the
        expression is more than a parameter (`save(model, path)` and `load(model, path)`
        helpers name different files with one word)."""
        saves = self._saved_paths.get(self._code(path), [])
        tree = self.context.analysis.tree
        owner = tree.enclosing_class(load)
        mine = [save for save in saves if owner is not None and tree.enclosing_class(save) is owner]
        saves = mine or saves  # another class's save to a local `path` names another file
        scope = self._scope(load)
        if any(self._scope(save) is scope for save in saves):
            return True
        names = self._file_names(path)
        if names and any(
            self._scope(save) is scope
            and (target := self._argument(save, 1, "f")) is not None
            and names & self._file_names(target)
            and self._live_state(save) is None
            for save in self._saves
        ):
            # The function writes the same file under another folder (`os.path.join(out,
            # "emb.pth")` beside `os.path.join(prev_run, "emb.pth")`): what it reads back
            # was saved by this code, from where its objects live. Not a checkpoint of
            # live training objects (`{"state_dict": net.state_dict()}`), which a GPU run
            # writes from its devices.
            return True
        if saves and all(self._live_state(save) == "scheduler" for save in saves):
            return True  # a learning-rate scheduler's state is numbers: no device to restore
        if isinstance(scope, cst.FunctionDef) and self._made_of_parameters(path, scope):
            return False
        # A checkpoint that another function of the file wrote from live training objects
        # (`torch.save(opt.state_dict(), p)`, a dict of state dicts) holds their devices.
        return any(self._live_state(save) is None for save in saves)

    def _file_names(self, path: cst.BaseExpression) -> set[str]:
        """The literal file names (with an extension) a path expression ends in."""
        names: set[str] = set()
        for n in [path, *self.context.analysis.tree.walk(path)]:
            if isinstance(n, cst.SimpleString) and isinstance(n.evaluated_value, str):
                name = os.path.basename(n.evaluated_value)
                if FILE_NAME.fullmatch(name):
                    names.add(name)
        return names

    def _made_of_parameters(self, path: cst.BaseExpression, scope: cst.FunctionDef) -> bool:
        """The path is a parameter of the loading function, maybe wrapped (`str(path)`,
        `Path(path)`): `save(model, path)` and `load(model, path)` name different files."""
        params = scope.params
        every = {p.name.value for p in
                 (*params.posonly_params, *params.params, *params.kwonly_params)}
        tree = self.context.analysis.tree
        names = [
            n for n in [path, *tree.walk(path)]
            if isinstance(n, cst.Name)
            and not (isinstance(parent := tree.parent(n), cst.Call) and parent.func is n)
        ]
        return bool(names) and all(n.value in every for n in names)

    def _live_state(self, save: cst.Call) -> str | None:
        """Does the save write ``state_dict()`` of some object, directly or through a name
        bound to a container of them, or given them item by item, earlier in its function?
        "scheduler" when every one is a learning-rate scheduler's, "state" when some other,
        None when none."""
        payload = self._argument(save, 0, "obj")
        if payload is None:
            return None
        tree = self.context.analysis.tree
        values: list[cst.CSTNode] = [payload]
        if isinstance(payload, cst.Name):
            for n in tree.walk(self._scope(save)):
                if n is save:
                    break
                if isinstance(n, cst.Assign) and any(
                        _root_is(t.target, payload.value) for t in n.targets):
                    values.append(n.value)  # `ckpt = {...}`, `ckpt[name] = m.state_dict()`
        owners = [
            self._code(receiver(n) or n)
            for value in values for n in [value, *tree.walk(value)]
            if isinstance(n, cst.Call) and method_name(n) == "state_dict"
        ]
        if not owners:
            return None
        return "scheduler" if all(SCHEDULER_NAME.search(o) for o in owners) else "state"

    def _is_buffer(self, path: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`io.BytesIO(...)`, or a name bound to one in the function around ``at``."""
        qualified = self.context.analysis.imports.qualified_name
        if isinstance(path, cst.Call):
            return qualified(path.func) == "io.BytesIO"
        if not isinstance(path, cst.Name):
            return False
        for n in self.context.analysis.tree.walk(self._scope(at)):
            if (
                isinstance(n, cst.Assign)
                and isinstance(n.value, cst.Call)
                and qualified(n.value.func) == "io.BytesIO"
                and any(last_name(t.target) == path.value for t in n.targets)
            ):
                return True
        return False

    @cached_property
    def _saves_to_buffer(self) -> bool:
        """Some `torch.save` of this file writes into an in-memory buffer."""
        for save in self._saves:
            target = self._argument(save, 1, "f")
            if target is not None and self._is_buffer(target, save):
                return True
        return False

    @cached_property
    def _cpu_saves_only(self) -> bool:
        """Every `torch.save` in the file writes CPU tensors (`{k: v.cpu() ...}`,
        `model.cpu()` before `torch.save(model.state_dict(), path)`)."""
        return bool(self._saves) and all(self._saves_cpu(save) for save in self._saves)

    def _saves_cpu(self, save: cst.Call) -> bool:
        payload = self._argument(save, 0, "obj")
        if payload is None:
            return False
        tree = self.context.analysis.tree
        nodes = [payload, *tree.walk(payload)]
        if any(isinstance(n, cst.Call) and self._to_cpu(n) for n in nodes):
            return True
        moved = self._moved_to_cpu_before(save)
        return any(
            isinstance(n, cst.Name | cst.Attribute) and dotted_name(n) in moved for n in nodes
        )

    def _to_cpu(self, call: cst.Call) -> bool:
        """`x.cpu()`, `x.to("cpu")`, `x.to(torch.device("cpu"))`."""
        method = method_name(call)
        if method == "cpu":
            return True
        return method == "to" and bool(call.args) and self._is_cpu_literal(call.args[0].value)

    def _moved_to_cpu_before(self, node: cst.CSTNode) -> set[str]:
        """Names moved to the CPU by statements of ``node``'s function that precede it."""
        tree = self.context.analysis.tree
        moved: set[str] = set()
        for n in tree.walk(self._scope(node)):
            if n is node:
                break
            if isinstance(n, cst.Call) and self._to_cpu(n):
                recv = receiver(n)
                name = None if recv is None else dotted_name(recv)
                if name is not None:
                    moved.add(name)
        return moved

    # -- where the load runs ---------------------------------------------------------------

    def _scope(self, node: cst.CSTNode) -> cst.CSTNode:
        func = self.context.analysis.tree.enclosing_function(node)
        return self.context.module if func is None else func

    def _in_test_or_dataset(self, load: cst.Call) -> bool:
        """Tests run on CPU-only CI, so their files load anywhere; a dataset's files hold
        data written on the CPU (and loader workers cannot hold CUDA tensors)."""
        if TEST_FILE.search(os.path.basename(self.context.path)):
            return True
        folders = re.split(r"[/\\]", self.context.path)[:-1][-_DATA_FOLDER_DEPTH:]
        if any(folder.lower() in DATA_FOLDER for folder in folders):
            return True
        tree = self.context.analysis.tree
        for anc in tree.ancestors(load):
            if isinstance(anc, cst.FunctionDef):
                name = anc.name.value
                if name.startswith("test") or name == "__getitem__" or DATASET_NAME.search(name):
                    return True
            elif isinstance(anc, cst.ClassDef):
                names = [anc.name.value, *(last_name(b.value) or "" for b in anc.bases)]
                if any(DATASET_NAME.search(n) for n in names):
                    return True
        return False

    def _placed_at_once(self, load: cst.Call) -> bool:
        """`torch.load(p).to(device)`: the code says where the value goes."""
        parent = self.context.analysis.tree.parent(load)
        if not isinstance(parent, cst.Attribute) or parent.value is not load:
            return False
        outer = self.context.analysis.tree.parent(parent)
        return isinstance(outer, cst.Call) and parent.attr.value in PLACING_METHODS

    def _device_branch(self, load: cst.Call) -> bool:
        """Under a test about the accelerator, or the branch beside one that loads the same
        file with `map_location`: the placement is a decision. (A `try` whose `except` drops
        the location is a forgotten argument, not a decision.)"""
        tree = self.context.analysis.tree
        if any(mentions(tree, test, ACCELERATOR_TEST) for test in guarding_tests(tree, load)):
            return True
        path = self._loaded_file(load)
        if path is None:
            return False
        text = self._code(path)
        for alt in alternatives(tree, load, handlers=False):
            for n in [alt, *tree.walk(alt)]:
                if (
                    isinstance(n, cst.Call)
                    and self._is_torch_call(n, "load")
                    and self._locates(n)
                    and (other := self._loaded_file(n)) is not None
                    and self._code(other) == text
                ):
                    return True
        return False

    def _host_only_scope(self, load: cst.Call) -> bool:
        """The function works on the host (`.cpu()`, `.numpy()`, `"cpu"`) and never names an
        accelerator: an export, an average of checkpoints, an inspection. The location
        another load passes (`torch.load(a, map_location="cpu")` beside `torch.load(b)`) is
        that load's own placement, not work on the host."""
        tree = self.context.analysis.tree
        locations = {
            n
            for call in tree.walk(self._scope(load))
            if isinstance(call, cst.Call) and self._is_torch_call(call, "load")
            and (where := self._argument(call, 1, "map_location")) is not None
            for n in [where, *tree.walk(where)]
        }
        nodes = [n for n in tree.walk(self._scope(load)) if n not in locations]
        accelerator, host = self._placement_words(nodes)
        return host and not accelerator

    def _placement_words(self, nodes: list[cst.CSTNode]) -> tuple[bool, bool]:
        """(names an accelerator or an unknown device, names the CPU) among ``nodes``.

        `device="cpu"` and names assigned the CPU (`dev = torch.device("cpu")`) are the CPU.
        """
        tree = self.context.analysis.tree
        cpu_names: set[str] = set()
        cpu_devices: set[cst.CSTNode] = set()  # the `device` of `torch.device("cpu")`
        for n in nodes:
            if isinstance(n, cst.Assign) and self._is_cpu_literal(n.value):
                cpu_names.update(
                    t.target.value for t in n.targets if isinstance(t.target, cst.Name)
                )
            elif isinstance(n, cst.Call) and self._is_cpu_literal(n):
                cpu_devices.add(n.func.attr if isinstance(n.func, cst.Attribute) else n.func)
        host = False
        for n in nodes:
            if isinstance(n, cst.Name):
                parent = tree.parent(n)
                if n in cpu_devices or (isinstance(parent, cst.Arg) and parent.keyword is n):
                    continue
                if n.value not in cpu_names and ACCELERATOR_WORD.search(n.value):
                    return True, host
            elif isinstance(n, cst.SimpleString):
                if n.evaluated_value == "cpu":
                    host = True
                elif ACCELERATOR_WORD.search(n.value):
                    return True, host
            elif isinstance(n, cst.Call) and method_name(n) in HOST_METHODS:
                host = True
        return False, host

    def _is_cpu_literal(self, expr: cst.BaseExpression) -> bool:
        """`"cpu"` or `torch.device("cpu")`."""
        if isinstance(expr, cst.Call) and self._is_torch_call(expr, "device") and expr.args:
            expr = expr.args[0].value
        return isinstance(expr, cst.SimpleString) and expr.evaluated_value == "cpu"


def _root_is(target: cst.BaseExpression, name: str) -> bool:
    """``name`` itself, or an item of it (``name[key]``)."""
    while isinstance(target, cst.Subscript):
        target = target.value
    return isinstance(target, cst.Name) and target.value == name
