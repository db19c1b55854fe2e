"""Robustness and interpretability utilities: these run in eval mode but need gradients."""

import torch
import torch.nn.functional as F

device = torch.device("cuda")


def fgsm_attack(image, epsilon, data_grad):
    perturbed = image + epsilon * data_grad.sign()
    return torch.clamp(perturbed, 0, 1)


def test(model, device, test_loader, epsilon):
    correct = 0
    adv_examples = []
    model.eval()
    for data, target in test_loader:
        data, target = data.to(device), target.to(device)  # expect: MEM003
        data.requires_grad = True
        output = model(data)
        init_pred = output.max(1, keepdim=True)[1]
        if init_pred.item() != target.item():
            continue
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        perturbed = fgsm_attack(data, epsilon, data.grad.data)
        output = model(perturbed)
        final_pred = output.max(1, keepdim=True)[1]
        if final_pred.item() == target.item():
            correct += 1
        elif len(adv_examples) < 5:
            adv_examples.append(perturbed.squeeze().detach().cpu().numpy())
    return correct / float(len(test_loader)), adv_examples


def saliency_map(model, image, label):
    model.eval()
    image = image.unsqueeze(0).to(device)
    image.requires_grad_()
    score = model(image)[0, label]
    score.backward()
    return image.grad.abs().max(dim=1)[0].squeeze()


def integrated_gradients(model, image, label, steps=50):
    model.eval()
    baseline = torch.zeros_like(image)
    alphas = torch.linspace(0, 1, steps, device=image.device).view(-1, 1, 1, 1)
    path = (baseline + alphas * (image - baseline)).requires_grad_(True)
    logits = model(path)[:, label]
    grads = torch.autograd.grad(logits.sum(), path)[0]
    return (image - baseline) * grads.mean(0)


class GradCAM:
    def __init__(self, model, target_layer):
        self.model = model
        self.activations = None
        self.gradients = None
        target_layer.register_forward_hook(self._save_activation)
        target_layer.register_full_backward_hook(self._save_gradient)

    def _save_activation(self, module, inputs, output):
        self.activations = output.detach()

    def _save_gradient(self, module, grad_input, grad_output):
        self.gradients = grad_output[0].detach()

    def predict(self, x, class_idx=None):
        self.model.eval()
        logits = self.model(x)
        if class_idx is None:
            class_idx = logits.argmax(1)
        self.model.zero_grad()
        logits.gather(1, class_idx.view(-1, 1)).sum().backward()
        weights = self.gradients.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * self.activations).sum(1))
        return cam / (cam.amax(dim=(1, 2), keepdim=True) + 1e-8)


def pgd_evaluate(model, loader, eps=8 / 255, alpha=2 / 255, iters=10):
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        x_adv = pgd_attack(model, x, y, eps, alpha, iters)
        pred = model(x_adv).argmax(1)
        correct += (pred == y).sum().item()
    return correct / len(loader.dataset)


def pgd_attack(model, x, y, eps, alpha, iters):
    x_adv = x.clone().detach()
    for _ in range(iters):
        x_adv.requires_grad_(True)
        loss = F.cross_entropy(model(x_adv), y)
        grad, = torch.autograd.grad(loss, x_adv)
        x_adv = torch.min(torch.max(x_adv.detach() + alpha * grad.sign(), x - eps), x + eps)
        x_adv = x_adv.clamp(0, 1)
    return x_adv


def evaluate_tta(model, loader, optimizer):
    # Test-time adaptation: the model adapts on each test batch.
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        entropy = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()
        entropy.backward()
        optimizer.step()
        optimizer.zero_grad()
        correct += (logits.argmax(1) == y).sum().item()
    return correct / len(loader.dataset)


def evaluate_clean(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        correct += (model(x).argmax(1) == y).sum().item()  # expect: MEM002
    return correct / len(loader.dataset)
