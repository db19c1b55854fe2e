"""The project model's parts: summaries, their JSON form, the store, name resolution."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Mapping
from pathlib import Path

from memlint.project.layout import ModuleName, located, package_files
from memlint.project.model import ProjectModel, ViewMemo, build_views
from memlint.project.store import SummaryStore
from memlint.project.summary import (
    ModuleSummary,
    Switch,
    defines_one_of,
    may_define_mover,
    needs_summary,
    summarise_source,
)


def summary(source: str) -> ModuleSummary:
    found = summarise_source(textwrap.dedent(source).encode())
    assert found is not None
    return found


def model(**modules: str) -> ProjectModel:
    """Modules by dotted name (``pkg__init__`` stands for the package ``pkg``)."""
    built = {}
    for name, source in modules.items():
        is_package = name.endswith("__init__")
        dotted = name.removesuffix("__init__").rstrip("_").replace("__", ".")
        built[ModuleName(dotted, is_package)] = summary(source)
    return ProjectModel(built)


def test_summary_survives_its_json_form() -> None:
    found = summary("""
        import torch
        from .utils import no_grad_factory as ngf

        @ngf()
        def evaluate(model, loader):
            with torch.no_grad():
                return [model(x).detach() for x in loader]

        class Loss:
            def __init__(self):
                self.inner = Inner()
            def __call__(self, p, y):
                return (p - y).abs().mean(), y.detach()
    """)
    again = ModuleSummary.from_json(json.loads(json.dumps(found.to_json())))
    assert again == found


def test_relative_imports_and_reexports_resolve() -> None:
    m = model(
        pkg__init__="from .utils.switches import off_switch\n",
        pkg__utils__init__="",
        pkg__utils__switches="""
            import torch
            def off_switch():
                return torch.no_grad()
        """,
        pkg__engine__eval="""
            from .. import off_switch
            from ..utils.switches import off_switch as direct
        """,
    )
    assert m.imports("pkg.engine.eval")["off_switch"] == "pkg.off_switch"
    assert m.switch_mode("pkg.engine.eval", Switch("off_switch", True)) == "off"
    assert m.switch_mode("pkg.engine.eval", Switch("direct", True)) == "off"
    assert m.switch_mode("pkg.engine.eval", Switch("direct", False)) is None  # not a decorator


def test_decorators_that_apply_a_switch_or_hand_back_the_function() -> None:
    m = model(tools="""
        import torch
        def smart(new=True):
            def decorate(fn):
                if torch.is_inference_mode_enabled():
                    return fn
                return (torch.inference_mode if new else torch.no_grad)()(fn)
            return decorate

        def wrap(fn):
            def inner(*a):
                with torch.no_grad():
                    return fn(*a)
            return inner

        def mixed(flag):
            return torch.no_grad() if flag else torch.enable_grad()
    """)
    assert m.switch_mode("tools", Switch("smart", True)) == "off"
    assert m.switch_mode("tools", Switch("wrap", False)) == "off"
    assert m.switch_mode("tools", Switch("mixed", True)) is None  # the alternatives disagree


def test_a_context_manager_of_another_module_sets_the_mode_around_its_yields() -> None:
    """MONAI's ``eval_mode(net)``: a ``@contextmanager`` that yields under ``no_grad`` (inside a
    ``try``) turns grad off for the block that enters it, in the module that imports it; one
    whose yields disagree, or that yields outside any switch, sets nothing."""
    m = model(utils="""
        import contextlib
        from contextlib import contextmanager
        import torch

        @contextmanager
        def eval_mode(*nets):
            try:
                with torch.no_grad():
                    yield [n.eval() for n in nets]
            finally:
                pass

        @contextlib.contextmanager
        def maybe(flag):
            if flag:
                with torch.no_grad():
                    yield
            else:
                yield

        @contextmanager
        def timer():
            yield
    """, finder="""
        from utils import eval_mode, maybe, timer
    """)
    assert m.switch_mode("finder", Switch("eval_mode", True, True)) == "off"
    assert m.switch_mode("finder", Switch("maybe", True, True)) is None
    assert m.switch_mode("finder", Switch("timer", True)) is None
    restored = ModuleSummary.from_json(json.loads(json.dumps(summary("""
        from contextlib import contextmanager
        import torch
        @contextmanager
        def off():
            with torch.no_grad():
                yield
    """).to_json())))
    assert restored.functions[0].entered == ((Switch("torch.no_grad", True),),)


def test_a_loader_class_that_batches_itself_is_plain_whatever_its_public_methods_build(
) -> None:
    """fluke's ``FastDataLoader`` slices host tensors itself; its ``as_dataloader()`` hands out
    a real DataLoader and ``clone()`` a copy of itself, neither of which feeds its iteration.
    A class whose constructor or iteration builds a loader wraps one."""
    m = model(data="""
        from torch.utils.data import DataLoader

        class FastDataLoader:
            def __init__(self, *tensors, batch_size=32):
                self.tensors = tensors
            def __iter__(self):
                return self
            def as_dataloader(self, **kwargs):
                return DataLoader(self.tensors, **kwargs)
            def clone(self):
                return FastDataLoader(*self.tensors)

        class WrappingLoader:
            def __init__(self, dataset):
                self.loader = DataLoader(dataset, batch_size=8)
            def __iter__(self):
                return iter(self.loader)

        class LazyLoader:
            def __iter__(self):
                return iter(self._make_data_loader())
            def _make_data_loader(self):
                return DataLoader(self.dataset)
    """)
    assert m.is_plain_loader("data.FastDataLoader")
    assert not m.is_plain_loader("data.WrappingLoader")
    assert not m.is_plain_loader("data.LazyLoader")


def test_a_helper_that_copies_parts_it_unpacks_pair_by_pair_moves_its_parameter() -> None:
    """torchensemble's ``split_data_target``: ``data, target = element[0], element[1]`` then
    both copied; a value assigned whole to a tuple of names still hands its parts on."""
    found = summary("""
        def split_data_target(element, device, logger=None):
            data, target = element[0], element[1]
            return [data.to(device)], target.to(device)

        def split_whole(batch, device):
            x, y = batch
            return x.cuda(), y

        def keep(element, device, other):
            data, target = other[0], element[1]
            return data.to(device)
    """)
    moves = {f.qualname: f.moves_params for f in found.functions}
    assert moves == {"split_data_target": ("element",), "split_whole": ("batch",),
                     "keep": ("other",)}


def test_grad_mode_from_callers_and_runners_and_cycles() -> None:
    m = model(
        lib="""
            import torch
            def run_quietly(fn, *args):
                with torch.no_grad():
                    return fn(*args)
            def score(model, x):
                return model(x)
            def ping(n):
                return pong(n)
            def pong(n):
                return ping(n)
            def loud(model, x):
                return model(x)
        """,
        main="""
            import torch
            from lib import run_quietly, score, ping, loud
            run_quietly(score, net, batch)
            ping(3)
            with torch.no_grad():
                loud(net, batch)
            loud(net, batch)
        """,
    )
    functions = {f.qualname: f for f in m.summaries["lib"].functions}
    assert m.function_mode("lib", functions["score"]) == "off"
    assert m.function_mode("lib", functions["loud"]) == "on"  # one caller has grad on
    assert m.function_mode("lib", functions["ping"]) in ("on", "unknown")  # a cycle ends


def test_an_override_runs_where_the_base_class_calls_its_method() -> None:
    """A base class's predict loop under no-grad calls ``self.inference``: a subclass's
    override of it, and the same-module helpers only it calls, run there too."""
    m = model(
        engine="""
            import torch
            class BasePredictor:
                @torch.no_grad()
                def stream(self, source):
                    for im in source:
                        yield self.inference(im)
                def inference(self, im):
                    return self.model(im)
                def train_step(self, x):
                    return self.model(x)
        """,
        sam="""
            from engine import BasePredictor
            class Predictor(BasePredictor):
                def inference(self, im):
                    return self._features(im)
                def _features(self, im):
                    return self.model.image_encoder(im)
                def train_step(self, x):
                    return self.model(x)
            class Video(Predictor):
                def inference(self, im):
                    return im
        """,
    )
    functions = {f.qualname: f for f in m.summaries["sam"].functions}
    assert m.function_mode("sam", functions["Predictor.inference"]) == "off"
    assert m.function_mode("sam", functions["Predictor._features"]) == "off"
    assert m.function_mode("sam", functions["Video.inference"]) == "off"  # two levels up
    assert m.function_mode("sam", functions["Predictor.train_step"]) is None  # never called


def test_an_evaluation_hook_nobody_in_the_project_calls_runs_with_grad_off() -> None:
    """Lightning runs ``validation_step`` & co. under no-grad; a project caller decides
    for a hook it calls itself (a trainer's own loop)."""
    m = model(
        lit="""
            import lightning as L
            class Model(L.LightningModule):
                def validation_step(self, batch, batch_idx):
                    return self.model(batch)
                def predict_step(self, batch, batch_idx):
                    return self.model(batch)
                def training_step(self, batch, batch_idx):
                    return self.model(batch)
            def validation_step(batch):
                return batch
        """,
        loop="""
            from lit import Model
            def run(model: Model, loader):
                for batch in loader:
                    model.predict_step(batch, 0)
            run(Model(), [])
        """,
    )
    functions = {f.qualname: f for f in m.summaries["lit"].functions}
    assert m.function_mode("lit", functions["Model.validation_step"]) == "off"
    assert m.function_mode("lit", functions["Model.training_step"]) is None
    assert m.function_mode("lit", functions["validation_step"]) is None  # not a method


def test_call_sites_in_tests_do_not_decide_a_library_functions_mode() -> None:
    """A solver's transform helpers run under its ``@torch.no_grad()`` method; the package's
    tests call them directly with grad on, which says nothing of how the library runs them.
    A library caller with grad on still decides."""
    solver = """
        import torch
        def _inference_transform(model, inputs):
            return model(inputs)
        def _batched_transform(model, inputs):
            return [_inference_transform(model, b) for b in inputs]
        class Solver:
            @torch.no_grad()
            def transform(self, inputs):
                return _batched_transform(self.model, inputs)
    """
    test = """
        from cebra.solver import _batched_transform
        def test_batched(model, inputs):
            assert _batched_transform(model, inputs)
    """
    m = model(cebra__solver=solver, tests__test_solver=test)
    functions = {f.qualname: f for f in m.summaries["cebra.solver"].functions}
    assert m.function_mode("cebra.solver", functions["_batched_transform"]) == "off"
    assert m.function_mode("cebra.solver", functions["_inference_transform"]) == "off"
    m = model(cebra__solver=solver, tests__test_solver=test, cebra__tools="""
        from cebra.solver import _batched_transform
        def embed(model, inputs):
            return _batched_transform(model, inputs)
    """)
    functions = {f.qualname: f for f in m.summaries["cebra.solver"].functions}
    assert m.function_mode("cebra.solver", functions["_batched_transform"]) == "on"


def test_an_override_calling_its_base_method_is_no_caller_of_it() -> None:
    """Every recommender's ``fit`` overrides the base's and starts with ``Base.fit(self,
    data)``: those delegations are the base method's only callers, and the overrides take
    their mode from the base's callers, a cycle that decides nothing (it used to make every
    override's mode "unknown", which silenced MEM002 in their evaluation blocks)."""
    m = model(
        base="""
            class Recommender:
                def fit(self, data):
                    self.data = data
                    return self
        """,
        ngcf="""
            from base import Recommender
            class NGCF(Recommender):
                def fit(self, data):
                    Recommender.fit(self, data)
                    self.model.eval()
                    return self.model(data)
        """,
        gru="""
            from base import Recommender
            class GRU(Recommender):
                def fit(self, data):
                    super().fit(data)
                    return self
        """,
    )
    base = {f.qualname: f for f in m.summaries["base"].functions}
    ngcf = {f.qualname: f for f in m.summaries["ngcf"].functions}
    gru = {f.qualname: f for f in m.summaries["gru"].functions}
    assert m.function_mode("base", base["Recommender.fit"]) is None  # only the overrides
    assert m.function_mode("ngcf", ngcf["NGCF.fit"]) is None  # nobody calls it: not "unknown"
    assert m.function_mode("gru", gru["GRU.fit"]) is None
    # A caller of the base method from outside the overrides still decides.
    m = model(
        base="""
            import torch
            class Recommender:
                def fit(self, data):
                    return self
                def refit_quietly(self, data):
                    with torch.no_grad():
                        return self.fit(data)
        """,
        ngcf="""
            from base import Recommender
            class NGCF(Recommender):
                def fit(self, data):
                    Recommender.fit(self, data)
                    return self.model(data)
        """,
    )
    ngcf = {f.qualname: f for f in m.summaries["ngcf"].functions}
    assert m.function_mode("ngcf", ngcf["NGCF.fit"]) == "off"


def test_returns_clearing_and_data_helpers() -> None:
    m = model(
        util="""
            def zero_grads(params):
                for p in params:
                    p.grad = None
            def reset(opt):
                zero_grads(opt.params)
            def stats(loss):
                return loss.item(), loss
            def cycle(loader):
                while True:
                    for batch in loader:
                        yield batch
            def to_device(batch, device):
                return {k: v.to(device) for k, v in batch.items()}
        """,
        train="""
            from util import reset, stats, cycle, to_device
            reset(opt)
            stats(loss)
            cycle(loader)
            to_device(batch, device)
        """,
    )
    view = m.view("train")
    assert {"reset"} <= view.grad_clearers
    fact = view.returns_of("stats")
    assert fact is not None and fact.detached == (True, False) and fact.is_tuple
    assert view.wrappers["cycle"] == (0, "loader")
    assert view.movers["to_device"] == ((0, "batch"),)


def _write_package(folder: Path, sources: dict[str, str]) -> dict[str, str]:
    """The files of a package written out; file name -> path."""
    folder.mkdir()
    paths = {}
    for name, source in sources.items():
        paths[name] = str(folder / name)
        (folder / name).write_text(textwrap.dedent(source), encoding="utf-8")
    return paths


def test_copy_helpers_no_gate_selected_are_summarised_when_a_copying_module_calls_them(
        tmp_path: Path) -> None:
    """A file that may define a copy helper but holds no rule's trigger is not summarised by
    the scan; build_views asks for it when a module whose copies are followed names it."""
    sources = {
        "__init__.py": "",
        "train.py": """
            from pkg.transfer import move_pair
            from sibling import push
            def fit(loader, device):
                for pair in loader:
                    move_pair(pair, device)
                    push(pair, device)
            """,
        "transfer.py": """
            def move_pair(pair, device):
                return [t.to(device) for t in pair]
            """,
        # Imported as Python finds it beside a script run from its folder.
        "sibling.py": "def push(batch, device):\n    return batch.cuda()\n",
        "unrelated.py": "def shift(x, device):\n    return x.to(device)\n",
    }
    paths = _write_package(tmp_path / "pkg", sources)
    summaries = {paths[n]: summary(sources[n]) for n in ("__init__.py", "train.py")}
    asked: list[list[str]] = []
    names: dict[str, frozenset[str]] = {}

    def fetch(wanted: list[str], hubs: frozenset[str],
              looked_up: Mapping[str, frozenset[str]]) -> dict[str, ModuleSummary]:
        asked.append(wanted)
        names.update(looked_up)
        return {p: summary(Path(p).read_text(encoding="utf-8")) for p in wanted}

    known = list(paths.values())
    views, _ = build_views(summaries, [paths["train.py"]], known,
                           copying=[paths["train.py"]], fetch=fetch)
    assert asked == [[paths["sibling.py"], paths["transfer.py"]]]  # not `unrelated`
    # What is looked up in each: the runner reads a file only for a function of that name.
    assert names == {paths["sibling.py"]: {"push"}, paths["transfer.py"]: {"move_pair"}}
    assert views[paths["train.py"]].movers["move_pair"] == ((0, "pair"),)
    assert views[paths["train.py"]].movers["push"] == ((0, "batch"),)
    asked.clear()
    views, _ = build_views(summaries, [paths["train.py"]], known, fetch=fetch)
    assert asked == []  # train's copies are not followed (no rule that does applies to it)
    assert not views[paths["train.py"]].movers


def test_star_import_hubs_are_summarised_on_demand_round_after_round(tmp_path: Path) -> None:
    """``from .hub import *`` where ``hub`` re-exports ``helpers`` by another star import, no
    file of the two selected by the scan: the hub is summarised though it copies nothing (the
    name lives on in it), then the module it names, where the copy helper is."""
    sources = {
        "__init__.py": "",
        "loop.py": """
            from .hub import *
            def fit(loader, device):
                for batch in loader:
                    to_device(batch, device)
            """,
        "hub.py": "from .helpers import *\n",
        "helpers.py": "def to_device(batch, device):\n    return batch.to(device)\n",
    }
    paths = _write_package(tmp_path / "pkg", sources)
    summaries = {paths[n]: summary(sources[n]) for n in ("__init__.py", "loop.py")}
    asked: list[tuple[list[str], frozenset[str]]] = []

    def fetch(wanted: list[str], hubs: frozenset[str],
              looked_up: Mapping[str, frozenset[str]]) -> dict[str, ModuleSummary]:
        asked.append((wanted, hubs))
        texts = {p: Path(p).read_text(encoding="utf-8") for p in wanted}
        return {p: summary(t) for p, t in texts.items() if p in hubs or ".to(" in t}

    views, _ = build_views(summaries, [paths["loop.py"]], list(paths.values()),
                           copying=[paths["loop.py"]], fetch=fetch)
    assert asked[0] == ([paths["hub.py"]], frozenset({paths["hub.py"]}))
    assert asked[1] == ([paths["helpers.py"]], frozenset({paths["helpers.py"]}))
    assert views[paths["loop.py"]].movers["to_device"] == ((0, "batch"),)


def test_the_view_memo_forgets_lookups_a_summary_added_since_may_answer(
        tmp_path: Path) -> None:
    """What a module looks up in vain is kept across fetch rounds and calls, but not past a
    summary of a module a lookup leads into, nor past one that a summarised module
    star-imports (``loop`` -> ``hub`` -> ``helpers``: the names ``helpers`` gives ``loop``
    show in no lookup of ``loop`` before it is summarised)."""
    sources = {
        "__init__.py": "",
        "loop.py": """
            from .hub import *
            from .misc import shuffle
            def fit(loader, device):
                for batch in loader:
                    to_device(batch, device)
                    shuffle(batch)
            """,
        "hub.py": "from .helpers import *\n",
        "helpers.py": "def to_device(batch, device):\n    return batch.to(device)\n",
        "misc.py": "def shuffle(batch):\n    return batch\n",
        "other.py": "def unused():\n    return 1\n",
    }
    paths = _write_package(tmp_path / "pkg", sources)
    summaries = {p: summary(sources[n]) for n, p in paths.items()}
    loop = paths["loop.py"]

    def undefined(names: tuple[str, ...], memo: ViewMemo) -> set[str]:
        present = {paths[n]: summaries[paths[n]] for n in names}
        memo.update(present)
        module = memo.places.of(loop)[1]
        model = ProjectModel({memo.places.of(p)[1]: s for p, s in present.items()})
        return memo.undefined(loop, model.undefined_names, module.name)

    base = ("__init__.py", "loop.py", "hub.py")
    for added, kept in (("other.py", True), ("misc.py", False), ("helpers.py", False)):
        memo = ViewMemo()
        before = undefined(base, memo)
        after = undefined((*base, added), memo)
        fresh = undefined((*base, added), ViewMemo())
        assert after == fresh
        assert (after is before) == kept, added


def test_a_singledispatch_mover_moves_what_its_registered_implementations_move() -> None:
    """baal's ``to_cuda``: the base returns its argument, the registered implementation for
    tensors calls ``.cuda()``; a helper registered with nothing that moves stays a non-mover."""
    m = model(
        cuda_utils="""
            from functools import singledispatch
            import torch
            @singledispatch
            def to_cuda(data):
                return data
            @to_cuda.register(torch.Tensor)
            def _to_cuda_tensor(data):
                return data.cuda()
            @singledispatch
            def describe(data):
                return str(data)
            @describe.register(torch.Tensor)
            def _describe_tensor(data):
                return repr(data.shape)
        """,
        train="""
            from cuda_utils import to_cuda, describe
            to_cuda(batch)
            describe(batch)
        """,
    )
    view = m.view("train")
    assert view.movers["to_cuda"] == ((0, "data"),)
    assert "describe" not in view.movers


def test_a_helper_that_delegates_the_copy_or_applies_a_copying_callback_moves() -> None:
    """A sample-preparing helper hands the batch to a same-file helper that applies a
    nested ``.cuda()`` callback to every tensor of it: each level moves its argument. A
    helper that never copies, or copies to the host (``.to(device="cpu")``), moves nothing."""
    m = model(
        data_utils="""
            import torch
            def apply_to_sample(f, sample):
                if torch.is_tensor(sample):
                    return f(sample)
                return {k: apply_to_sample(f, v) for k, v in sample.items()}
            def move_to_cuda(sample):
                def _move(tensor):
                    return tensor.cuda()
                return apply_to_sample(_move, sample)
            def prepare_sample(samples, cuda_enabled=True):
                if cuda_enabled:
                    samples = move_to_cuda(samples)
                return samples
            def log_sample(sample):
                return apply_to_sample(print, sample)
            def to_host(tensor):
                return tensor.detach().to(device="cpu")
            def sample_to_host(sample):
                return apply_to_sample(to_host, sample)
        """,
        task="""
            from data_utils import prepare_sample, move_to_cuda, apply_to_sample, log_sample
            from data_utils import sample_to_host, to_host
            prepare_sample(batch)
            move_to_cuda(batch)
            apply_to_sample(str, batch)
            log_sample(batch)
            sample_to_host(batch)
            to_host(batch)
        """,
    )
    view = m.view("task")
    assert view.movers["prepare_sample"] == ((0, "samples"),)
    assert view.movers["move_to_cuda"] == ((0, "sample"),)
    assert "apply_to_sample" not in view.movers
    assert "log_sample" not in view.movers
    assert "sample_to_host" not in view.movers and "to_host" not in view.movers


def test_needs_summary_selects_files_with_cross_file_facts() -> None:
    assert needs_summary(b"def f():\n    return torch.inference_mode()\n")
    assert needs_summary(b"class L:\n    def __call__(self, x):\n        return x.detach()\n")
    # Lightning runs it without grad: what it calls is called the project's way there.
    assert needs_summary(b"class E:\n    def predict_step(self, batch, i):\n"
                         b"        return self.model.predict(batch)\n")
    assert not needs_summary(b"import torch\nx = torch.zeros(3)\n")
    # A possible copy helper is summarised only once a module is seen to call it.
    helper = b"def batch_to_device(batch, device):\n    return batch.to(device)\n"
    assert not needs_summary(helper) and may_define_mover(helper)
    assert may_define_mover(b"def prepare(samples, cuda=True):\n    return samples.cuda()\n")
    assert not may_define_mover(b"def shift(x, offset):\n    return x + offset\n")
    # And only when it defines a function of a name looked up in it (a copy helper), not
    # for a class or a constant it holds.
    assert defines_one_of(helper, {"batch_to_device", "Net"})
    assert defines_one_of(b"class B:\n    async def  to_gpu (self): ...\n", {"to_gpu"})
    assert defines_one_of(b"def to_gpu[T](x: T) -> T: ...\n", {"to_gpu"})
    assert not defines_one_of(helper, {"Net", "DEVICE", "batch"})
    assert not defines_one_of(b"class Net:\n    pass\nDEVICE = 'cuda'\n", {"Net", "DEVICE"})
    assert not defines_one_of(helper, set())


def test_store_keeps_summaries_and_ignores_a_corrupt_file(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    return 1\n", encoding="utf-8")
    st = os.stat(source)
    store = SummaryStore(tmp_path / "cache")
    store.put(str(source), st, "abc", summary("def f():\n    return 1\n"))
    assert store.save() is None
    again = SummaryStore(tmp_path / "cache")
    assert again.known(str(source), st) == "abc"
    assert again.summaries["abc"] == store.summaries["abc"]
    assert again.file is not None
    again.file.write_text('{"format": 1, "records": {"x": 5}}', encoding="utf-8")
    assert SummaryStore(tmp_path / "cache").records == {}


def test_layout_import_roots_and_package_siblings(tmp_path: Path) -> None:
    pkg = tmp_path / "repo" / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for path in (pkg / "__init__.py", pkg / "sub" / "__init__.py", pkg / "sub" / "m.py",
                 pkg / "a.py", tmp_path / "repo" / "script.py"):
        path.write_text("", encoding="utf-8")
    root, name = located(pkg / "sub" / "m.py")
    assert root == tmp_path / "repo" and name == ModuleName("pkg.sub.m", False)
    assert located(pkg / "__init__.py")[1] == ModuleName("pkg", True)
    assert located(tmp_path / "repo" / "script.py")[1] == ModuleName("script", False)
    siblings = {p.name for p in package_files([pkg / "a.py"])}
    assert siblings == {"__init__.py", "m.py", "a.py"}
    assert package_files([tmp_path / "repo" / "script.py"]) == []
    assert package_files([pkg / "a.py"], covered=[pkg]) == []
    # A script brings what it imports from beside it: a package, a module, a namespace
    # folder of modules; not a folder without Python files, nor what is not there.
    repo = tmp_path / "repo"
    (repo / "helpers.py").write_text("", encoding="utf-8")
    (repo / "nsp").mkdir()
    (repo / "nsp" / "tool.py").write_text("", encoding="utf-8")
    (repo / "data").mkdir()
    (repo / "data" / "x.csv").write_text("", encoding="utf-8")
    (repo / "train.py").write_text(
        "import os, helpers as h\nfrom pkg.sub import m\nfrom nsp.tool import t\n"
        "import data\nimport torch  # not beside it\n", encoding="utf-8")
    brought = {p.relative_to(repo).as_posix() for p in package_files([repo / "train.py"])}
    assert brought == {"helpers.py", "nsp/tool.py", "pkg/__init__.py", "pkg/a.py",
                       "pkg/sub/__init__.py", "pkg/sub/m.py"}
    assert package_files([repo / "train.py"], covered=[repo]) == []


DATA_SHAPES = '''
def to_device(batch, device):
    return {k: v.to(device) for k, v in batch.items()}

def lambda_mover(batch, device):
    return apply(batch, lambda t: batch.cuda())

def guarded(batch, device):
    match batch:
        case list() if batch.to(device):
            pass

def target_mover(batch, device, out):
    for out[batch.to(device)] in range(3):
        pass

def nested(batch, device):
    def inner():
        return batch.cuda()
    return inner

def in_class(batch):
    class Local:
        moved = batch.cuda()
    return Local

def wrapper(loader):
    for item in loader:
        yield item

@decorate(lambda: 1)
def decorated(batch, device):
    return batch

def plain(batch, device):
    return batch + device

def unpacked(pair, device):
    inputs, targets = pair
    return inputs.to(device), targets.to(device)

def picked(batch, device):
    images = batch["image"]
    return images.to(device)

def sized(batch, device):
    size = len(batch)
    return torch.zeros(size).to(device)

def casts(net_output, gt):
    # a metric helper: the target only changes dtype (nnU-Net's get_tp_fp_fn_tn shape)
    y_onehot = gt.to(torch.float32)
    return net_output.to(dtype=torch.half) * y_onehot.to(net_output.dtype)

def rebuilt(data_loader, device):
    # each batch's lists become fresh host tensors before the copy (chemprop's train loop)
    for batch in data_loader:
        masks = batch.masks()
        weights = batch.weights()
        masks = torch.tensor(masks, dtype=torch.bool)
        weights = [torch.tensor(w).unsqueeze(1) for w in weights]
        model(masks.to(device), [w.to(device) for w in weights])

def rebuilt_later(data_loader, device):
    # the copy comes before the rebinding: the batch's own tensor
    for batch in data_loader:
        masks = batch.masks()
        model(masks.to(device))
        masks = torch.tensor(masks)
'''


def test_data_facts_are_looked_for_only_where_they_can_be() -> None:
    """The summary walks a function again for its data facts only when its statements show
    a copy, a yield or code they do not read; the facts are those of walking every function."""
    import ast

    from memlint.project.summary import _data_facts, _params

    summary = summarise_source(DATA_SHAPES.encode())
    assert summary is not None
    tree = ast.parse(DATA_SHAPES)
    nodes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    by_name = {f.qualname.rsplit(".", 1)[-1]: f for f in summary.functions}
    for name, node in nodes.items():
        expected = _data_facts(node, _params(node.args))
        function = by_name[name]
        assert function.moves_params == expected.get("moves_params", ()), name
        assert function.yields_param == expected.get("yields_param", ""), name
    assert by_name["to_device"].moves_params == ("batch",)
    assert by_name["lambda_mover"].moves_params == ("batch",)
    assert by_name["guarded"].moves_params == ("batch",)
    assert by_name["target_mover"].moves_params == ("batch",)
    assert by_name["nested"].moves_params == ("batch",)
    assert by_name["in_class"].moves_params == ("batch",)
    assert by_name["wrapper"].yields_param == "loader"
    assert by_name["plain"].moves_params == ()
    assert by_name["unpacked"].moves_params == ("pair",)
    assert by_name["picked"].moves_params == ("batch",)
    assert by_name["sized"].moves_params == ()
    assert by_name["casts"].moves_params == ()
    assert by_name["rebuilt"].moves_params == ()
    assert by_name["rebuilt_later"].moves_params == ("data_loader",)


def test_returned_accuracies_built_from_indices_and_comparisons_are_detached() -> None:
    summary = summarise_source(textwrap.dedent('''
        import torch
        import torch.nn.functional as F

        def loss_acc(output, labels, targets):
            preds = output.max(1)[1].type_as(labels)
            correct = preds.eq(labels).double()[targets]
            loss = F.nll_loss(output[targets], labels[targets])
            return loss, correct.sum() / len(targets)

        def top_indices(scores, k):
            _, order = scores.topk(k)
            best = torch.max(scores, 1).indices
            return scores.topk(k)[1], best

        def kept(output):
            return output.max(1)[0], output.sum()
    ''').encode())
    assert summary is not None
    returns = {f.qualname: f.returns[0].detached for f in summary.functions}
    assert returns["loss_acc"] == (False, True)
    assert returns["top_indices"] == (True, True)
    assert returns["kept"] == (False, False)


def test_a_base_class_hands_its_overridable_method_a_loader() -> None:
    """``self._predict(loader)`` in a base class: the subclass's override gets a loader in
    that parameter, whatever it is called; values that are no loader give nothing."""
    m = model(
        base="""
            from torch.utils.data import DataLoader
            from .data import make_dataloader
            class Base:
                def predict(self, data):
                    dataset_iter = make_dataloader(data, 32)
                    return self._predict(dataset_iter, scale=2)
                def evaluate(self, data):
                    return self._score(DataLoader(data), self.val_loader)
                def refit(self, data):
                    return self._fit(data, self.epochs)
        """,
        sub="""
            from base import Base
            class Sub(Base):
                def _predict(self, items, scale):
                    return [x.cuda() for x in items]
                def _score(self, first, second):
                    return first, second
                def _fit(self, data, epochs):
                    return data
        """,
    )
    sites = {s.callee: s for f in m.summaries["base"].functions for s in f.sites}
    assert sites["self._predict"].loader_args == ("0",)
    assert sites["self._score"].loader_args == ("0", "1")
    assert sites["self._fit"].loader_args == ()
    assert m.loader_params("sub") == {"Sub._predict": ("items",),
                                      "Sub._score": ("first", "second")}
    assert m.fed_by_bases("sub") and not m.fed_by_bases("base")


def test_a_star_import_binds_the_public_names_of_the_module() -> None:
    """``from .utils import *`` binds what ``utils`` defines and imports, not its private
    names; a module not summarised yet is asked for by a marker no Python name can be."""
    m = model(
        pkg__init__="",
        pkg__utils="""
            import torch
            from .helpers import pad
            def move_to_device(batch, device):
                return batch.to(device)
            def _private():
                pass
        """,
        pkg__helpers="def pad(x):\n    return x\n",
        pkg__trainer="""
            from .utils import *
            def move_to_device(batch):
                return batch
        """,
        pkg__loop="from .utils import *\nfrom .absent import *\n",
    )
    table = m.imports("pkg.loop")
    assert table["move_to_device"] == "pkg.utils.move_to_device"
    assert table["pad"] == "pkg.helpers.pad"
    assert "_private" not in table
    assert table["*pkg.absent"] == "pkg.absent.*"
    assert "pkg.absent.*" in m.undefined_names("pkg.loop")
    # A definition of the module itself wins over the star import.
    assert m.imports("pkg.trainer")["move_to_device"] == "pkg.trainer.move_to_device"


def test_a_batch_rebound_from_itself_on_the_host_is_still_handed_to_the_hook() -> None:
    """``batch = postprocess(batch)`` keeps the loader's batch on the host: the method it is
    handed to still gets batch data; ``batch = batch.to(device)`` or other data does not."""
    m = model(base="""
        class Base:
            def train(self, dataloader, post, device):
                for batch in dataloader:
                    if post is not None:
                        batch = post(batch)
                    self.train_on_batch(batch)
                for batch in dataloader:
                    batch = batch.to(device)
                    self.eval_on_batch(batch)
                for batch in dataloader:
                    batch = self.other
                    self.score_batch(batch)
    """)
    sites = {s.callee: s for f in m.summaries["base"].functions for s in f.sites}
    assert sites["self.train_on_batch"].batch_args == ("0",)
    assert sites["self.eval_on_batch"].batch_args == ()
    assert sites["self.score_batch"].batch_args == ()


def test_a_loop_whose_header_draws_batches_hands_them_to_the_hook() -> None:
    """``for batch_index, batch_data in enumerate(data):`` draws batches whatever the
    iterable is called (fuxictr's trainer): the method it hands them to gets batch data, as
    from a loop over something named like a loader; a plain ``enumerate`` does not."""
    m = model(base="""
        class Base:
            def train_epoch(self, data_generator):
                for batch_index, batch_data in enumerate(data_generator):
                    self.train_step(batch_data)
                for i, item in enumerate(data_generator):
                    self.score(item)
    """)
    sites = {s.callee: s for f in m.summaries["base"].functions for s in f.sites}
    assert sites["self.train_step"].batch_args == ("0",)
    assert sites["self.score"].batch_args == ()


def test_a_loop_over_a_name_bound_from_a_loader_hands_its_batches_to_the_hook() -> None:
    """``it = tqdm(self.test_loader)`` (or the loader itself, by an ``if``) before ``for
    batch in it:`` (deepod's ``_inference``): the hook gets the loader's batches; a name
    bound from other data does not make a loader loop."""
    m = model(base="""
        class Base:
            def infer(self, verbose, rows):
                if verbose:
                    it = tqdm(self.test_loader)
                else:
                    it = self.test_loader
                for batch in it:
                    self.inference_forward(batch)
                other = rows
                for row in other:
                    self.score(row)
    """)
    sites = {s.callee: s for f in m.summaries["base"].functions for s in f.sites}
    assert sites["self.inference_forward"].batch_args == ("0",)
    assert sites["self.inference_forward"].batch_source == "self.test_loader"
    assert sites["self.score"].batch_args == ()


def test_the_methods_whose_loaders_a_base_loops_over_are_known_to_the_hooks() -> None:
    """The base draws its batches from what the object's own methods return, stored on it
    (``self.train_loader, self.net = self.training_prepare(X)``) or bound to a local
    (``loader, _ = self.eval_prepare(X)``): a subclass elsewhere whose hooks get those
    batches learns which of its methods build the loaders."""
    m = model(
        pkg__init__="",
        pkg__base="""
            class Base:
                def fit(self, X):
                    self.train_loader, self.net = self.training_prepare(X)
                    for batch in self.train_loader:
                        self.training_forward(batch)

                def evaluate(self, X):
                    loader, _ = self.eval_prepare(X)
                    for batch in loader:
                        self.eval_forward(batch)
        """,
        pkg__model="""
            from .base import Base

            class Model(Base):
                def training_prepare(self, X):
                    return DataLoader(X), None

                def eval_prepare(self, X):
                    return DataLoader(X), None

                def training_forward(self, batch):
                    return batch

                def eval_forward(self, batch):
                    return batch
        """,
    )
    view = m.view("pkg.model")
    assert view.batch_makers == {"Model.training_forward": ("training_prepare",),
                                 "Model.eval_forward": ("eval_prepare",)}
    assert m.summaries["pkg.base"].classes[0].made_by == (
        ("net", "training_prepare"), ("train_loader", "training_prepare"))


def test_torch_names_a_star_import_binds_resolve_in_the_file() -> None:
    """``from .dqn import *`` where ``dqn`` imports ``torch as t``: the file's analyses read
    ``t.linspace`` as ``torch.linspace`` (other names the star import binds stay as
    written, and a file without a star import is left alone)."""
    import libcst as cst

    from memlint.analysis import ModuleAnalysis

    m = model(
        pkg__init__="",
        pkg__dqn="import torch as t\nfrom torch import nn\ndef helper():\n    pass\n",
        pkg__rainbow="from .dqn import *\n",
    )
    view = m.view("pkg.rainbow")
    source = "from .dqn import *\nsupport = t.linspace(0, 1, 5)\nhelper()\n"
    analysis = ModuleAnalysis(cst.parse_module(source), view)
    call = cst.parse_expression("t.linspace")
    assert analysis.imports.qualified_name(call) == "torch.linspace"
    assert analysis.imports.qualified_name(cst.parse_expression("nn.Linear")) == (
        "torch.nn.Linear")
    assert analysis.imports.qualified_name(cst.parse_expression("helper")) == "helper"
    plain = ModuleAnalysis(cst.parse_module("support = t.linspace(0, 1, 5)\n"), view)
    assert plain.imports.qualified_name(call) == "t.linspace"


def test_a_model_kept_on_the_object_is_a_module_class_of_the_view() -> None:
    """``self.model = Scorer(n)`` with ``Scorer`` imported from a sibling inside the method:
    the view knows an ``nn.Module`` class is used here (the file imports no torch itself);
    before the sibling is summarised, the run is asked to summarise it."""
    wrapper = """
        class Recommender:
            def fit(self, n):
                from .net import Scorer
                self.model = Scorer(n)
            def score(self, history):
                self.model.eval()
                return self.model(history).detach()
    """
    alone = model(rec__init__="", rec__neural=wrapper)
    assert "rec.net.Scorer" in alone.unsummarised_callees()
    assert alone.view("rec.neural").module_classes == frozenset()
    full = model(rec__init__="", rec__neural=wrapper, rec__net="""
        from torch import nn
        class Scorer(nn.Module):
            def forward(self, x):
                return x
    """)
    assert "rec.net.Scorer" not in full.unsummarised_callees()
    assert full.view("rec.neural").module_classes == frozenset({"rec.net.Scorer"})


def test_a_returned_container_is_detached_only_if_what_goes_into_it_is() -> None:
    found = summary('''
        from collections import OrderedDict
        import torch

        def logged(losses):
            with torch.no_grad():
                log = OrderedDict()
                for name, value in losses.items():
                    log[name] = value.mean().item()
                return log

        def kept(losses):
            out = {}
            for name, value in losses.items():
                out[name] = value
            return out

        def appended(losses):
            out = []
            for value in losses:
                out.append(value)
            return out

        def summed(losses):
            total = 0
            for value in losses:
                total += value
            return total

        def unpacked(model, x):
            loss = 0
            loss, aux = model(x)
            return loss

        def looped(outputs):
            last = None
            for last in outputs:
                pass
            return last
    ''')
    detached = {f.qualname: f.returns[0].detached for f in found.functions}
    assert detached["logged"] == (True,)
    assert detached["kept"] == (False,)
    assert detached["appended"] == (False,)
    assert detached["summed"] == (False,)
    assert detached["unpacked"] == (False,)
    assert detached["looped"] == (False,)


def test_a_method_inherited_from_a_base_in_another_module_tells_what_it_returns() -> None:
    m = model(
        base="""
            import torch
            class BaseModel:
                def reduce_loss_dict(self, loss_dict):
                    with torch.no_grad():
                        log = {}
                        for k, v in loss_dict.items():
                            log[k] = v.mean().item()
                        return log
                def keep(self, loss_dict):
                    return loss_dict
        """,
        sr="""
            from base import BaseModel
            class SRModel(BaseModel):
                def optimize(self, losses):
                    self.log = self.reduce_loss_dict(losses)
                    self.kept = self.keep(losses)
                def reduce_loss_dict(self, losses):
                    return losses
            class GANModel(BaseModel):
                def optimize(self, losses):
                    self.log = self.reduce_loss_dict(losses)
        """,
    )
    view = m.view("sr")
    assert view.inherited_return("SRModel", "reduce_loss_dict") is None  # its own method
    assert view.inherited_return("SRModel", "keep") is None  # a parameter handed back
    fact = view.inherited_return("GANModel", "reduce_loss_dict")
    assert fact is not None and fact.detached == (True,)


def test_a_models_predict_api_is_known_when_the_project_only_calls_it_without_grad() -> None:
    m = model(
        nets="""
            from torch import nn
            class MF(nn.Module):
                def predict(self, u, i):
                    return self.forward(u, i)
            class GCN(nn.Module):
                def predict(self, graph):
                    return self.forward(graph)
        """,
        trainer="""
            import torch
            @torch.no_grad()
            def evaluate(model, loader):
                return [model.predict(u, i) for u, i in loader]
            def rank(model, users):
                with torch.no_grad():
                    return model.predict(users, None)
        """,
        serve="""
            def serve(gcn, graph):
                return gcn.predict(graph)
        """,
    )
    # evaluate() and rank() show how the package calls predict: serve() does not undo that
    assert m.view("nets").predict_without_grad == frozenset({"predict"})
    m = model(nets="""
            from torch import nn
            class MF(nn.Module):
                def predict(self, u, i):
                    return self.forward(u, i)
        """,
        demo="""
            def show(model, u, i):
                print(model.predict(u, i))
        """)
    assert m.view("nets").predict_without_grad == frozenset()  # only called with grad on
    m = model(nets="""
            from torch import nn
            class MF(nn.Module):
                def predict(self, u, i):
                    return self.forward(u, i)
        """)
    assert m.view("nets").predict_without_grad == frozenset()  # nobody calls it: users will


def test_a_method_that_switches_grad_off_around_its_own_work_runs_without_grad() -> None:
    # nnU-Net's SegmentationNetwork.predict_3D: checks first, then every call on the object
    # inside `with torch.no_grad():`; a subclass built in another module inherits it.
    m = model(
        nets="""
            import torch
            from torch import nn
            class SegmentationNetwork(nn.Module):
                def predict_3D(self, x, mixed_precision=False):
                    assert len(x.shape) == 4
                    self.eval()
                    with torch.no_grad():
                        return self._internal_predict(x)
                def half_way(self, x):
                    y = self.encoder(x)
                    with torch.no_grad():
                        return self.decoder(y)
                def nothing_of_its_own(self, x):
                    with torch.no_grad():
                        return len(x)
            class UNet(SegmentationNetwork):
                pass
        """,
        trainer="""
            from .nets import UNet
            class Trainer:
                def initialize(self):
                    self.network = UNet()
        """,
    )
    off = m.methods_without_grad("nets.UNet")
    assert "predict_3D" in off
    assert "half_way" not in off  # the encoder runs with grad on
    assert "nothing_of_its_own" not in off  # no call on the object at all


def test_values_made_without_grad_or_from_detached_ones_are_returned_detached() -> None:
    """Weights computed under no-grad, a detached output reshaped in place, torch's
    reductions of detached values, and a function annotated to return host values."""
    found = summary('''
        import torch
        from torch import no_grad

        def awr(self, action, state, beta):
            loss = self.model_loss(action, state)
            with torch.no_grad():
                q = self.critic(action, state)
                weight = torch.exp(beta * (q - self.critic.v(state)))
            clamped = weight.clamp(max=100.0)
            ratio = torch.mean(torch.tensor(clamped < weight, dtype=torch.float32))
            return torch.mean(loss * clamped), torch.mean(weight), ratio

        def energy(self, action, state):
            e = self.critic(action, state).detach()
            e = e.reshape(action.shape[0], -1).squeeze(dim=-1)
            return torch.mean(e), self.model_loss(action, state)

        def under(self, x):
            with no_grad():
                return self.net(x)

        def reassigned(x):
            y = x.float()
            y = y * 2
            return y

        def mean_loss(losses) -> float:
            return sum(losses) / len(losses)

        def parts(losses) -> "Dict[str, float]":
            return {k: v for k, v in losses.items()}

        def tensors(losses) -> "Dict[str, Any]":
            return dict(losses)

        def softmaxed(self, action, state, beta: float = 1.0):
            e = self.critic(action, state).detach()
            relative = torch.nn.Softmax(dim=1)(e * beta)
            return torch.mean(relative), self.model_loss(action, state)

        def scaled(self, x, w):
            e = self.critic(x).detach()
            return e * w
    ''')
    detached = {f.qualname: f.returns[0].detached for f in found.functions}
    assert detached["awr"] == (False, True, True)
    assert detached["energy"] == (True, False)
    assert detached["under"] == (True,)
    assert detached["reassigned"] == (False,)  # made from a parameter: not known
    assert detached["mean_loss"] == (True,)
    assert detached["parts"] == (True,)
    assert detached["tensors"] == (False,)
    assert detached["softmaxed"] == (True, False)  # a number parameter, a weightless module
    assert detached["scaled"] == (False,)  # `w` may be a tensor


def test_the_projects_one_method_of_a_name_tells_what_a_call_on_anything_returns() -> None:
    """`self.model["policy"].awr_loss(x)`: no name types the receiver; the project defines
    one method of that name. A name two classes define, or a protocol name, tells nothing."""
    m = model(
        policy="""
            import torch
            class Policy:
                def awr_loss(self, x):
                    loss = self.net(x)
                    with torch.no_grad():
                        w = self.critic(x)
                    return loss, torch.mean(w)
                def forward(self, x):
                    return self.net(x).detach()
                def shared(self, x):
                    return x.detach()
            class Other:
                def shared(self, x):
                    return x.item()
        """,
        algo="""
            class Algorithm:
                def train(self, data):
                    for x in data:
                        loss, w = self.model["policy"].awr_loss(x)
                        self.agent.forward(x)
                        self.agent.shared(x)
        """,
    )
    view = m.view("algo")
    fact = view.method_returns.get("awr_loss")
    assert fact is not None and fact.detached == (False, True) and fact.is_tuple
    assert "forward" not in view.method_returns
    assert "shared" not in view.method_returns
