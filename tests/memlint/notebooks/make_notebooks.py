"""Writes the notebook corpus (run once; the .ipynb files are committed)."""
import json
from pathlib import Path

HERE = Path("/work/wt15/tests/memlint/notebooks")


def cell(kind, src, i):
    c = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": src.strip("\n").splitlines(True) if kind != "raw-string" else src}
    if kind == "code":
        c = {"cell_type": "code", "execution_count": i, "id": f"cell-{i}", "metadata": {},
             "outputs": [{"name": "stdout", "output_type": "stream", "text": [f"out {i}\n"]}],
             "source": src.strip("\n").splitlines(True)}
    return c


def write(name, cells, indent=1, **extra):
    doc = {"cells": [cell(k, s, i) for i, (k, s) in enumerate(cells)],
           "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                        "language_info": {"name": "python", "version": "3.11.7"}},
           "nbformat": 4, "nbformat_minor": 5}
    doc.update(extra)
    (HERE / name).write_text(json.dumps(doc, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")


write("training.ipynb", [
    ("markdown", "# Training a small classifier\nEvery default rule, spread over cells as a notebook spreads a script."),
    ("code", """
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
losses = []
"""),
    ("code", """
train_loader = DataLoader(train_set, batch_size=64, num_workers=4)  # expect: MEM003
mask = torch.zeros(64, 64).cuda()  # expect: MEM010
scaler = torch.cuda.amp.GradScaler()  # expect: MEM015
"""),
    ("markdown", "## The training loop"),
    ("code", """
for x, y in train_loader:
    x, y = x.to(device), y.to(device)  # expect: MEM003
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss)  # expect: MEM001
"""),
    ("code", """
for x, y in train_loader:
    optimizer.zero_grad(set_to_none=False)  # expect: MEM009
    loss = criterion(model(x), y)
    loss.backward(retain_graph=True)  # expect: MEM008
    optimizer.step()
"""),
    ("code", """
for i, (x, y) in enumerate(train_loader):
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()  # expect: MEM004
"""),
    ("code", """
hidden = rnn.init_hidden(64)
for x, y in batches:
    optimizer.zero_grad()
    out, hidden = rnn(x, hidden)  # expect: MEM007
    criterion(out, y).backward()
    optimizer.step()
"""),
    ("code", """
def evaluate(model, loader):
    model.eval()
    for x, y in loader:
        logits = model(x)  # expect: MEM002
    return logits
"""),
    ("code", """
def embed(encoder, loader):
    encoder.eval()
    return [encoder(x.cuda()) for x, _ in loader]  # expect: MEM005
"""),
    ("code", """
try:
    out = model(batch)
except torch.OutOfMemoryError:
    torch.cuda.empty_cache()
    out = model(batch[: len(batch) // 2])  # expect: MEM006
with torch.no_grad():
    h = checkpoint(block, x)  # expect: MEM011
"""),
])

write("magics.ipynb", [
    ("code", """
%load_ext autoreload
%autoreload 2
%matplotlib inline
import torch
from torch import nn
"""),
    ("code", """
!pip install -q torchvision
files = !ls data
?torch.zeros
torch.randn??
model = nn.Linear(8, 2);
history = []
"""),
    ("code", """
%%bash
for f in *.pt; do echo "$f"; done
history.append(1)
"""),
    ("code", """
%%time
for x, y in loader:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    %time history.append(loss.item())
    history.append(loss)  # expect: MEM001
"""),
    ("code", """
msg = ("final loss %f"
       % history[-1])
text = '''
!not a shell line, a string
'''
print(msg);
"""),
    ("code", """
%%html
<b>not python</b>
"""),
])

write("fixable.ipynb", [
    ("markdown", "Fixes apply to cell sources; outputs, ids and metadata stay."),
    ("code", """
import torch
device = "cuda"
losses = []
"""),
    ("code", """
for x, y in loader:
    x = x.to(device)  # expect: MEM003
    optimizer.zero_grad(set_to_none=False)  # expect: MEM009
    loss = model(x).sum()
    loss.backward()
    optimizer.step()
    losses.append(loss)  # expect: MEM001
    %time step()
"""),
    ("code", """
positions = torch.arange(128).to(device)  # expect: MEM010
with torch.cuda.amp.autocast():  # expect: MEM015
    out = model(positions)
"""),
], indent=2)

(HERE / "broken.ipynb").write_text('{\n "cells": [\n  {"cell_type": "code", "source": ["x = 1\\n"]\n ],\n "nbformat": 4\n}\n', encoding="utf-8")
(HERE / "nbformat3.ipynb").write_text(json.dumps({"worksheets": [{"cells": []}], "metadata": {}, "nbformat": 3, "nbformat_minor": 0}, indent=1) + "\n", encoding="utf-8")
