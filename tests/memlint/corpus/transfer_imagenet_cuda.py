"""ImageNet-style training with explicit GPU indices, in the style of the reference example."""

import argparse
import time

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.utils.data
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms

parser = argparse.ArgumentParser(description="ImageNet training")
parser.add_argument("data", metavar="DIR")
parser.add_argument("-a", "--arch", default="resnet18")
parser.add_argument("-j", "--workers", default=4, type=int)
parser.add_argument("--epochs", default=90, type=int)
parser.add_argument("-b", "--batch-size", default=256, type=int)
parser.add_argument("--lr", default=0.1, type=float)
parser.add_argument("--gpu", default=0, type=int)
parser.add_argument("--print-freq", default=10, type=int)


def main():
    args = parser.parse_args()
    model = models.__dict__[args.arch]()
    torch.cuda.set_device(args.gpu)
    model = model.cuda(args.gpu)
    criterion = nn.CrossEntropyLoss().cuda(args.gpu)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    cudnn.benchmark = True

    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train_dataset = datasets.ImageFolder(
        f"{args.data}/train",
        transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]),
    )
    val_dataset = datasets.ImageFolder(
        f"{args.data}/val",
        transforms.Compose([
            transforms.Resize(256),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            normalize,
        ]),
    )
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=True,
        num_workers=args.workers, pin_memory=True)
    val_loader = torch.utils.data.DataLoader(
        val_dataset, batch_size=args.batch_size, shuffle=False,
        num_workers=args.workers, pin_memory=True)

    for epoch in range(args.epochs):
        train(train_loader, model, criterion, optimizer, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        print(f"epoch {epoch} acc@1 {acc1:.3f}")


def train(train_loader, model, criterion, optimizer, epoch, args):
    model.train()
    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        data_time = time.time() - end
        images = images.cuda(args.gpu, non_blocking=True)
        target = target.cuda(args.gpu)  # expect: MEM003
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % args.print_freq == 0:
            print(f"[{epoch}][{i}/{len(train_loader)}] loss {loss.item():.4f} data {data_time:.3f}")
        end = time.time()


def validate(val_loader, model, criterion, args):
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for images, target in val_loader:
            images = images.cuda(args.gpu, non_blocking=True)
            target = target.cuda(args.gpu, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            correct += (output.argmax(1) == target).sum().item()
            seen += target.size(0)
    return 100.0 * correct / seen


def benchmark_input_pipeline(loader, steps=100):
    # Measures the raw copy throughput to the first GPU.
    start = time.time()
    for step, (images, target) in enumerate(loader):
        images = images.to("cuda:0")  # expect: MEM003
        target = target.to("cuda:0", non_blocking=True)
        if step == steps:
            break
    torch.cuda.synchronize()
    return steps / (time.time() - start)


def channels_last_eval(val_loader, model):
    model = model.to(memory_format=torch.channels_last).eval()
    with torch.no_grad():
        for images, _ in val_loader:
            images = images.to(memory_format=torch.channels_last)
            images = images.cuda(non_blocking=True)
            model(images)


if __name__ == "__main__":
    main()
