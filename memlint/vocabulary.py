"""PyTorch names the analyses recognise, shared by the per-file analyses (libcst) and the
project index (stdlib ``ast``, which must not import libcst), so both read code alike."""

from __future__ import annotations

import re
from typing import Literal

GradMode = Literal["off", "on", "unknown"]

# `except torch.OutOfMemoryError`, `torch.cuda.OutOfMemoryError`, `from torch.cuda import
# OutOfMemoryError`: the last part of the dotted name is enough (MEM006).
OOM_TYPE = "OutOfMemoryError"
# A `RuntimeError` handler is an OOM handler only when its strings or comments say so.
OOM_TEXT = re.compile(r"out of memory|\boom\b|outofmemory", re.IGNORECASE)
BROAD_ERROR_TYPES = frozenset({"RuntimeError", "Exception", "BaseException"})
# A name that holds a dtype, not a device (`.to(dtype)`, `.to(self.half)`), and torch's dtypes.
DTYPE_NAME = re.compile(r"dtype$|^(?:half|float|precision)$", re.IGNORECASE)
TORCH_DTYPES = frozenset({
    "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8",
    "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
    "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
})
# A name that holds (or makes) a DataLoader: `train_loader`, `DataLoader`, `dl`, `val_dl_iter`;
# not `downloader`/`uploader`. Every loader the analyses follow starts at such a name.
LOADER_NAME = re.compile(r"(?<!down)(?<!up)loader|(?:^|_)dl(?:$|_)", re.IGNORECASE)
# The index of a loop that draws batches, by its name: `for batch_idx, (x, y) in
# enumerate(train_data):` (the PyTorch MNIST example's header, copied into FedML's trainers,
# whose `train_data` is a DataLoader built in another module). Its iterable is taken for a loader.
_BATCH_INDEX = r"(?:batch_?(?:idx|index|id|i|ind|num|no|nb)|i_batch|ibatch|b_idx|bidx)"
BATCH_INDEX = re.compile(rf"^{_BATCH_INDEX}$", re.IGNORECASE)
# The item such a loop binds whole, named for a batch: `for batch_idx, batch_data in
# enumerate(data_generator):` (fuxictr's trainer) draws batches as surely as one that
# unpacks `(x, y)`.
BATCH_ITEM = re.compile(
    r"^(?:[a-z]+_)?(?:mini_?)?batch(?:_(?:data|dict|inputs?|samples?|items?|tensors?))?$",
    re.IGNORECASE)
# Calls that hand their first iterable's items through unchanged (for loader provenance):
# progress bars, `metric_logger.log_every(loader, freq, header)`, `itertools.cycle`.
PASS_THROUGH = frozenset({
    "enumerate", "tqdm", "tqdm_notebook", "islice", "iter", "track", "log_every", "cycle",
})
# Progress reporters defined elsewhere that take the loader beside other arguments
# (`LogProgress(logger, loader, total=n)`, `ProgressBar(loader)`, `maybe_tqdm(loader,
# desc=d, verbose=v)`): they hand on its items.
PROGRESS_WRAPPER = re.compile(r"progress|progbar|tqdm", re.IGNORECASE)
# What a loop that trains on the items it unpacks iterates, by the name it is kept under:
# data for training or evaluation (`self.local_training_data`, `train_queue`, `dataset`),
# not an agent's experience (`env_batches`, `rollouts`, `replay_buffer`), which no loader
# pinned.
_DATA_WORDS = re.compile(r"data|train|queue|batch|iter|set", re.IGNORECASE)
_EXPERIENCE_WORDS = re.compile(
    r"env|rollout|buffer|replay|memory|episode|traj|transition|experience", re.IGNORECASE)


def names_training_data(name: str) -> bool:
    """Is ``name`` (a variable or attribute, its last part) named for a dataset's batches?"""
    return (_DATA_WORDS.search(name) is not None
            and _EXPERIENCE_WORDS.search(name) is None)


# Where a file's text may hold either (MEM003's prefilter, in any case): `loader`, `dl` not
# followed by a letter or digit, a loop header unpacking a batch index first (`for batch_idx,`:
# the index alone, `for batch_idx in range(n)`, draws nothing), a backward pass (a loop that
# trains on what it unpacks draws batches, whatever its data is called), or a framework's
# batch hook (`def feed_data(`, `def set_input(`: :func:`framework_batch_feed`). Every file
# whose code has such a name or header matches; `batching`, `from_dlpack` and `batch_isend`
# do not.
LOADER_TEXT = (rb"(?i)loader|dl(?![a-z0-9])|for\s+\(?\s*" + _BATCH_INDEX.encode() + rb"\s*,"
               rb"|\.backward\(|\.manual_backward\(|def (?:feed_data|set_input)\s*\(")
# A loader of held-out data, by its name: `test_loader`, `testloader`, `val_dl`, `eval_dataloader`.
# A loop over one that runs no backward pass is evaluation code wherever it stands (a script's
# top level, a `main()` that also trains).
EVAL_LOADER = re.compile(
    r"^(?:test|val|valid|validation|eval|evaluation|dev)_?(?:data_?)?(?:loader|dl)s?$",
    re.IGNORECASE)
# Words that name evaluation code, one `_`-separated part of a function name (MEM005/MEM016).
EVAL_WORDS = frozenset({
    "eval", "evaluate", "evaluation", "valid", "validate", "validation", "val", "predict",
    "prediction", "predictions", "infer", "inference", "test", "testing", "score", "embed",
    "extract", "encode",
})


def names_evaluation(name: str) -> bool:
    """Is one ``_``-separated part of the function name ``name`` a word for evaluation
    (``test_pytorch_model``, ``local_infer``, ``get_embeddings``)?"""
    return not EVAL_WORDS.isdisjoint(name.lower().split("_"))


# evaluate(), validate(), test(), predict(), infer*(), eval_epoch(), run_validation(), _evaluate().
# Of the `test_*` names only the loop-shaped ones (`test_epoch`, `test_one_epoch`, `test_loop`)
# count, and not in a test module: elsewhere `test_*` functions are pytest tests (MEM002).
EVAL_FUNCTION = re.compile(
    r"^_*(?:(?:run_|do_)?(?:eval|evaluate|evaluation|predict|inference)(?:_\w+)?|infer\w*|test"
    r"|test_(?:one_)?epoch|test_loop"
    r"|(?:run_|do_)?(?:validate|validation|valid)(?:_(?:one_)?(?:epoch|loop|model|batch|step))?)$"
)
# Container methods that put their last argument into the container (``out.append(v)``).
MUTATORS = frozenset({"append", "extend", "insert", "add", "appendleft"})
# Entry points users call on a fitted estimator (the scikit-learn way), whatever grad mode the
# package's own callers choose.
PREDICT_API = frozenset({"predict", "predict_proba"})
# Lightning runs these hooks under no_grad itself; `*_epoch_end` hooks only aggregate.
FRAMEWORK_HOOK = re.compile(r"^(?:validation|test|predict)_step(?:_end)?$|_epoch_(?:end|start)$")
# A framework's evaluation step on a model: a forward when the user's own loop calls it on a
# model it switched to eval (``model.eval()`` ... ``model.validation_step(batch)``), which a
# framework would have wrapped in no_grad.
_EVAL_STEP_NAMES = r"(?:validation|test|predict)_step"
EVAL_STEP_HOOK = re.compile(rf"^{_EVAL_STEP_NAMES}$")
# Where a file's text defines such a hook (which runs what it calls without grad: a fact the
# project model reads across modules).
EVAL_STEP_DEF = rb"def " + _EVAL_STEP_NAMES.encode() + rb"\s*\("


def framework_train_hook(name: str, is_method: bool) -> bool:
    """A method a training framework calls once per batch: Lightning's and the Hugging Face
    ``Trainer``'s ``training_step``, and the Keras-style ``train_on_batch`` that DeepPavlov's
    trainer and many wrappers call. Its body runs every step, like a step loop's."""
    return is_method and name in ("training_step", "train_on_batch")


def framework_batch_feed(name: str, is_method: bool) -> bool:
    """A method a framework's training loop hands each raw batch to, outside the project:
    BasicSR's ``model.feed_data(data)`` (Real-ESRGAN, GFPGAN and other models built on it
    override it and copy the batch's tensors to the device there), and the
    ``model.set_input(data)`` of the pix2pix/CycleGAN code base and the many built on it
    (DeepLIIF, torch-points3d). Any method of that name in a class body counts: the
    framework's base class is rarely in the project."""
    return is_method and name in ("feed_data", "set_input")


def framework_eval_hook(name: str, is_method: bool) -> bool:
    """A method the training framework calls itself with gradients off: Lightning runs
    ``validation_step``, ``test_step`` and ``predict_step`` under ``no_grad`` or
    ``inference_mode``. Where the project calls such a method (a trainer's own loop), those
    call sites decide instead; this answers only for a method nobody in the project calls."""
    return is_method and EVAL_STEP_HOOK.match(name) is not None
# A model's own machinery: an `.eval()` switch there is part of what the model computes.
MODEL_MACHINERY = frozenset({"forward", "_forward", "__call__", "__init__"})
# `optimizer`, `opt`, `optG`, `opt_d`, `g_optim`, `optimizer_D`, `self.opt`: whose `.step()`
# trains; and an AMP scaler, whose `.step(opt)` does.
OPTIMIZER_NAME = re.compile(r"optim|^opt(?:$|[A-Z_\d])|_opt(?:$|[_\d])", re.IGNORECASE)
SCALER_NAME = re.compile(r"scaler", re.IGNORECASE)
# Modules and losses, by name: the calls whose results the graph analysis says carry an
# autograd graph (memlint.analysis.calls), and that the code gates look for before it runs.
MODEL_WORDS = frozenset({
    "model", "net", "network", "module", "generator", "discriminator", "encoder", "decoder",
    "backbone", "classifier", "critic", "actor", "policy", "teacher", "student", "unet", "vae",
    # Networks named by their kind: `self.gnn(x, edge_index)`, `self.lm(**inputs).logits`.
    "gnn", "lm", "llm", "cnn", "rnn", "lstm", "gru", "mlp",
})
# Role-named sub-networks: `self.model.question_encoder(ids)`, `text_encoder(tokens)`,
# `image_backbone(x)`. Not `_module` (`import_module`) nor `_generator` (data generators).
MODEL_SUFFIXES = ("_encoder", "_decoder", "_backbone", "_classifier", "_network")
# `get_model()`, `build_net()`: return a module rather than run one; `is_peft_model(m)`,
# `set_decoder(d)`, `dispatch_model(m)`, `preprocess_model(m)`, `prepare_for_model(ids)`:
# ask about, set, place, convert or feed one.
NOT_A_FORWARD = re.compile(
    r"^_*(?:get|build|create|load|reload|restore|resume|make|init|setup|prepare|to|wrap|save|copy"
    r"|unwrap|train|evaluate"
    r"|eval|validate|test|run|fit|export|compile|freeze|print|log|count|summari[sz]e|update"
    r"|is|has|set|dispatch|preprocess|postprocess|convert|register)_|_for_model$",
    re.IGNORECASE,
)
# Inference methods a model switched to eval runs: `self.model.predict(x)`,
# `self.net.forward_features(x)`, `model.inference_scoring(h, t)`.
INFERENCE_METHOD = re.compile(
    r"^(?:forward_\w+|predict\w*|infer\w*|inference\w*|encode\w*|decode\w*|embed\w*|score\w*"
    r"|classify\w*|detect\w*|translate\w*|transcribe\w*)$")
# nn.Module's own API: called on a model they run no forward (``model.load_state_dict(sd)``).
MODULE_API = frozenset({
    "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda",
    "double", "eval", "extra_repr", "float", "get_buffer", "get_extra_state", "get_parameter",
    "get_submodule", "half", "ipu", "load_state_dict", "modules", "mtia", "named_buffers",
    "named_children", "named_modules", "named_parameters", "parameters", "register_buffer",
    "register_module", "register_parameter", "requires_grad_", "set_extra_state",
    "set_submodule", "share_memory", "state_dict", "to", "to_empty", "train", "type", "xpu",
    "zero_grad", "generate",
})
# Methods named for changing an object's state rather than computing from inputs.
STATE_METHOD = re.compile(r"^(?:set|reset|add|remove|register|clear|enable|disable|attach"
                          r"|detach|replace|apply|merge|fuse|quantize|prune)(?:_|$)")
# ... or for a quantity or setting of the object rather than an output (``valid_length(n)``).
QUANTITY_METHOD = re.compile(r"(?:^|_)(?:lengths?|sizes?|shapes?|dims?|num|count|len|index"
                             r"|indices|idx|names?|type|mode|config|device|dtype|params?"
                             r"|states?|metrics?|loss(?:es)?|stats?|tokens?|strings?|text"
                             r"|generator|sampler|ids)(?:_|$)")
# Bases that make a class an nn.Module by their name alone.
MODULE_BASES = frozenset({"Module", "LightningModule", "PreTrainedModel", "Sequential"})
# torch.nn.functional losses whose names do not end in `_loss`.
FUNCTIONAL_LOSSES = frozenset({
    "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "ctc_loss",
})


def is_model_word(name: str) -> bool:
    """``model``, ``netG``, ``text_encoder``, ``self.policy``'s last part: a module's name."""
    low = name.lower()
    return (
        low in MODEL_WORDS
        or low.endswith("model")
        or low.endswith("_net")
        or low.endswith(MODEL_SUFFIXES)
        or low.startswith("net")
        or low.endswith("_engine")
    )


def names_a_loss(name: str) -> bool:
    """``criterion``, ``compute_loss``, ``MSELoss``: a name that mentions a loss (the loss
    analysis then drops helpers that only log or read one)."""
    low = name.lower()
    return "loss" in low or "criterion" in low


def forward_by_name(name: str) -> bool:
    """Is a call of this (last) name a module's forward by its name alone? Not a class
    (``Net(...)`` builds one) nor a helper that gets, builds or runs one (``get_model``)."""
    return not (name.lstrip("_")[:1].isupper() or NOT_A_FORWARD.search(name)) and is_model_word(
        name)


# `torch.<factory>(...)` builds a fresh tensor on the host unless given `device=` (MEM010).
# Same values whichever device builds them, so moving `device=` into the call is safe.
# Data-copying constructors (`tensor`, `as_tensor`, `from_numpy`) are deliberately absent:
# their data lives on the host, so `torch.tensor(data, device=d)` also builds a host tensor
# and copies it; moving `device=` in saves nothing.
# Window functions (`torch.hann_window(n_fft)`) are factories too: they take `device=`.
WINDOW_FACTORIES = frozenset({
    "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window",
})
DETERMINISTIC_FACTORIES = frozenset({
    "zeros", "ones", "full", "empty", "arange", "eye", "linspace", "logspace",
}) | WINDOW_FACTORIES
# Legacy typed constructors: given sizes they allocate an uninitialised host tensor, like
# `torch.empty` (`torch.Tensor(b, n).to(device)`); given one argument it may be data.
LEGACY_TENSOR_TYPES = frozenset({
    "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
    "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
})
# `torch.tensor(data)`, `torch.from_numpy(array)`, `torch.FloatTensor(values)` (one argument):
# a new host tensor in pageable memory, whatever it is built from. A DataLoader's pin_memory
# never reaches it, so an asynchronous copy of it overlaps with nothing (MEM003).
COPYING_CONSTRUCTORS = frozenset({"tensor", "from_numpy"}) | LEGACY_TENSOR_TYPES
# On a CUDA device these draw from the CUDA generator, so the numbers change: unsafe fix.
RANDOM_FACTORIES = frozenset({"rand", "randn", "randint", "randperm", "normal"})
# `out=` writes into an existing tensor, `pin_memory=True` and `generator=` (a CPU generator)
# mark deliberate host staging, `device=` is an explicit choice: leave those alone.
STAGING_KEYWORDS = frozenset({"out", "pin_memory", "generator", "device"})

NO_GRAD_NAMES = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})
ENABLE_GRAD_NAMES = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
SET_GRAD_NAMES = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})

# Methods whose result has no autograd history (host values, integer/boolean tensors, detached).
DETACHING_METHODS = frozenset({
    "item", "detach", "detach_", "tolist", "numpy", "asnumpy", "size", "dim", "numel", "argmax",
    "argmin",
    "long", "int", "bool", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
    "all", "any", "nonzero", "data_ptr", "element_size", "get_device", "__float__",
    "state_dict", "keys", "append", "extend", "insert", "zero_grad",
})
# Tensor methods whose result has a graph only if the receiver (or a tensor argument) has
# one: `loss.detach().clone().mean()` carries none.
SAME_GRAPH_METHODS = frozenset({
    "clone", "mean", "sum", "float", "double", "half", "bfloat16", "cpu", "cuda", "to",
    "contiguous", "view", "reshape", "squeeze", "unsqueeze", "flatten", "abs", "sqrt", "exp",
    "log", "norm", "max", "min", "std", "var", "type", "type_as", "pow", "neg", "t",
    "clamp", "clip", "softmax", "log_softmax", "sigmoid", "tanh", "permute", "transpose",
})
# Reductions that return (values, indices): the indices (element 1, `.indices`) are integer
# tensors, never part of an autograd graph (`_, predicted = torch.max(outputs, 1)`). These
# always return the pair; `max`, `min` and `median` only when given a dimension
# (`torch.max(a, b)` is an elementwise maximum, `x.max()` a single value).
PAIRED_REDUCTIONS = frozenset({"topk", "sort", "kthvalue", "mode", "cummax", "cummin"})
DIM_PAIRED_REDUCTIONS = frozenset({"max", "min", "median"})


def returns_indices(name: str | None, dim_given: bool) -> bool:
    """Does a call of reduction ``name`` return (values, indices)? ``dim_given``: a
    dimension is passed as a literal integer (after the tensor, for ``torch.max(x, 1)``)
    or as ``dim=``."""
    return name in PAIRED_REDUCTIONS or (name in DIM_PAIRED_REDUCTIONS and dim_given)


# Attributes that never carry the value's graph (`batch_size`: an int on a loader, its
# sampler, a PyG batch or a config, whatever the receiver).
DETACHED_ATTRIBUTES = frozenset({
    "data", "grad", "shape", "device", "dtype", "requires_grad", "is_cuda", "ndim", "grad_fn",
    "batch_size",
})
# torch functions that build fresh leaf tensors: no history whatever their arguments are.
TORCH_FACTORIES = frozenset({
    "tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "randn", "rand",
    "randint", "zeros_like", "ones_like", "empty_like", "full_like", "randn_like", "rand_like",
    "from_numpy", "as_tensor", "manual_seed", "no_grad", "inference_mode", "device", "load",
    "save", "is_tensor", "numel", "isfinite", "isnan", "isinf", "argmax", "argmin", "eq",
})
# Return annotations that say the function hands back host values only (`-> float`,
# `-> Dict[str, float]`, `-> tuple[float, int]`, `-> Optional[float]`): no autograd graph. A
# container says so only with its element types written (`-> dict` may hold tensors).
_HOST_SCALARS = frozenset({"float", "int", "bool", "str", "None", "Number"})
_HOST_CONTAINERS = frozenset({
    "dict", "Dict", "list", "List", "tuple", "Tuple", "Optional", "Union", "Sequence",
    "Mapping", "MutableMapping", "Iterable", "OrderedDict", "DefaultDict", "defaultdict",
})
_HOST_QUALIFIERS = frozenset({"typing", "collections", "abc", "numbers"})
_ANNOTATION_NAME = re.compile(r"([A-Za-z_][A-Za-z_0-9]*)(\s*\[)?")


def host_annotation(text: str) -> bool:
    """Does a return annotation, as written (``Dict[str, float]``), name host values only:
    Python scalars, and containers whose element types are written and are such values?"""
    scalar = False
    for match in _ANNOTATION_NAME.finditer(text):
        name, subscripted = match.group(1), match.group(2) is not None
        if name in _HOST_SCALARS:
            scalar = True
        elif name in _HOST_CONTAINERS:
            if not subscripted:
                return False
        elif name not in _HOST_QUALIFIERS:
            return False
    return scalar


# Builtins whose result is a host value.
HOST_BUILTINS = frozenset({
    "float", "int", "bool", "str", "len", "round", "repr", "format", "print", "isinstance",
    "hasattr", "range", "enumerate", "id", "type",
})


def grad_switch(name: str, called: bool, has_args: bool, flag: bool | None) -> GradMode | None:
    """The grad mode a ``with`` item or decorator named ``name`` (import-resolved) sets.

    ``called``: written as a call; ``has_args``: the call has a first argument; ``flag``:
    that argument when it is a literal ``True``/``False``. None: it does not touch grad.
    """
    if name in NO_GRAD_NAMES:
        if name == "torch.inference_mode" and called and has_args:
            return "unknown" if flag is None else ("off" if flag else None)
        return "off"
    if name in ENABLE_GRAD_NAMES:
        return "on"
    if name in SET_GRAD_NAMES:
        if not called or not has_args:
            return None
        if flag is None:
            return "unknown"
        return "on" if flag else "off"
    return None


# Wrappers that hand on the host tensor they are given (`nn.Parameter(torch.zeros(n))`,
# the legacy `Variable(...)`): a move of the wrapper still copies the factory's result.
# Top-level packages of other array and autodiff frameworks. A module that imports one of
# them and nothing from torch is that framework's code (a library's JAX or Warp twin of its
# PyTorch agents): its `.item()`, `tape.backward(loss)` and `optimizer.step()` are not torch's,
# and no rule applies to it.
# Keywords asking a model for derivatives of its output with respect to its input, which its
# forward computes with autograd (interatomic potentials: forces, stress, virials).
# Spelled `compute_forces`, `include_forces` (MatterSim), `calc_stress`, `return_virials` ...
DERIVATIVE_REQUESTS = frozenset(
    f"{verb}_{noun}"
    for verb in ("compute", "include", "calc", "calculate", "return", "with", "get", "need")
    for noun in ("force", "forces", "stress", "stresses", "virial", "virials", "hessian",
                 "hessians", "derivatives")
)
FOREIGN_FRAMEWORKS = frozenset({
    "jax", "flax", "optax", "haiku", "equinox", "warp", "tensorflow", "keras", "paddle",
    "mindspore", "mlx", "oneflow",
})
HOST_WRAPPER_NAMES = frozenset({"Parameter", "Variable"})
# Functions that build a mask from the tensor they are given (`torch.triu(torch.ones(n, n), 1)`),
# or reshape or repeat it (`torch.repeat_interleave(torch.arange(n).unsqueeze(0), k, dim=0)`):
# on the host when it is, and the same values on a device.
MASK_FUNCTION_NAMES = frozenset({
    "triu", "tril", "repeat_interleave", "tile", "reshape", "flatten", "unsqueeze", "squeeze",
    "transpose", "permute",
})
# torch functions applied elementwise to one tensor: given a host factory's result and only
# constants besides (`torch.log2(torch.arange(2, k + 2).float())`), their result could as
# well be computed on the device (MEM010, and its code gate).
ELEMENTWISE_FUNCTION_NAMES = frozenset({
    "log", "log2", "log10", "exp", "sqrt", "abs", "neg", "sin", "cos", "sigmoid", "tanh"})
# torch functions of one tensor whose result, given a host factory's, is fixed by it (or
# drawn from it): `torch.bernoulli(torch.full(shape, 0.8))`, `torch.diagflat(torch.ones(d))`.
DERIVING_FUNCTION_NAMES = frozenset({"bernoulli", "diag", "diagflat", "diag_embed"})
# torch functions joining a sequence of tensors: host factories' tensors joined stay on the
# host (`torch.cat([torch.ones(b, 1), torch.zeros(b, t)], dim=1)`).
JOINING_FUNCTION_NAMES = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack",
                                    "dstack", "column_stack", "row_stack"})


# Test code, judged from a file's path alone (see :mod:`memlint.analysis.testcode`): pytest's
# own modules, modules directly inside a tests/testing folder, `testing_*` helpers.
_PYTEST_MODULE = re.compile(r"(?:^|[/\\])(?:test_[^/\\]*|[^/\\]*_test\.py|conftest\.py)$")
_TEST_SUPPORT = re.compile(
    r"(?:^|[/\\])(?:tests?|testing)[/\\][^/\\]+$|(?:^|[/\\])testing_[^/\\]*$"
)


# A `test_*.py` directly inside an examples/scripts/tools/demo folder is a command-line script
# that evaluates a trained model (`examples/test_dcp.py`, `tools/test_net.py`), run with
# argparse, not a module of pytest tests, unless a folder above it is test code itself
# (gpytorch's `test/examples/test_*.py`, accelerate's `test_utils/scripts/test_*.py`).
_SCRIPT_FOLDER = re.compile(r"(?:^|[/\\])(?:examples?|scripts|tools|demos?)[/\\]test_[^/\\]*$")


def _is_evaluation_script(path: str) -> bool:
    if _SCRIPT_FOLDER.search(path) is None:
        return False
    folders = re.split(r"[/\\]", path)[:-1]
    return not any(folder.startswith("test") for folder in folders)


def is_pytest_module(path: str) -> bool:
    """A file pytest collects by default (or its conftest), evaluation scripts named
    ``test_*.py`` in an examples/scripts/tools/demo folder left out."""
    return _PYTEST_MODULE.search(path) is not None and not _is_evaluation_script(path)


# `train_test.py`, `train_validate_test.py`: pytest's pattern, but in ML code often a script
# that trains and tests. Such a name is test code when the file reads like a test module.
_SUFFIX_TEST = re.compile(r"(?:^|[/\\])[^/\\]*_test\.py$")
_TEST_MODULE_TEXT = re.compile(
    r"^(?:import (?:pytest|unittest)\b(?!\.mock)|from (?:pytest|unittest|absl\.testing)\b(?!\.mock)"
    r"|\s*def test_|\s*async def test_|class Test)", re.MULTILINE)


def is_test_code(path: str, source: str | bytes | None = None) -> bool:
    """A pytest module or a test-support module. With the file's ``source``, a ``*_test.py``
    (not ``test_*.py``) counts only when it imports a test framework or defines tests."""
    if _TEST_SUPPORT.search(path) is not None:
        return True
    if not is_pytest_module(path):
        return False
    if source is None or _SUFFIX_TEST.search(path) is None or (
            re.search(r"(?:^|[/\\])test_[^/\\]*$", path) is not None):
        return True
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    return _TEST_MODULE_TEXT.search(text) is not None
