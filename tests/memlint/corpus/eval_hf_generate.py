"""Fine-tune a causal LM with a plain PyTorch loop, then measure perplexity and sample."""

import math

import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling

MODEL_NAME = "gpt2"
device = "cuda" if torch.cuda.is_available() else "cpu"

tokenizer = AutoTokenizer.from_pretrained(MODEL_NAME)
tokenizer.pad_token = tokenizer.eos_token
model = AutoModelForCausalLM.from_pretrained(MODEL_NAME).to(device)

raw = load_dataset("wikitext", "wikitext-2-raw-v1")
tokenized = raw.map(lambda ex: tokenizer(ex["text"], truncation=True, max_length=128),
                    batched=True, remove_columns=["text"])
collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
train_dataloader = DataLoader(tokenized["train"], batch_size=8, shuffle=True,  # expect: MEM003
                              collate_fn=collator)
eval_dataloader = DataLoader(tokenized["validation"], batch_size=16, collate_fn=collator,
                             pin_memory=True)

optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)


def train_one_epoch():
    model.train()
    progress = tqdm(train_dataloader, desc="train")
    for step, batch in enumerate(progress):
        batch = {k: v.to(device) for k, v in batch.items()}  # expect: MEM003
        outputs = model(**batch)
        loss = outputs.loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 100 == 0:
            progress.set_postfix(loss=loss.item())


def perplexity():
    model.eval()
    losses = []
    for batch in tqdm(eval_dataloader, desc="eval"):
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with torch.no_grad():
            outputs = model(**batch)
        losses.append(outputs.loss.item())
    return math.exp(sum(losses) / len(losses))


def perplexity_slow():
    # The first version of perplexity(): eval mode, but every forward builds a graph.
    model.eval()
    total, count = 0.0, 0
    for batch in eval_dataloader:
        input_ids = batch["input_ids"].to(device)  # expect: MEM003
        labels = batch["labels"].to(device, non_blocking=True)
        outputs = model(input_ids=input_ids, labels=labels)  # expect: MEM002
        total += outputs.loss.item() * input_ids.size(0)
        count += input_ids.size(0)
    return math.exp(total / count)


def sample(prompt, max_new_tokens=50):
    model.eval()
    inputs = tokenizer(prompt, return_tensors="pt").to(device)
    output_ids = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=True,
                                top_p=0.9, pad_token_id=tokenizer.eos_token_id)
    return tokenizer.decode(output_ids[0], skip_special_tokens=True)


def infer(prompts):
    model.eval()
    enc = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
    out = model.generate(**enc, max_new_tokens=20)
    return tokenizer.batch_decode(out, skip_special_tokens=True)


def score_prompts(prompts):
    model.eval()
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    enc = {k: v.to(device) for k, v in enc.items()}
    logits = model(**enc).logits  # expect: MEM002
    return logits[:, -1].softmax(-1).max(-1).values.tolist()


if __name__ == "__main__":
    for epoch in range(3):
        train_one_epoch()
        print(f"epoch {epoch}: perplexity {perplexity():.2f}")
    print(sample("The history of the"))
    print(infer(["Once upon a time", "In a galaxy far away"]))
