"""A stripped-down trainer in the shape of the Hugging Face Trainer's inner loop."""

import math

import torch
from torch import nn


class MiniTrainer:
    def __init__(self, model, args, optimizer, lr_scheduler, train_dataloader):
        self.model = model
        self.args = args
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.train_dataloader = train_dataloader
        self.log_history = []
        self._total_loss_scalar = 0.0
        self.accelerator = None

    def compute_loss(self, model, inputs):
        outputs = model(**inputs)
        return outputs["loss"] if isinstance(outputs, dict) else outputs[0]

    def training_step(self, model, inputs):
        model.train()
        loss = self.compute_loss(model, inputs)
        if self.args.gradient_accumulation_steps > 1:
            loss = loss / self.args.gradient_accumulation_steps
        loss.backward()
        return loss.detach()

    def train(self):
        args = self.args
        model = self.model
        tr_loss = torch.tensor(0.0, device=args.device)
        global_step = 0
        steps_in_epoch = len(self.train_dataloader)
        model.zero_grad()

        for epoch in range(math.ceil(args.num_train_epochs)):
            for step, inputs in enumerate(self.train_dataloader):
                inputs = {k: v.to(args.device, non_blocking=True) for k, v in inputs.items()}
                tr_loss_step = self.training_step(model, inputs)
                if args.logging_nan_inf_filter and torch.isnan(tr_loss_step):
                    tr_loss += tr_loss / (1 + global_step)
                else:
                    tr_loss += tr_loss_step

                is_last_step = (step + 1) == steps_in_epoch
                if (step + 1) % args.gradient_accumulation_steps == 0 or is_last_step:
                    if args.max_grad_norm is not None and args.max_grad_norm > 0:
                        nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    self.optimizer.step()
                    self.lr_scheduler.step()
                    model.zero_grad()
                    global_step += 1

                    if global_step % args.logging_steps == 0:
                        tr_loss_scalar = tr_loss.item()
                        tr_loss -= tr_loss
                        self._total_loss_scalar += tr_loss_scalar
                        self.log_history.append(
                            {"loss": round(tr_loss_scalar / args.logging_steps, 4), "step": global_step}
                        )
        return global_step, self._total_loss_scalar / max(global_step, 1)


class MiniTrainerKeepsLosses(MiniTrainer):
    """A subclass that returns the live loss and keeps it: the graph leaks."""

    def step_and_keep(self, model, inputs):
        loss = self.compute_loss(model, inputs)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss

    def run(self):
        kept = []
        for inputs in self.train_dataloader:
            loss = self.step_and_keep(self.model, inputs)
            kept.append(loss)  # expect: MEM001
        return kept
