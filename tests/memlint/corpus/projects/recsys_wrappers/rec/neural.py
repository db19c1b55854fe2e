"""A recommender around a torch model, built lazily so the package imports without torch."""


class NeuralRecommender:
    def fit(self, items):
        from .net import Scorer

        self.model = Scorer(items)
        return self

    def score(self, history):
        self.model.eval()
        preds = self.model(history)  # expect: MEM002
        return preds.detach().cpu().numpy()
