import torch

from imputer.nets import Imputer


def main(size, test_loader):
    model = Imputer(size)
    model.load_state_dict(torch.load("imputer.pt", map_location="cpu"))
    model.eval()
    for x, mask in test_loader:
        print(model(x, mask))  # expect: MEM002
