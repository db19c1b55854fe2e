"""MEM005 eval-outputs-retained: evaluation outputs kept across batches with their graphs."""

from __future__ import annotations

from memlint.analysis.evaluation import Collection
from memlint.rules.base import Invalid, Valid
from memlint.rules.eval_collections import EvalCollectionRule


class EvalOutputsRetained(EvalCollectionRule):
    """
    ## What it does
    Flags model outputs (or values computed from them) that an evaluation or inference loop
    collects batch after batch, ``preds.append(model(x))``, while autograd is on, so each
    stored tensor still carries its autograd graph.

    ## Why is this bad?
    Without ``torch.no_grad()`` every forward records a graph that holds the batch's
    activations for a backward pass that never comes. Storing the output in a list that
    outlives the iteration keeps that graph, and all those activations, alive for every batch
    of the evaluation: memory grows linearly with the dataset until the GPU runs out. Moving
    the output with ``.cpu()`` does not help: the copy is recorded in the graph too.

    ## Example
    ```python
    model.eval()
    preds = []
    for x, _ in val_loader:
        preds.append(model(x.cuda()))
    ```

    ## How to fix
    Run evaluation under ``torch.inference_mode()`` (or ``torch.no_grad()``), or store a
    detached copy:
    ```python
    model.eval()
    preds = []
    with torch.inference_mode():
        for x, _ in val_loader:
            preds.append(model(x.cuda()).cpu())
    ```
    Code that trains (calls ``backward()``, an optimizer step or ``autograd.grad``), a
    module's own ``forward``, and outputs passed to a caller that trains are not reported,
    nor a loop over models rather than batches (its target is the model it calls: ``for
    encoder in encoders``, an ensemble's members), which collects one output per model.
    Keeping outputs on the device on purpose is fine once they are detached; the opt-in rule
    MEM016 reports device-resident collections separately.

    Test code (pytest modules, ``tests/`` folders, ``testing_*`` helpers) is not checked.
    Grad switched off by a same-file ``@contextmanager`` (``with evaluating(model):``) counts
    as off, and so do Lightning's ``validation_step``, ``test_step`` and ``predict_step``
    methods and the helpers only they call, which the framework runs under no-grad (unless
    the project calls the hook itself: then its call sites decide). The grad mode comes from
    the project model when the file belongs to a package: a decorator factory or caller in
    another module that switches grad off silences the rule.
    """

    code = "MEM005"
    name = "eval-outputs-retained"
    message = (
        "model output is kept across evaluation batches with its autograd graph; run the loop "
        "under `torch.no_grad()`/`torch.inference_mode()` or store `.detach()`/`.item()`"
    )
    # Evaluation context (a name, `.eval()`, or a DataLoader) and a collection of outputs.
    triggers = ("append(", "extend(", "+=", " for ")
    # `.eval()`, a DataLoader, or an evaluation-named function. Config validators
    # (`def validate_rope`) and model methods (`encode`, `extract_features`) are common in
    # library code and rarely evaluate; such files are checked when they also meet one of
    # the other signals.
    trigger_pattern = (
        rb"\.eval\(|Loader|loader|def validate(?:_(?:epoch|model|one_epoch|loop))?\("
        rb"|def (?:\w*_)?(?i:eval|evaluate|evaluation|validation|val|predict|prediction"
        rb"|predictions|infer|inference|test|testing|score)(?:_\w*)?\("
    )
    # What it keeps must carry a graph, and every graph the analysis knows starts at a module
    # or loss call, a `.loss` output, a `["loss"]` entry or a backward pass in this file.
    code_requires = (("fact:graph-source",),)

    valid = (
        # A Hugging Face pipeline runs the model under no-grad itself and hands back Python
        # objects (labels and scores).
        Valid(
            """
            from transformers import pipeline

            class DocumentClassifier:
                def __init__(self, name, task):
                    if task == "zero-shot-classification":
                        self.model = pipeline(task, model=name)
                    else:
                        self.model = pipeline("text-classification", model=name)

                def predict(self, texts, batch_size=8):
                    predictions = []
                    for batch in self.get_batches(texts, batch_size):
                        predictions.extend(self.model(batch, top_k=1))
                    return predictions
            """
        ),
        # Ensemble members over one fixed input: one output per model, nothing grows batch
        # after batch (a loop over batches around it is still checked).
        Valid("""
            import torch
            def predict_members(models, x_test):
                model_outputs = []
                for model in models:
                    model.eval()
                    model_outputs.append(model(x_test))
                return torch.stack(model_outputs).mean(0)
        """),
        Valid("""
            import torch
            from torch.nn import Sequential
            def predict(model, x, loader):
                feats = []
                for depth in range(len(model)):  # one model per prefix of the layers
                    submodel = Sequential(*model[: depth + 1])
                    feats.append(submodel(x).mean((2, 3)))
                return feats
        """),
        Valid("""
            import torch
            def eval_loss(model, lossfunc, data_loader):
                return sum([lossfunc(model(x).detach(), y) for x, y in data_loader])
        """),
        Valid("""
            import torch
            from diffusers.loaders import TextualInversionLoaderMixin
            class Pipeline(TextualInversionLoaderMixin):
                def encode_prompt(self, prompts, tokenizers, text_encoders):
                    embeds = []  # one output per text encoder of the pipeline, not per batch
                    for prompt, tokenizer, encoder in zip(prompts, tokenizers, text_encoders):
                        out = encoder(tokenizer(prompt))
                        embeds.append(out)
                    return torch.cat(embeds, -1)
        """),
        Valid("""
            import torch
            def predict(model, loader, draws):
                model.eval()
                for x in loader:
                    samples = []  # made afresh for each batch
                    for _ in range(draws):
                        samples.append(model(x))
                    print(torch.stack(samples).mean(0).argmax(1).tolist())
        """),
        Valid("""
            features = []
            for images, _ in loader:
                features.append(encoder(images))
            loss = contrastive(torch.cat(features))
            loss.backward()
        """),
        Valid("""
            def predict(model, loader):
                model.eval()
                labels = []
                for x, _ in loader:
                    _, label = model(x).max(1)
                    labels.append(label)
                return labels
        """),
        Valid("""
            import torch
            model.eval()
            preds = []
            with torch.no_grad():
                for x, _ in val_loader:
                    preds.append(model(x.cuda()))
        """),
        Valid("""
            def evaluate(model, loader):
                model.eval()
                preds = []
                for x, _ in loader:
                    logits = model(x)
                    preds.append(logits.detach())
                    labels.append(logits.argmax(-1).tolist())
                return preds
        """),
        Valid("""
            def forward(self, xs):
                outs = []
                for x in xs:
                    outs.append(self.block(x))
                return torch.cat(outs)
        """),
        Valid("""
            import torch
            import lightning as L
            class Classifier(L.LightningModule):
                def _predict_subject(self, subject):
                    patch_loader = self.sampler(subject)
                    outputs = []
                    for patch in patch_loader:
                        outputs.append(self.forward(patch))
                    return torch.cat(outputs).sum(0)
                def validation_step(self, batch, batch_idx):  # Lightning: grad is off here
                    return self._predict_subject(batch)
        """),
        Valid("""
            for x, y in train_loader:
                out = model(x)
                outputs.append(out)
                loss = criterion(torch.cat(outputs), y)
                loss.backward()
        """),
    )
    invalid = (
        Invalid("""
            import torch
            def predict(models, loader):
                outputs = []
                for x, _ in loader:
                    for model in models:  # the ensemble, every batch
                        outputs.append(model(x))
                return outputs
        """, lines=(7,)),
        Invalid("""
            import torch
            def validate(model, val_loader):
                model.eval()
                outputs = []
                for x, y in val_loader:
                    outputs.append(model(x))
                accuracy = torch.cat(outputs).argmax(1).float().mean().item()
                return accuracy
            def main(model, train_loader, val_loader, opt, crit):
                for epoch in range(10):
                    for x, y in train_loader:
                        opt.zero_grad()
                        crit(model(x), y).backward()
                        opt.step()
                    print(validate(model, val_loader))
        """, lines=(7,)),
        Invalid(
            """
            for images, labels in trainloader:
                loss = criterion(net(images), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            all_outputs = []
            for images, labels in testloader:
                outputs = net(images)
                all_outputs.append(outputs)
            """,
            lines=(10,),
        ),
        Invalid(
            """
            def evaluate(model, loader):
                model.eval()
                preds = []
                for x, _ in loader:
                    logits = model(x)
                    preds.append(logits.softmax(-1).cpu())
                return torch.cat(preds)
            """,
            lines=(7,),
        ),
        Invalid(
            """
            model.eval()
            preds = [model(x.cuda()) for x, _ in test_loader]
            """,
            lines=(3,),
        ),
    )

    def check(self, found: Collection) -> None:
        analysis = self.context.analysis
        if analysis.grad.grad_mode_at(found.site) != "on":
            return
        if analysis.graph.graph_state(found.value) is not True:
            return
        self.report(found.site)
