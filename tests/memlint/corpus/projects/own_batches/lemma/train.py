from .batches import LemmaDataLoader, PaddedDataLoader, ReplayDataLoader


def train_lemmatizer(model, doc, optimizer):
    for src, tgt in LemmaDataLoader(doc, 32):
        optimizer.zero_grad()
        model(src.cuda(), tgt.cuda()).backward()
        optimizer.step()


def train_tagger(model, dataset, optimizer):
    loader = PaddedDataLoader(dataset, 32)  # expect: MEM003
    for batch in loader:
        optimizer.zero_grad()
        model(batch.cuda()).backward()  # expect: MEM003
        optimizer.step()


def train_replay(model, data, buffer, optimizer):
    for batch in ReplayDataLoader(data, buffer, batch_size=32):  # expect: MEM003
        optimizer.zero_grad()
        model(batch.cuda()).backward()  # expect: MEM003
        optimizer.step()
